// The ring budget (RDMX_RING_BUDGET): run with a budget that admits only a
// few rings, so most pairs of threads are refused one and relay their calls
// as active messages. Every thread calls every thread through
// MessengerGlobal (plain, when_run, call_return) and both
// Aggregators: every call runs exactly once, in order per sender, answers
// arrive, quiet() and the aggregators' phase ends work, and the budget holds.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <vector>

#include "../../src/invoke/messengers.hpp"
#include "rdmx/fabric/job.hpp"
#include "rdmx/fabric/quiet.hpp"
#include "rdmx/invoke/aggregator.hpp"
#include "rdmx/invoke/messenger.hpp"
#include "threads.hpp"

using namespace rdmx;
using rdmx::test::global, rdmx::test::job, rdmx::test::thread_at;

namespace {

constexpr std::uint64_t calls = 3000;  // per sender and destination, per path

std::vector<std::vector<std::atomic<std::uint64_t>>> last_seen;  // [dest thread][sender]
std::atomic<std::uint64_t> out_of_order{0}, executed{0};

void reset() {
  last_seen = std::vector<std::vector<std::atomic<std::uint64_t>>>(job().threads_per_process());
  for (auto& row : last_seen) row = std::vector<std::atomic<std::uint64_t>>(job().total_threads());
  out_of_order = 0;
  executed = 0;
}

void seen(std::uint32_t from, std::uint64_t i, ThreadId dest) {
  if (call_destination() != dest) out_of_order.fetch_add(1);
  auto& last = last_seen[dest.thread][from];
  if (last.load(std::memory_order_relaxed) + 1 != i) out_of_order.fetch_add(1);
  last.store(i, std::memory_order_release);
  executed.fetch_add(1, std::memory_order_relaxed);
}

void serve_until(ThreadId me, std::uint64_t n) {
  for (;;) {
    bool all = true;
    for (std::uint32_t g = 0; g < job().total_threads(); ++g) all = all && last_seen[me.thread][g].load() == n;
    if (all) return;
    progress();
  }
}

const invoke::Messengers& layer() { return fabric::layer<invoke::Messengers>(); }

}  // namespace

// Every thread to every thread: fire-and-forget calls, then a window of
// when_run calls and call_returns, then quiet().
TEST(RingBudget, MessengerAllToAllRunsEveryCallOnce) {
  reset();
  job().barrier();
  const std::uint32_t total = job().total_threads();
  std::atomic<std::uint64_t> wrong_answers{0};
  job().run([&](ThreadId me) {
    MessengerGlobal messenger;
    const std::uint32_t from = global(me);
    Synchronizer consumed;
    std::vector<std::uint64_t> results(total);
    Synchronizer returned;
    for (std::uint64_t i = 1; i <= calls; ++i) {
      for (std::uint32_t g = 0; g < total; ++g) {
        const ThreadId dest = thread_at(g);
        if (i % 100 == 0)
          messenger.call(dest, [from, i, dest] { seen(from, i, dest); }, when_run(consumed));
        else
          messenger.call(dest, [from, i, dest] { seen(from, i, dest); });
      }
      if (i % 256 == 0) progress();
    }
    for (std::uint32_t g = 0; g < total; ++g)
      messenger.call_return(thread_at(g), [g] { return std::uint64_t{g} * 7 + 1; }, into(results[g], returned));
    consumed.wait();
    returned.wait();
    for (std::uint32_t g = 0; g < total; ++g)
      if (results[g] != std::uint64_t{g} * 7 + 1) wrong_answers.fetch_add(1);
    quiet();
    serve_until(me, calls);
  });
  EXPECT_EQ(out_of_order.load(), 0u);
  EXPECT_EQ(wrong_answers.load(), 0u);
  EXPECT_EQ(executed.load(), calls * total * job().threads_per_process());
  job().barrier();
}

