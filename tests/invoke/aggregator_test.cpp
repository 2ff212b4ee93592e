// The aggregated call path never drops a call: with tiny queues and rings,
// every thread calls every thread at once (each caller then waits for room,
// serving the others meanwhile), and every call must run exactly once.
#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <vector>

#include "rdmx/fabric/job.hpp"
#include "rdmx/invoke/aggregator.hpp"
#include "rdmx/invoke/messenger.hpp"
#include "threads.hpp"

using namespace rdmx;
using rdmx::test::global, rdmx::test::job, rdmx::test::load_calls, rdmx::test::thread_at;

namespace {
// Calls sender g makes to each thread: different per sender, so a count
// that matches is not a coincidence of equal totals.
std::uint64_t made_by(std::uint32_t g) { return load_calls + 7 * g; }

// [receiving thread][sending thread (global index)]
std::vector<std::vector<std::atomic<std::uint64_t>>> got;

void reset() {
  got = std::vector<std::vector<std::atomic<std::uint64_t>>>(job().threads_per_process());
  for (auto& row : got) row = std::vector<std::atomic<std::uint64_t>>(job().total_threads());
}

// One all-to-all phase: every thread calls every thread (itself included)
// made_by(itself) times, then ends the phase; each receiver checks it ran
// exactly what each sender made.
void all_to_all(Aggregation mode, const AggregatorOptions& options) {
  reset();
  job().barrier();  // no peer calls here before the table is reset
  const std::uint32_t total = job().total_threads();
  job().run([&](ThreadId me) {
    Aggregator agg(mode, options);
    const std::uint32_t from = global(me);
    for (std::uint64_t i = 0; i < made_by(from); ++i)
      for (std::uint32_t g = 0; g < total; ++g)
        agg.call(thread_at(g), [from] { got[call_destination().thread][from].fetch_add(1, std::memory_order_relaxed); });
    agg.shutdown();
    agg.wait_for_shutdowns(total);
    for (std::uint32_t g = 0; g < total; ++g)
      EXPECT_EQ(got[me.thread][g].load(), made_by(g)) << "thread " << to_string(me) << " from sender " << g;
  });
  job().barrier();
}
}  // namespace

// A 64-byte queue: past the ring (small chunks, see CMakeLists.txt) nearly
// every call waits for room. Before back-pressure, ovfl refused such calls.
TEST(Aggregator, OvflWithATinyQueueRunsEveryCallOnce) { all_to_all(Aggregation::ovfl, {4096, 64}); }

TEST(Aggregator, TradUnderBackPressureRunsEveryCallOnce) { all_to_all(Aggregation::trad, {512, 64}); }

// Three phases back to back, no barrier between them: in phase k, sender g
// calls thread d when (g + d + k) % 3 != 0, made_by(g) + k times, so each
// phase has its own set of senders per receiver. A fast thread's next-phase
// calls and shutdown arrive while a slow one still ends the phase before;
// counting shutdowns per phase keeps them apart.
TEST(Aggregator, ThreePhasesEndOneAfterAnother) {
  constexpr std::uint64_t phases = 3;
  std::array<std::vector<std::vector<std::atomic<std::uint64_t>>>, phases> ran;
  for (auto& phase : ran) {
    phase = std::vector<std::vector<std::atomic<std::uint64_t>>>(job().threads_per_process());
    for (auto& row : phase) row = std::vector<std::atomic<std::uint64_t>>(job().total_threads());
  }
  static std::array<std::vector<std::vector<std::atomic<std::uint64_t>>>, phases>* counts;
  counts = &ran;
  const std::uint32_t total = job().total_threads();
  auto calls = [](std::uint32_t from, std::uint32_t to, std::uint64_t k) -> std::uint64_t {
    return (from + to + k) % 3 != 0 ? made_by(from) / 4 + k : 0;
  };
  job().barrier();
  job().run([&](ThreadId me) {
    const std::uint32_t self = global(me);
    for (std::uint64_t k = 0; k < phases; ++k) {
      // The first phase number is set, the next ones follow from it.
      Aggregator agg(Aggregation::ovfl, {4096, 64, k == 0 ? std::uint64_t{1000} : std::uint64_t{0}});
      EXPECT_EQ(agg.phase(), 1000 + k);
      for (std::uint32_t to = 0; to < total; ++to)
        for (std::uint64_t i = 0; i < calls(self, to, k); ++i)
          agg.call(thread_at(to), [self, k] {
            (*counts)[k][call_destination().thread][self].fetch_add(1, std::memory_order_relaxed);
          });
      agg.shutdown();
      std::uint64_t senders = 0;
      for (std::uint32_t from = 0; from < total; ++from) senders += calls(from, self, k) != 0;
      agg.wait_for_shutdowns(senders);
      EXPECT_EQ(agg.shutdowns_received(), senders) << "phase " << k << ": a later phase's shutdown counted here";
      for (std::uint32_t from = 0; from < total; ++from)
        EXPECT_EQ(ran[k][me.thread][from].load(), calls(from, self, k)) << "phase " << k << ", thread " << to_string(me)
                                                                         << " from sender " << from;
    }
  });
  job().barrier();
}
