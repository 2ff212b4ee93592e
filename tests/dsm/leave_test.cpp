// A process ends while the others are in a collective allocation: theirs
// fails in bounded time instead of waiting for ever. The last process ends
// right after an allocation every process made, as argv[1] says:
// - `return`: out of main, through ~Space, whose barrier meets the others'
//   allocation: mismatched collectives, Errc::invalid_argument on all,
//   saying that process called barrier;
// - `exit` (std::exit: no destructor of main's runs) or `kill` (SIGKILL):
//   Errc::peer_failed, naming it.
// Its own main: the job cannot end with a collective.
#include <signal.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "rdmx/core/error.hpp"
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
  Job job(argc, argv);
  if (job.size() < 2) return fail("needs at least 2 processes");
  dsm::Space space(job);
  auto* first = static_cast<int*>(dsm::allocate(64));
  const std::uint32_t leaver = job.size() - 1;
  if (job.rank() == leaver) {
    std::printf("dsm: process %u ends (%s) during the next allocation\n", job.rank(), how.c_str());
    std::fflush(stdout);
    if (how == "exit") std::exit(0);
    if (how == "kill") raise(SIGKILL);
    return 0;
  }
  const auto t0 = std::chrono::steady_clock::now();
  try {
    void* second = dsm::allocate(64);
    return fail("an allocation completed without process " + std::to_string(leaver) + " (" +
                std::to_string(static_cast<char*>(second) - reinterpret_cast<char*>(first)) + " bytes on)");
  } catch (const Error& e) {
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const bool left = how == "return";
    const Errc expected = left ? Errc::invalid_argument : Errc::peer_failed;
    const std::string says = left ? "met another collective on another process (process " + std::to_string(leaver) +
                                        " called barrier"
                                  : "process " + std::to_string(leaver) + " has failed";
    if (e.code() != expected || std::string(e.what()).find(says) == std::string::npos)
      return fail(std::string("the allocation failed otherwise (expected ") + to_string(expected) + ", '" + says +
                  "'): " + to_string(e.code()) + ": " + e.what());
    std::printf("dsm: process %u: the allocation failed after %.2f s (%s): %s\n", job.rank(), s, to_string(e.code()), e.what());
  }
  std::fflush(stdout);
  return 0;
}
