// A process ends while the others are in a collective allocation, or in
// dsm::process_barrier (argv[2] `barrier`): theirs fails in bounded time instead of
// waiting for ever. The last process ends right after an allocation every
// process made, as argv[1] says:
// - `return`: out of main, through ~Space. In an allocation, ~Space's job
//   barrier meets the others' allocation: mismatched collectives,
//   Errc::invalid_argument on all, saying that process called barrier. In
//   dsm::process_barrier, ~Space's note that it leaves the space fails it with
//   Errc::shut_down, naming that process;
// - `exit` (std::exit: no destructor of main's runs) or `kill` (SIGKILL):
//   Errc::peer_failed, naming it.
// Its own main: the job cannot end with a collective.
#include <signal.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "rdmx/core/error.hpp"
#include "rdmx/dsm/fence.hpp"
#include "rdmx/dsm/space.hpp"
#include "rdmx/fabric/job.hpp"

using namespace rdmx;

namespace {
int fail(const std::string& what) {
  std::fprintf(stderr, "dsm leave_test: FAILED: %s\n", what.c_str());
  return 1;
}
}  // namespace

int main(int argc, char** argv) {
  const std::string how = argc > 1 ? argv[1] : "";
  if (how != "return" && how != "exit" && how != "kill") return fail("say how the last process ends: return, exit or kill");
  const bool in_barrier = argc > 2 && std::string(argv[2]) == "barrier";
  const char* what = in_barrier ? "barrier" : "allocation";
  Job job(argc, argv);
  if (job.size() < 2) return fail("needs at least 2 processes");
  dsm::Space space(job);
  auto* first = static_cast<int*>(dsm::allocate(64));
  const std::uint32_t leaver = job.size() - 1;
  if (job.rank() == leaver) {
    std::printf("dsm: process %u ends (%s) during the next %s\n", job.rank(), how.c_str(), what);
    std::fflush(stdout);
    if (how == "exit") std::exit(0);
    if (how == "kill") raise(SIGKILL);
    return 0;
  }
  const auto t0 = std::chrono::steady_clock::now();
  try {
    if (in_barrier) {
      dsm::process_barrier();
      return fail("a dsm::process_barrier completed without process " + std::to_string(leaver));
    }
    void* second = dsm::allocate(64);
    return fail("an allocation completed without process " + std::to_string(leaver) + " (" +
                std::to_string(static_cast<char*>(second) - reinterpret_cast<char*>(first)) + " bytes on)");
  } catch (const Error& e) {
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const bool left = how == "return";
    const Errc expected = !left ? Errc::peer_failed : in_barrier ? Errc::shut_down : Errc::invalid_argument;
    // A barrier's failure may come from a call to the dead process ("call to
    // 2/0: process 2 (pid N) has exited"), a probe or the fabric's report.
    const std::string says = !left      ? "process " + std::to_string(leaver) + (in_barrier ? "" : " has failed")
                             : in_barrier ? "process " + std::to_string(leaver) + " has ended its dsm::Space"
                                          : "met another collective on another process (process " + std::to_string(leaver) +
                                                " called barrier";
    if (e.code() != expected || std::string(e.what()).find(says) == std::string::npos)
      return fail(std::string("the ") + what + " failed otherwise (expected " + to_string(expected) + ", '" + says +
                  "'): " + to_string(e.code()) + ": " + e.what());
    std::printf("dsm: process %u: the %s failed after %.2f s (%s): %s\n", job.rank(), what, s, to_string(e.code()), e.what());
  }
  std::fflush(stdout);
  return 0;
}
