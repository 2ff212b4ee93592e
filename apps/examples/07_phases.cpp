// 07_phases: ending a phase of fire-and-forget calls, and collectives.
//   scripts/run --tls shm -np 2 build/apps/examples/rdmx-example-07-phases --rdmx-threads=2
// A bulk-synchronous program alternates phases: every worker thread sends
// calls that nobody waits for one by one, then all agree that the phase is
// over and combine results. rdmx::quiet() waits for this thread's calls to
// have run; rdmx::barrier() waits for every thread; allreduce combines values.
#include <atomic>
#include <cstdio>

#include "rdmx/core/error.hpp"
#include "rdmx/fabric/call.hpp"
#include "rdmx/fabric/collective.hpp"
#include "rdmx/fabric/job.hpp"
#include "rdmx/fabric/quiet.hpp"
#include "rdmx/invoke/messenger.hpp"

// Calls run on their destination worker thread: its own tally, no lock.
thread_local std::uint64_t tally = 0;

// The settings every thread must agree on, decided by one thread.
struct Settings {
  std::uint32_t calls_per_peer;
  std::uint64_t seed;
};

int main(int argc, char** argv) {
  try {
    rdmx::Job job(argc, argv);
    const std::uint32_t threads = job.threads_per_process(), all = job.total_threads();
    std::atomic<int> errors{0};
    auto check = [&](bool ok, const char* what) {
      if (ok) return;
      std::fprintf(stderr, "07_phases: %s\n", what);
      errors.fetch_add(1);
    };

    job.run([&](rdmx::ThreadId me) {
      // broadcast_value: every thread gets thread {0, 0}'s value.
      const Settings settings = rdmx::broadcast_value(Settings{500, 7}, rdmx::ThreadId{0, 0});

      for (std::uint32_t phase = 1; phase <= 3; ++phase) {
        tally = 0;
        rdmx::barrier();  // nobody sends this phase's calls before every tally is reset
        // Fire and forget, over both paths: send-based (no completion: the
        // call returns once sent) and one-sided. Nothing waits for any single call.
        rdmx::MessengerGlobal messenger;
        std::uint64_t sent = 0;
        for (std::uint32_t t = 0; t < all; ++t) {
          const rdmx::ThreadId dest{t / threads, t % threads};
          for (std::uint32_t k = 0; k < settings.calls_per_peer; ++k) {
            const std::uint64_t v = (settings.seed + k) * phase;
            if (k % 2 == 0)
              rdmx::call(dest, [v] { tally += v; });
            else
              messenger.call(dest, [v] { tally += v; });
            sent += v;
          }
        }
        // quiet(): every call this thread made has run at its destination.
        // A barrier alone would not do: it orders execution, not delivery.
        rdmx::quiet();
        rdmx::barrier();  // ... and every other thread's calls have run too
        const std::uint64_t total_sent = rdmx::allreduce(sent, rdmx::op::sum{});
        const std::uint64_t total_seen = rdmx::allreduce(tally, rdmx::op::sum{});
        const std::uint64_t most = rdmx::allreduce(tally, rdmx::op::max{});
        const std::uint64_t least = rdmx::allreduce(tally, rdmx::op::min{});
        check(total_seen == total_sent, "a call of the phase had not run when the phase ended");
        check(least == most, "threads received different tallies");  // every thread got the same calls
        if (me == rdmx::ThreadId{0, 0})
          std::printf("phase %u: %u threads exchanged %llu calls, every thread tallied %llu\n", phase, all,
                      static_cast<unsigned long long>(std::uint64_t{all} * all * settings.calls_per_peer),
                      static_cast<unsigned long long>(most));
      }
    });
    return errors.load() == 0 ? 0 : 1;
  } catch (const rdmx::Error& e) {
    std::fprintf(stderr, "07_phases: %s (%s)\n", e.what(), rdmx::to_string(e.code()));
    return 1;
  }
}
