// RDMX_SERVE_IDLE=1: the service thread stands in for worker threads that
// are not running (outside Job::run): calls addressed to them run, as them,
// and their retry_async queues drain after they left. Run with 2 processes
// and --rdmx-threads=2; thread 1 only exists inside Job::run.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "rdmx/fabric/job.hpp"
#include "rdmx/invoke/messenger.hpp"

using namespace rdmx;

namespace {
Job& job() { return Job::current(); }
}  // namespace

TEST(ServeIdle, CallsToAThreadOutsideRunAreServed) {
  ASSERT_GE(job().threads_per_process(), 2u);
  static std::atomic<int> ran{0};
  ran = 0;
  job().barrier();
  const ThreadId idle{(job().rank() + 1) % job().size(), 1};
  MessengerGlobal messenger;
  Synchronizer sync;
  std::uint32_t as = 99;
  messenger.call(idle, [] {
    if (this_thread().thread == 1) ran.fetch_add(1);
  }, when_run(sync));
  messenger.call_return(idle, [] { return this_thread().thread; }, into(as, sync));
  call(idle, [] {  // send-based
    if (this_thread().thread == 1) ran.fetch_add(1);
  }, when_run(sync));
  RemoteObject<Synchronizer> by_rdma;
  RemoteObject<std::uint32_t> answer;
  messenger.call_return(idle, [] { return this_thread().thread * 10 + 7; }, into(answer, by_rdma));
  sync.wait();
  by_rdma->wait();
  EXPECT_EQ(as, 1u) << "the call ran as another thread";
  EXPECT_EQ(*answer, 17u);
  job().barrier();
  EXPECT_EQ(ran.load(), 2);
  job().barrier();
}

// Thread 1 of process 0 queues more retry_async calls than the ring holds
// (process 1's thread 0 is parked, not consuming), then leaves Job::run. Its
// queue must still go out, in order, once process 1 consumes again.
TEST(ServeIdle, RetryAsyncQueueDrainsAfterItsThreadLeft) {
  if (job().size() < 2) GTEST_SKIP() << "needs two processes";
  static std::atomic<bool> go{false}, parked{false};
  static std::atomic<std::uint64_t> got{0}, disorder{0};
  go = parked = false;
  got = disorder = 0;
  const auto options = MessengerOptions::from_env();
  const std::uint64_t n = options.max_chunks * (options.chunk_size / 24) + 50000;
  job().barrier();
  if (job().rank() == 0) {
    while (!parked.load()) progress();
    job().run([&](ThreadId me) {
      if (me.thread != 1) return;
      MessengerGlobal messenger(Policy::retry_async);
      for (std::uint64_t seq = 1; seq <= n; ++seq)
        messenger.call({1, 0}, [seq] {
          if (got.load() + 1 != seq) disorder.fetch_add(1);
          got.store(seq);
        });
    });  // thread 1 is gone; what it queued is left to the service thread
    call(ThreadId{1, service_thread}, [] { go = true; });
  } else if (job().rank() == 1) {
    Synchronizer sync;
    call(ThreadId{0, service_thread}, [] { parked = true; }, when_sent(sync));
    sync.wait();
    while (!go.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (got.load() < n && std::chrono::steady_clock::now() < deadline) progress();
    EXPECT_EQ(got.load(), n);
    EXPECT_EQ(disorder.load(), 0u);
  }
  job().barrier();
}