TEST(RingBudget, AggregatorsDeliverEverythingAndEndTheirPhase) {
  for (Aggregation mode : {Aggregation::trad, Aggregation::ovfl}) {
    reset();
    job().barrier();
    const std::uint32_t total = job().total_threads();
    job().run([&](ThreadId me) {
      Aggregator agg(mode);
      const std::uint32_t from = global(me);
      for (std::uint64_t i = 1; i <= calls; ++i)
        for (std::uint32_t g = 0; g < total; ++g) {
          const ThreadId dest = thread_at(g);
          agg.call(dest, [from, i, dest] { seen(from, i, dest); });
        }
      agg.shutdown();
      agg.wait_for_shutdowns(total);  // every thread's aggregator called this one
      // Its calls ran before its shutdown signal (one channel, in order).
      for (std::uint32_t g = 0; g < total; ++g)
        if (last_seen[me.thread][g].load() != calls) out_of_order.fetch_add(1);
    });
    EXPECT_EQ(out_of_order.load(), 0u) << (mode == Aggregation::trad ? "trad" : "ovfl");
    EXPECT_EQ(executed.load(), calls * total * job().threads_per_process());
    job().barrier();
  }
}

// The pairs past the budget really took the relayed path, the others have
// rings, and the chunks this process holds stay within its budget.
TEST(RingBudget, RefusedPairsRelayAndTheBudgetHolds) {
  const MessengerOptions options = MessengerOptions::from_env();
  std::atomic<std::uint64_t> relayed{0}, rings{0}, inconsistent{0};
  job().run([&](ThreadId me) {
    for (std::uint32_t g = 0; g < job().total_threads(); ++g) {
      invoke::Messenger& m = invoke::Messengers::current().messenger(thread_at(g));
      const std::size_t chunks = invoke::Inspect::ring_size(m);
      if (m.relayed() != (chunks == 0)) inconsistent.fetch_add(1);
      (m.relayed() ? relayed : rings).fetch_add(1);
    }
    (void)me;
  });
  EXPECT_EQ(inconsistent.load(), 0u);
  EXPECT_EQ(relayed.load(), layer().relayed_messengers());
  EXPECT_LE(layer().ring_bytes(), options.ring_budget);
  std::printf("[ring_budget] process %u: %llu rings, %llu relayed messengers, %zu of %zu bytes of chunks\n", job().rank(),
              static_cast<unsigned long long>(rings.load()), static_cast<unsigned long long>(relayed.load()),
              layer().ring_bytes(), options.ring_budget);
  // The test registers a budget for a few rings among many pairs.
  if (options.ring_budget < std::size_t{job().total_threads()} * job().threads_per_process() * options.chunk_size)
    EXPECT_GT(relayed.load(), 0u) << "no pair was refused a ring";
  if (options.ring_budget == 0) EXPECT_EQ(rings.load(), 0u);
  job().barrier();
}

// Calls still on their way (relayed and on rings) when the job ends: leaving
// serves them or drops them cleanly, never crashes or hangs.
TEST(RingBudget, LeavingWithCallsInFlight) {
  reset();
  job().barrier();
  job().run([&](ThreadId me) {
    MessengerGlobal messenger(Policy::retry_async);
    const std::uint32_t from = global(me);
    for (std::uint64_t i = 1; i <= 200; ++i)
      for (std::uint32_t g = 0; g < job().total_threads(); ++g) {
        const ThreadId dest = thread_at(g);
        messenger.call(dest, [from, i, dest] { seen(from, i, dest); });
      }
  });
  EXPECT_EQ(out_of_order.load(), 0u);
}

// Bad values name the setting.
TEST(RingBudget, BadSettingIsAClearError) {
  const char* saved = std::getenv("RDMX_RING_BUDGET");
  const std::string keep = saved != nullptr ? saved : "";
  for (const char* bad : {"lots", "-1", "12Q", "100T"}) {
    setenv("RDMX_RING_BUDGET", bad, 1);
    try {
      (void)MessengerOptions::from_env();
      ADD_FAILURE() << "RDMX_RING_BUDGET=" << bad << " was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), Errc::invalid_argument) << bad;
      EXPECT_NE(std::string(e.what()).find("RDMX_RING_BUDGET"), std::string::npos) << e.what();
    }
  }
  setenv("RDMX_RING_BUDGET", "0", 1);
  EXPECT_EQ(MessengerOptions::from_env().ring_budget, 0u);
  setenv("RDMX_RING_BUDGET", "3M", 1);
  EXPECT_EQ(MessengerOptions::from_env().ring_budget, std::size_t{3} << 20);
  if (saved != nullptr)
    setenv("RDMX_RING_BUDGET", keep.c_str(), 1);
  else
    unsetenv("RDMX_RING_BUDGET");
}
