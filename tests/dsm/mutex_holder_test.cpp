// The last process locks dsm::Mutex 0 and, holding it, ends as argv[1] says:
// - `end_space`: it ends its dsm::Space (~Space) and then the job;
// - `leave_job`: it leaves the job (~Job) with its Space still open.
// Every other process waits in lock(); the wait fails in bounded time with
// Errc::shut_down, naming the holder and what it did, instead of waiting
// for ever for an unlock that cannot come. Its own main: the job cannot
// end with a collective.
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>

#include "rdmx/core/error.hpp"
#include "rdmx/dsm/mutex.hpp"
#include "rdmx/dsm/space.hpp"
#include "rdmx/fabric/job.hpp"

using namespace rdmx;

namespace {
int fail(const std::string& what) {
  std::fprintf(stderr, "dsm mutex_holder_test: FAILED: %s\n", what.c_str());
  return 1;
}
}  // namespace

int main(int argc, char** argv) {
  const std::string how = argc > 1 ? argv[1] : "";
  if (how != "end_space" && how != "leave_job") return fail("say how the holder ends: end_space or leave_job");
  Job job(argc, argv);
  if (job.size() < 2) return fail("needs at least 2 processes");
  auto space = std::make_unique<dsm::Space>(job);
  dsm::Mutex mutex(0);
  const std::uint32_t holder = job.size() - 1;
  if (job.rank() == holder) mutex.lock();
  job.barrier();  // the others wait for a mutex held
  if (job.rank() == holder) {
    std::printf("dsm: process %u ends holding mutex 0 (%s)\n", job.rank(), how.c_str());
    std::fflush(stdout);
    if (how == "end_space")
      space.reset();
    else
      (void)space.release();  // never ended: ~Job meets it open
    return 0;
  }
  const auto t0 = std::chrono::steady_clock::now();
  try {
    mutex.lock();
    return fail("process " + std::to_string(job.rank()) + " locked the mutex process " + std::to_string(holder) + " held");
  } catch (const Error& e) {
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const std::string says = "mutex 0 is held by process " + std::to_string(holder) + ", which " +
                             (how == "end_space" ? "has ended its dsm::Space" : "has left the job");
    if (e.code() != Errc::shut_down || std::string(e.what()).find(says) == std::string::npos)
      return fail(std::string("the lock failed otherwise (expected shut_down, '") + says + "'): " + to_string(e.code()) +
                  ": " + e.what());
    std::printf("dsm: process %u: the lock failed after %.2f s: %s\n", job.rank(), s, e.what());
  }
  std::fflush(stdout);
  return 0;
}
