// rdmx::quiet() ends a phase: after it and a barrier, every call made with
// no completion by every worker thread (send-based, one-sided, aggregated,
// inline call_buffer) has run, across real processes and threads.
#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <random>
#include <thread>

#include "rdmx/fabric/call.hpp"
#include "rdmx/fabric/collective.hpp"
#include "rdmx/fabric/job.hpp"
#include "rdmx/fabric/quiet.hpp"
#include "rdmx/invoke/aggregator.hpp"
#include "rdmx/invoke/messenger.hpp"
#include "../phase_counts.hpp"

using namespace rdmx;

using rdmx::testing::Counts;
using rdmx::testing::max_workers;

namespace {
Job& job() { return Job::current(); }
// ran[t] on this process: calls its worker thread t has run in this phase.
std::array<std::atomic<std::uint64_t>, max_workers> ran;
void arrive(std::uint32_t thread) { ran[thread].fetch_add(1, std::memory_order_relaxed); }
}  // namespace

TEST(Quiet, EveryCallHasRunAfterQuietAndBarrier) {
  const std::uint32_t threads = job().threads_per_process(), workers = job().size() * threads;
  ASSERT_LE(workers, max_workers);
  std::atomic<std::uint64_t> wrong{0};
  job().run([&](ThreadId me) {
    std::mt19937 rng(me.process * 131 + me.thread);
    MessengerGlobal messenger;
    const std::array<std::byte, 40> payload{};
    for (int phase = 0; phase < 5; ++phase) {
      if (me.thread == 0)
        for (auto& r : ran) r.store(0);
      rdmx::barrier();  // counts are reset before anyone calls
      Aggregator aggregator(Aggregation::trad);
      Counts made{};
      for (int i = 0; i < 3000; ++i) {
        const std::uint32_t w = rng() % workers;
        const ThreadId dest{w / threads, w % threads};
        const std::uint32_t t = dest.thread;
        switch (rng() % 4) {
          case 0: call(dest, [t] { arrive(t); }); break;
          case 1: messenger.call(dest, [t] { arrive(t); }); break;
          case 2: aggregator.call(dest, [t] { arrive(t); }); break;
          default: messenger.call_buffer(dest, [t](std::span<std::byte>) { arrive(t); }, payload); break;
        }
        ++made[w];
      }
      aggregator.flush();
      rdmx::quiet();
      rdmx::barrier();
      if (!rdmx::testing::ran_what_was_sent(made, ran[me.thread].load(), me, threads, phase)) wrong.fetch_add(1);
      rdmx::barrier();  // nobody resets the counts while another still reads them
    }
  });
  EXPECT_EQ(wrong.load(), 0u);
}

TEST(Quiet, OutsideAWorkerThreadIsAClearError) {
  std::thread other([] {
    try {
      rdmx::quiet();
      ADD_FAILURE() << "quiet() outside the job's threads did not throw";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), Errc::invalid_argument);
    }
  });
  other.join();
}
