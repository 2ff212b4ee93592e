// Every process fires an aggregated all-to-all burst with a tiny queue (so
// calls wait for room); process 1 stops serving mid-burst and SIGKILLs
// itself. The survivors' waits towards it must end with Errc::peer_failed
// naming it within seconds, never hang. Its own main: the job cannot end
// with a collective.
#include <signal.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>

#include "rdmx/fabric/job.hpp"
#include "rdmx/invoke/aggregator.hpp"

using namespace rdmx;
using Clock = std::chrono::steady_clock;

namespace {
constexpr std::uint32_t victim = 1;

int fail(const std::string& what) {
  std::fprintf(stderr, "aggregator_peer_failure: FAILED: %s\n", what.c_str());
  std::fflush(stderr);
  std::_Exit(1);
}

// Serve the other survivors for a while (they may still wait on calls to
// this process), then leave without the collective teardown.
[[noreturn]] void leave_after_serving() {
  const auto until = Clock::now() + std::chrono::seconds(2);
  while (Clock::now() < until) {
    try {
      progress();
    } catch (const Error&) {
      // publishing towards the dead process fails: nothing to do
    }
  }
  std::fflush(stdout);
  std::_Exit(0);
}
}  // namespace

int main(int argc, char** argv) {
  Job job(argc, argv);
  if (job.size() < 2) return fail("needs at least 2 processes");
  job.barrier();
  Aggregator agg(Aggregation::ovfl, {4096, 64});
  const auto start = Clock::now();
  auto died_at = Clock::time_point{};
  try {
    for (std::uint64_t i = 0;; ++i) {
      for (std::uint32_t p = 0; p < job.size(); ++p) agg.call({p, 0}, [] {});
      if (job.rank() == victim && i == 2000) {
        // The pause without progress lets the survivors fill their queues
        // towards this process, and read every write it sent (over TCP, a
        // write left unread by a dead writer aborts its target: docs/fabric.md).
        agg.flush();
        std::this_thread::sleep_for(std::chrono::milliseconds(300));
        raise(SIGKILL);
      }
      if (Clock::now() - start > std::chrono::seconds(60)) return fail("no peer_failed within 60 s");
    }
  } catch (const Error& e) {
    died_at = Clock::now();
    const std::string what = e.what();
    if (e.code() != Errc::peer_failed) return fail("unexpected error: " + what);
    if (what.find("process 1") == std::string::npos && what.find("thread 1/") == std::string::npos)
      return fail("the error does not name process 1: " + what);
    std::printf("aggregator peer failure detected on process %u after %.0f ms of burst: %s\n", job.rank(),
                std::chrono::duration<double, std::milli>(died_at - start).count(), what.c_str());
  }
  leave_after_serving();
}
