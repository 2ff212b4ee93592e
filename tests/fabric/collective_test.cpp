// Collectives of worker threads (rdmx/fabric/collective.hpp) across real
// processes, each with several worker threads (--rdmx-threads).
#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <thread>

#include "rdmx/fabric/call.hpp"
#include "rdmx/fabric/collective.hpp"
#include "rdmx/fabric/job.hpp"

using namespace rdmx;

namespace {
Job& job() { return Job::current(); }
std::uint32_t workers() { return job().size() * job().threads_per_process(); }
std::uint32_t index_of(ThreadId t) { return t.process * job().threads_per_process() + t.thread; }

// round_seen[i] on process p: the last round worker i reported to p.
std::array<std::atomic<std::uint64_t>, 256> round_seen;

struct Stats {
  std::uint32_t count;
  double total;
  std::int64_t lowest;
};
}  // namespace

// Every worker tells every process its round and waits until that ran; after
// the barrier, every process must have heard round r from every worker. A
// barrier that let anyone through early shows an older round.
TEST(Collective, BarrierSeparatesPhases) {
  ASSERT_LE(workers(), round_seen.size());
  for (auto& r : round_seen) r = 0;
  job().barrier();
  std::atomic<std::uint64_t> stale{0};
  job().run([&](ThreadId me) {
    for (std::uint64_t round = 1; round <= 20; ++round) {
      Synchronizer sync;
      const std::uint32_t i = index_of(me);
      for (std::uint32_t p = 0; p < job().size(); ++p)
        call(ThreadId{p, static_cast<std::uint32_t>((me.thread + round) % job().threads_per_process())},
                               [i, round] { round_seen[i].store(round); }, when_run(sync));
      sync.wait();
      rdmx::barrier();
      for (std::uint32_t w = 0; w < workers(); ++w)
        if (round_seen[w].load() != round) stale.fetch_add(1);
      rdmx::barrier();  // nobody starts the next round while others still read this one
    }
  });
  EXPECT_EQ(stale.load(), 0u);
}

TEST(Collective, AllreduceWithBuiltinAndUserOperations) {
  std::atomic<std::uint64_t> wrong{0};
  job().run([&](ThreadId me) {
    const std::uint32_t n = workers();
    const std::int64_t i = index_of(me);
    for (int rep = 0; rep < 10; ++rep) {
      if (allreduce(i + rep, op::sum{}) != std::int64_t{n} * (n - 1) / 2 + std::int64_t{n} * rep) wrong++;
      if (allreduce(i, op::min{}) != 0) wrong++;
      if (allreduce(static_cast<double>(i), op::max{}) != n - 1) wrong++;
      // A user operation on a struct, as a captureless lambda.
      const Stats s = allreduce(Stats{1, 0.5 * i, -i}, [](Stats a, Stats b) {
        return Stats{a.count + b.count, a.total + b.total, std::min(a.lowest, b.lowest)};
      });
      if (s.count != n || s.total != 0.25 * n * (n - 1) || s.lowest != -std::int64_t{n - 1}) wrong++;
    }
  });
  EXPECT_EQ(wrong.load(), 0u);
}

TEST(Collective, BroadcastValueFromEveryRoot) {
  std::atomic<std::uint64_t> wrong{0};
  job().run([&](ThreadId me) {
    for (std::uint32_t p = 0; p < job().size(); ++p)
      for (std::uint32_t t = 0; t < job().threads_per_process(); ++t) {
        const std::array<std::uint32_t, 4> mine{me.process, me.thread, 7, 11};
        const auto got = broadcast_value(mine, ThreadId{p, t});
        if (got != std::array<std::uint32_t, 4>{p, t, 7, 11}) wrong++;
      }
  });
  EXPECT_EQ(wrong.load(), 0u);
}

TEST(Collective, MisuseIsAClearError) {
  // Not from a thread outside Job::run's workers.
  std::string outside;
  std::thread([&] {
    try {
      rdmx::barrier();
    } catch (const Error& e) {
      outside = e.what();
    }
  }).join();
  EXPECT_NE(outside.find("worker threads"), std::string::npos) << outside;
  // A root that is not a worker thread.
  job().run([&](ThreadId) {
    EXPECT_THROW(broadcast_value(1, ThreadId{job().size(), 0}), Error);
    EXPECT_THROW(broadcast_value(1, ThreadId{0, job().threads_per_process()}), Error);
  });
  // Threads that meet in different collectives get an error, not a hang.
  std::atomic<std::uint64_t> errors{0};
  job().run([&](ThreadId me) {
    try {
      if (me.process == 0 && me.thread == 0)
        allreduce(std::uint64_t{1}, op::sum{});
      else
        allreduce(1.0, op::sum{});
    } catch (const Error& e) {
      if (e.code() == Errc::invalid_argument) errors++;
    }
  });
  EXPECT_EQ(errors.load(), job().threads_per_process());
  job().barrier();
}
