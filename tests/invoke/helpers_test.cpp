// RDMX_HELPERS=H: helper threads run the one-sided calls addressed to the
// worker threads, so calls to a thread that is busy (inside Job::run, not
// progressing) still run, in order, and are answered. Run with
// --rdmx-threads=2 and 1 or 2 helpers. Without helpers these tests hang:
// every destination thread spins until its calls have run.
#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstring>
#include <vector>

#include "rdmx/fabric/job.hpp"
#include "rdmx/fabric/rma.hpp"
#include "rdmx/invoke/aggregator.hpp"
#include "rdmx/invoke/messenger.hpp"
#include "rdmx/memory/arena.hpp"

using namespace rdmx;

namespace {
Job& job() { return Job::current(); }

constexpr std::size_t max_threads = 16;
std::array<std::atomic<std::uint64_t>, max_threads> got{};
std::atomic<std::uint64_t> disorder{0}, on_worker{0}, runs{0};

// Spin without calling into rdmx (a thread busy with its own work) until
// `done`, for at most a minute.
template <class Done>
bool busy_until(Done done) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!done())
    if (std::chrono::steady_clock::now() > deadline) return false;
  return true;
}

void reset() {
  for (auto& g : got) g = 0;
  disorder = on_worker = runs = 0;
}
}  // namespace

TEST(Helpers, ConfiguredAsAsked) {
  const char* h = std::getenv("RDMX_HELPERS");
  ASSERT_NE(h, nullptr) << "run this test with RDMX_HELPERS set";
  ASSERT_LE(job().threads_per_process(), max_threads);
  EXPECT_EQ(job().helpers_per_process(), std::stoul(h));
  EXPECT_NE(job().describe().find(std::string(h) + " helper threads per process"), std::string::npos) << job().describe();
  // Helpers are addressable worker slots after the application's threads.
  EXPECT_NO_THROW(MessengerGlobal().call({job().rank(), job().threads_per_process()}, [] {}));
  EXPECT_THROW(MessengerGlobal().call({job().rank(), job().threads_per_process() + static_cast<std::uint32_t>(std::stoul(h))}, [] {}), Error);
  job().barrier();
}

// Every thread sends to the same-numbered thread of the next process and then
// spins until its own predecessor's calls have all run: only a helper can
// have run them. Order per sender, the consumed notification and call_return
// (answered by the helper, as itself) are checked.
TEST(Helpers, RunTheCallsOfBusyWorkers) {
  const std::uint32_t threads = job().threads_per_process();
  reset();
  job().barrier();
  const std::uint32_t next = (job().rank() + 1) % job().size();
  // More than the ring holds at c_max, so the sender also meets back-pressure
  // that only a helper's consumption relieves.
  const auto options = MessengerOptions::from_env();
  const std::uint64_t n = options.max_chunks * (options.chunk_size / 24) + 20000;
  job().run([&](ThreadId me) {
    MessengerGlobal messenger;
    const ThreadId dest{next, me.thread};
    for (std::uint64_t seq = 1; seq <= n; ++seq)
      messenger.call(dest, [seq, t = me.thread, threads] {
        if (got[t].load() + 1 != seq) disorder.fetch_add(1);
        if (this_thread().thread < threads) on_worker.fetch_add(1);
        got[t].store(seq);
      });
    Synchronizer sync;
    std::uint32_t ran_on = 0;
    messenger.call_return(dest, [] { return this_thread().thread; }, into(ran_on, sync));
    messenger.call(dest, [] {}, when_run(sync));
    messenger.flush();
    EXPECT_TRUE(busy_until([&] { return got[me.thread].load() == n; })) << "thread " << me.thread << " got "
                                                                         << got[me.thread].load() << " of " << n;
    sync.wait();
    EXPECT_GE(ran_on, threads) << "call_return ran on a worker thread, not a helper";
  });
  EXPECT_EQ(disorder.load(), 0u);
  EXPECT_EQ(on_worker.load(), 0u);
  job().barrier();
}

// A buffer the destination reads from the caller's memory (call_buffer's
// third form), and one RDMA-written into a destination buffer first: both
// complete while the destination thread is busy.
TEST(Helpers, CallBuffersReachBusyWorkers) {
  reset();
  job().barrier();
  const std::uint32_t next = (job().rank() + 1) % job().size();
  job().run([&](ThreadId me) {
    MessengerGlobal messenger;
    const ThreadId dest{next, me.thread};
    std::vector<std::byte> data(64 * 1024);
    for (std::size_t i = 0; i < data.size(); ++i) data[i] = static_cast<std::byte>(i * 7 + me.thread);
    memory::Block block = job().arena().allocate_chunk(data.size());
    std::memcpy(block.data, data.data(), data.size());
    Synchronizer sync;
    auto check = [t = me.thread](std::span<std::byte> b) {
      bool ok = b.size() == 64 * 1024;
      for (std::size_t i = 0; ok && i < b.size(); ++i) ok = b[i] == static_cast<std::byte>(i * 7 + t);
      if (!ok) disorder.fetch_add(1);
      got[t].fetch_add(1);
    };
    messenger.call_buffer(dest, check, local_locator(block.data, data.size()), when_run(sync));
    messenger.call_buffer(dest, check, std::span<const std::byte>(data), when_run(sync));
    messenger.flush();
    EXPECT_TRUE(busy_until([&] { return got[me.thread].load() == 2; }));
    sync.wait();
    job().arena().release_chunk(block);
  });
  EXPECT_EQ(disorder.load(), 0u);
  job().barrier();
}

// A broadcast runs once for every worker thread of the job (helpers are not
// its members), here all on helpers; an Aggregator's shutdown signal counts
// for the thread it was addressed to even though a helper runs it.
TEST(Helpers, BroadcastAndAggregatorShutdown) {
  const std::uint32_t threads = job().threads_per_process();
  reset();
  job().barrier();  // no peer calls here before the counts are reset
  const std::uint32_t next = (job().rank() + 1) % job().size();
  job().run([&](ThreadId me) {
    Synchronizer sync;
    if (job().rank() == 0 && me.thread == 0)
      MessengerGlobal().broadcast([] { runs.fetch_add(1); }, when_run(sync));
    Aggregator aggregator(Aggregation::trad);
    for (std::uint32_t i = 0; i < 1000; ++i) aggregator.call({next, me.thread}, [t = me.thread] { got[t].fetch_add(1); });
    aggregator.shutdown();  // one signal to {next, me.thread}
    EXPECT_TRUE(busy_until([&] { return got[me.thread].load() == 1000; }));
    EXPECT_TRUE(busy_until([&] { return aggregator.shutdowns_received() == 1; }));
    if (job().rank() == 0 && me.thread == 0) sync.wait();
  });
  job().barrier();
  EXPECT_EQ(runs.load(), threads);
  job().barrier();
}
