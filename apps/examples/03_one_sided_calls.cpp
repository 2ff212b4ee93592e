// 03_one_sided_calls: calls written straight into the destination's memory.
//   scripts/run --tls shm -np 2 build/apps/examples/rdmx-example-03-one-sided-calls --rdmx-threads=2
// A MessengerGlobal (rdmx/invoke/messenger.hpp) serializes each call into a
// ring of registered memory at its destination thread with RDMA writes; the
// destination finds it by polling its own memory. An Aggregator batches many
// small calls into few writes. Both are for worker threads, inside Job::run.
#include <atomic>
#include <cstdio>

#include "rdmx/core/error.hpp"
#include "rdmx/fabric/job.hpp"
#include "rdmx/invoke/aggregator.hpp"
#include "rdmx/invoke/messenger.hpp"

// One-sided calls run on the worker thread they are addressed to, so a
// thread_local is that thread's own counter, with no lock.
thread_local std::uint64_t received = 0;

int main(int argc, char** argv) {
  try {
    rdmx::Job job(argc, argv);
    const std::uint32_t n = job.size(), threads = job.threads_per_process(), all = job.total_threads();
    std::atomic<int> errors{0};
    auto check = [&](bool ok, rdmx::ThreadId me, const char* what) {
      if (ok) return;
      std::fprintf(stderr, "03_one_sided_calls: thread %s: %s\n", rdmx::to_string(me).c_str(), what);
      errors.fetch_add(1);
    };

    job.run([&](rdmx::ThreadId me) {
      // 1. A messenger: the same call family as rdmx::call, over RDMA writes.
      // The messengers are the thread's; this object is only a handle to them.
      rdmx::MessengerGlobal messenger;
      const rdmx::ThreadId peer{(me.process + 1) % n, me.thread};
      // get() progresses: runs the calls other threads sent here meanwhile.
      const rdmx::ThreadId answered = messenger.call_return(peer, [] { return rdmx::this_thread(); }).get();
      check(answered == peer, me, "call_return was answered by another thread");

      // 2. An aggregator: every thread sends 1000 tiny calls to every other
      // thread of the job. Aggregation::trad packs them into one RDMA write
      // per 4 KiB; they run in the order each sender made them.
      constexpr std::uint64_t calls = 1000;
      rdmx::Aggregator aggregator(rdmx::Aggregation::trad);
      for (std::uint32_t t = 0; t < all; ++t) {
        const rdmx::ThreadId dest{t / threads, t % threads};
        if (dest == me) continue;
        for (std::uint64_t k = 1; k <= calls; ++k) aggregator.call(dest, [k] { received += k; });
      }
      // shutdown() flushes and tells every destination this sender is done;
      // since that notice follows the calls, a thread that has counted every
      // peer's shutdown has run every peer's calls: the end of the phase.
      aggregator.shutdown();
      aggregator.wait_for_shutdowns(all - 1);
      check(received == (all - 1) * calls * (calls + 1) / 2, me, "aggregated calls were lost or ran twice");
      std::printf("[%s] answered by %s; %llu aggregated calls from %u threads\n", rdmx::to_string(me).c_str(),
                  rdmx::to_string(answered).c_str(), static_cast<unsigned long long>((all - 1) * calls), all - 1);
    });
    return errors.load() == 0 ? 0 : 1;
  } catch (const rdmx::Error& e) {
    std::fprintf(stderr, "03_one_sided_calls: %s (%s)\n", e.what(), rdmx::to_string(e.code()));
    return 1;
  }
}
