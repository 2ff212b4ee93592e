// Leaving a job over TCP completes its flushes instead of waiting them out.
// Every worker thread leaves work for teardown towards every thread of the
// job, its own process included (over TCP a process reaches its own other
// workers through loopback connections, and one-sided writes are emulated
// with messages the target acknowledges): send-based calls it never waits
// for and one-sided writes it never flushes. ~Job must deliver them all; a
// worker whose endpoint flush gives up (the 5 s limit of
// ThreadContext::flush) logs "gave up flushing", which fails the test
// (tests/fabric/CMakeLists.txt). The time ~Job took is printed for the
// record, not asserted: a loaded machine may be slow for other reasons.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <vector>

#include "rdmx/core/error.hpp"
#include "rdmx/fabric/call.hpp"
#include "rdmx/fabric/collective.hpp"
#include "rdmx/fabric/job.hpp"
#include "rdmx/fabric/rma.hpp"

namespace {
std::atomic<std::uint64_t> arrived{0};
}

int main(int argc, char** argv) {
  std::optional<rdmx::Job> job;
  try {
    job.emplace(argc, argv);
  } catch (const rdmx::Error& e) {
    std::fprintf(stderr, "exit_test: %s\n", e.what());
    return 1;
  }
  const std::uint32_t processes = job->size();
  const std::uint32_t threads = job->threads_per_process();
  constexpr int calls_per_thread = 64;
  // One 8-byte word per writing thread in each process's arena.
  std::vector<rdmx::RemoteLocator> words(processes);
  std::vector<std::uint64_t> sources(threads);
  job->run([&](rdmx::ThreadId me) {
    if (me.thread == 0)
      for (std::uint32_t p = 0; p < processes; ++p) words[p] = rdmx::allocate_remote(p, 8 * threads);
    rdmx::barrier();
    sources[me.thread] = me.process * 1000 + me.thread + 1;
    for (std::uint32_t p = 0; p < processes; ++p) {
      for (std::uint32_t t = 0; t < threads; ++t)
        for (int i = 0; i < calls_per_thread; ++i)
          rdmx::call(rdmx::ThreadId{p, t}, [] { arrived.fetch_add(1, std::memory_order_relaxed); });
      (void)rdmx::post_put(&sources[me.thread], words[p].slice(8 * me.thread, 8));
    }
  });
  const auto left = std::chrono::steady_clock::now();
  const std::uint32_t rank = job->rank();
  // Every thread of the job called each of this process's threads.
  const std::uint64_t expected = std::uint64_t{processes} * threads * threads * calls_per_thread;
  job.reset();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - left).count();
  const std::uint64_t got = arrived.load();
  std::printf("exit_test: process %u ran %llu of %llu calls; ~Job took %.3f s\n", rank,
              static_cast<unsigned long long>(got), static_cast<unsigned long long>(expected), seconds);
  if (got != expected) {
    std::printf("exit_test: FAILED, calls were lost in teardown\n");
    return 1;
  }
  return 0;
}
