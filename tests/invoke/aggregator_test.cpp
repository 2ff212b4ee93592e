// The aggregated call path never drops a call: with tiny queues and rings,
// every thread calls every thread at once (each caller then waits for room,
// serving the others meanwhile), and every call must run exactly once.
#include <gtest/gtest.h>

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
  const std::uint32_t total = job().total_threads();
  std::vector<std::uint64_t> before(job().threads_per_process());
  job().run([&](ThreadId me) { before[me.thread] = Aggregator::shutdowns_received(); });
  job().barrier();
  job().run([&](ThreadId me) {
    Aggregator agg(mode, options);
    const std::uint32_t from = global(me);
    for (std::uint64_t i = 0; i < made_by(from); ++i)
      for (std::uint32_t g = 0; g < total; ++g)
        agg.call(thread_at(g), [from] { got[call_destination().thread][from].fetch_add(1, std::memory_order_relaxed); });
    agg.shutdown();
    while (Aggregator::shutdowns_received() - before[me.thread] < total) progress();
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
