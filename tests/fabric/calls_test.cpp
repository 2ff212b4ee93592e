// Send-based remote invocation across real processes (started by mpirun).
#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <numeric>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "rdmx/fabric/call.hpp"
#include "rdmx/fabric/job.hpp"

using namespace rdmx;

namespace {
Job& job() { return Job::current(); }
std::uint32_t next_process() { return (job().rank() + 1) % job().size(); }

std::atomic<std::uint64_t> received_from[64];
std::atomic<std::uint64_t> last_sequence[64];
std::atomic<std::uint64_t> order_violations{0};
std::atomic<std::uint64_t> broadcast_hits{0};
}  // namespace

TEST(Calls, ConsumedNotificationMeansItRan) {
  for (auto& r : received_from) r = 0;
  job().barrier();
  Synchronizer sync;
  const std::uint32_t me = job().rank();
  for (std::uint32_t p = 0; p < job().size(); ++p)
    call(ThreadId{p, 0}, [me] { received_from[me].fetch_add(1); }, when_run(sync));
  sync.wait();
  EXPECT_EQ(sync.operations_left(), 0);
  job().barrier();
  for (std::uint32_t p = 0; p < job().size(); ++p) EXPECT_EQ(received_from[p].load(), 1u) << "from process " << p;
}

TEST(Calls, FifoPerSenderUnderLoad) {
  for (auto& s : last_sequence) s = 0;
  order_violations = 0;
  job().barrier();
  const std::uint32_t me = job().rank();
  constexpr std::uint64_t n = 20000;
  Synchronizer sync;
  for (std::uint64_t i = 1; i <= n; ++i) {
    auto f = [me, i] {
      if (last_sequence[me].load() + 1 != i) order_violations.fetch_add(1);
      last_sequence[me].store(i);
    };
    if (i == n)
      call(ThreadId{next_process(), 0}, f, when_run(sync));
    else
      call(ThreadId{next_process(), 0}, f);
    if (i % 256 == 0) progress();  // serve the peer that is flooding us
  }
  sync.wait();
  job().barrier();
  std::uint32_t from = (me + job().size() - 1) % job().size();
  EXPECT_EQ(last_sequence[from].load(), n);
  EXPECT_EQ(order_violations.load(), 0u);
}

TEST(Calls, SentNotificationCountsDown) {
  Synchronizer sync;
  for (int i = 0; i < 100; ++i) call(ThreadId{next_process(), 0}, [] {}, when_sent(sync));
  sync.wait();
  EXPECT_EQ(sync.operations_left(), 0);
  job().barrier();
}

TEST(Calls, CallReturnWritesResultBack) {
  struct Answer {
    std::uint32_t process;
    std::uint64_t square;
  };
  Synchronizer sync;
  std::vector<Answer> answers(job().size());
  for (std::uint32_t p = 0; p < job().size(); ++p) {
    std::uint64_t x = 1000 + p;
    call_return(ThreadId{p, 0}, [x] { return Answer{Job::current().rank(), x * x}; }, into(answers[p], sync));
  }
  sync.wait();
  for (std::uint32_t p = 0; p < job().size(); ++p) {
    EXPECT_EQ(answers[p].process, p);
    EXPECT_EQ(answers[p].square, (1000u + p) * (1000u + p));
  }
  job().barrier();
}

// call_return's future: the value; what the callee threw; a continuation;
// when_all over several, each completed by its own reply while the caller
// waits on the joint future; futures dropped before their replies land.
TEST(Calls, CallReturnFutures) {
  const std::uint32_t n = job().size(), me = job().rank();
  std::vector<Future<std::uint64_t>> futures;
  for (std::uint32_t p = 0; p < n; ++p) {
    const std::uint64_t x = 1000 + p;
    futures.push_back(call_return(ThreadId{p, 0}, [x, me] { return x * x + me + Job::current().rank(); }));
  }
  std::vector<Future<std::uint64_t>> all = when_all(std::move(futures)).get();
  for (std::uint32_t p = 0; p < n; ++p) EXPECT_EQ(all[p].get(), (1000u + p) * (1000u + p) + me + p);

  Future<std::uint64_t> doubled = call_return(ThreadId{next_process(), 0}, [] { return std::uint64_t{21}; })
                                      .then([](std::uint64_t& v) { return v * 2; });
  EXPECT_EQ(doubled.get(), 42u);

  Future<int> failing = call_return(ThreadId{next_process(), 0}, []() -> int { throw std::out_of_range("no such row"); });
  try {
    (void)failing.get();
    ADD_FAILURE() << "the callee's exception did not fail the future";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::remote_exception);
    EXPECT_NE(std::string(e.what()).find("no such row"), std::string::npos) << e.what();
  }

  static std::atomic<int> dropped_ran{0};
  dropped_ran = 0;
  job().barrier();
  for (int i = 0; i < 200; ++i) (void)call_return(ThreadId{next_process(), 0}, [i] { return dropped_ran.fetch_add(1) + i; });
  // Calls from one thread to another run in order: this one runs after them.
  const int ran_before = call_return(ThreadId{next_process(), 0}, [] { return dropped_ran.load(); }).get();
  EXPECT_EQ(ran_before, 200);
  job().barrier();
}

// A result larger than the 4 KiB a reply shares with its header (it used to
// arrive cut to 4 KiB and fail as a protocol error).
TEST(Calls, CallReturnCarriesLargeResults) {
  struct Big {
    std::uint32_t words[16384];
  };
  Synchronizer sync;
  auto big = std::make_unique<Big>();
  const std::uint32_t from = job().rank();
  call_return(ThreadId{next_process(), 0}, [from] {
    Big b;
    for (std::uint32_t i = 0; i < 16384; ++i) b.words[i] = i * 7 + from;
    return b;
  }, into(*big, sync));
  sync.wait();
  for (std::uint32_t i = 0; i < 16384; ++i) ASSERT_EQ(big->words[i], i * 7 + from) << i;
  job().barrier();
}

TEST(Calls, CallBufferSmallAndRendezvous) {
  for (std::size_t size : {std::size_t{0}, std::size_t{100}, std::size_t{64 << 10}, std::size_t{4 << 20}}) {
    std::vector<std::uint32_t> data(size / 4);
    std::iota(data.begin(), data.end(), job().rank() * 7u);
    std::uint64_t expect = std::accumulate(data.begin(), data.end(), std::uint64_t{0});
    std::uint64_t got = 0;
    static std::uint64_t checksum_seen;  // written by the destination thread, read back by call_return
    Synchronizer sync;
    call_buffer(ThreadId{next_process(), 0}, [](std::span<std::byte> bytes) {
      std::uint64_t sum = 0;
      for (std::size_t i = 0; i + 4 <= bytes.size(); i += 4) {
        std::uint32_t v;
        std::memcpy(&v, bytes.data() + i, 4);
        sum += v;
      }
      checksum_seen = sum;
    }, std::as_bytes(std::span(data)), when_run(sync));
    sync.wait();
    // The destination recorded the checksum; ask for it.
    call_return(ThreadId{next_process(), 0}, [] { return checksum_seen; }, into(got, sync));
    sync.wait();
    EXPECT_EQ(got, expect) << "payload of " << size << " bytes";
    job().barrier();
  }
}

TEST(Calls, BroadcastReachesEveryThreadOnce) {
  broadcast_hits = 0;
  job().barrier();
  Synchronizer sync;
  broadcast([] { broadcast_hits.fetch_add(1); }, when_run(sync));
  // Other worker threads of this process are idle in this test: run their share.
  // Every thread serves until all P broadcasts reached all t local threads.
  const std::uint64_t expected = job().size() * job().threads_per_process();
  job().run([&](ThreadId) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (broadcast_hits.load() < expected && std::chrono::steady_clock::now() < deadline) progress();
  });
  sync.wait();
  job().barrier();
  // Every process broadcast once: each of our threads ran each broadcast once.
  EXPECT_EQ(broadcast_hits.load(), job().size() * job().threads_per_process());
}

// The send path's broadcast_buffer: every thread gets the root's bytes,
// whole, once per root; eager and rendezvous sizes, every process a root at
// once (service threads forward each other's payloads).
TEST(Calls, BroadcastBufferCarriesTheBytesToEveryThread) {
  static std::atomic<std::uint64_t> good{0}, bad{0};
  for (const std::size_t base : {std::size_t{3000}, std::size_t{1} << 20}) {
    good = 0;
    bad = 0;
    job().barrier();
    std::vector<std::byte> bytes(base + job().rank());
    for (std::size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<std::byte>(i * 7 + job().rank());
    Synchronizer sync;
    broadcast_buffer([base, root = job().rank()](std::span<std::byte> got) {
      bool ok = got.size() == base + root;
      for (std::size_t i = 0; ok && i < got.size(); ++i) ok = got[i] == static_cast<std::byte>(i * 7 + root);
      (ok ? good : bad).fetch_add(1);
    }, bytes, when_run(sync));
    const std::uint64_t expected = job().size() * job().threads_per_process();
    job().run([&](ThreadId) {
      auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
      while (good.load() + bad.load() < expected && std::chrono::steady_clock::now() < deadline) progress();
    });
    sync.wait();
    job().barrier();
    EXPECT_EQ(bad.load(), 0u) << base << " bytes";
    EXPECT_EQ(good.load(), expected) << base << " bytes";
  }
}

TEST(Calls, WorkerThreadsTalkToEachOther) {
  static std::atomic<std::uint64_t> hits{0};
  hits = 0;
  job().barrier();
  const std::uint32_t t = job().threads_per_process();
  job().run([&](ThreadId me) {
    Synchronizer sync;
    for (std::uint32_t p = 0; p < job().size(); ++p)
      for (std::uint32_t th = 0; th < t; ++th)
        call(ThreadId{p, th}, [] { hits.fetch_add(1); }, when_run(sync));
    sync.wait();
    (void)me;
    // Keep serving until each local thread has been called by every thread of the job.
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (hits.load() < job().size() * t * t && std::chrono::steady_clock::now() < deadline) progress();
  });
  job().barrier();
  EXPECT_EQ(hits.load(), job().size() * t * t);
}

TEST(CallErrors, BadDestinationsAreRejected) {
  try {
    call(ThreadId{job().size(), 0}, [] {});
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::no_such_destination);
  }
  try {
    call(ThreadId{0, job().threads_per_process()}, [] {});
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::no_such_destination);
  }
  job().barrier();
}

TEST(CallErrors, OversizedCapturesAndPayloadsAreRejected) {
  std::array<char, 8192> big{};
  Synchronizer sync;
  try {
    call(ThreadId{next_process(), 0}, [big] { (void)big; }, when_sent(sync));
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::message_too_large);
  }
  EXPECT_EQ(sync.operations_left(), 0);  // a rejected call leaves the synchronizer untouched
  job().barrier();
}

TEST(CallErrors, RemoteExceptionReachesTheCaller) {
  Synchronizer sync;
  call(ThreadId{next_process(), 0}, [] { throw std::out_of_range("boom from far away"); }, when_run(sync));
  try {
    sync.wait();
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::remote_exception);
    // Its type travels too, as actions report it.
    EXPECT_NE(std::string(e.what()).find("std::out_of_range: boom from far away"), std::string::npos) << e.what();
  }
  job().barrier();
}

TEST(CallErrors, UnknownFunctionIdIsReportedNotRun) {
  Synchronizer sync;
  fabric::Outgoing o;
  o.destination = ThreadId{next_process(), 0};
  o.function = 0xdeadbeefcafef00dull;  // no such function anywhere
  o.sync = &sync;
  o.notify = fabric::Notify::consumed;
  fabric::send_call(o);
  try {
    sync.wait();
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::unknown_function);
  }
  job().barrier();
}

// Threads that are not rdmx worker threads send through the process's shared
// service worker; their calls and replies must all arrive.
TEST(Calls, ShortLivedThreadsSendThroughTheServiceWorker) {
  static std::atomic<std::uint64_t> hits{0};
  hits = 0;
  job().barrier();
  constexpr int threads = 4, calls = 50;
  std::atomic<int> finished{0};
  std::vector<std::thread> pool;
  for (int i = 0; i < threads; ++i)
    pool.emplace_back([&] {
      Synchronizer sync;
      for (int k = 0; k < calls; ++k) call(ThreadId{next_process(), 0}, [] { hits.fetch_add(1); }, when_run(sync));
      sync.wait();
      finished.fetch_add(1);
    });
  while (finished.load() < threads) progress();  // serve the calls aimed at this thread meanwhile
  for (auto& t : pool) t.join();
  job().barrier();
  EXPECT_EQ(hits.load(), std::uint64_t{threads} * calls);
}

// when_sent means the payload may be reused: overwriting it right after
// must not change what the destination receives, rendezvous sizes included.
TEST(Calls, SentMeansTheBufferMayBeReused) {
  static std::uint64_t seen_first = 0, seen_last = 0;
  for (std::size_t size : {std::size_t{256}, std::size_t{8 << 20}}) {
    std::vector<std::uint64_t> data(size / 8, 0x1111);
    Synchronizer sent;
    call_buffer(ThreadId{next_process(), 0}, [](std::span<std::byte> bytes) {
      std::memcpy(&seen_first, bytes.data(), 8);
      std::memcpy(&seen_last, bytes.data() + bytes.size() - 8, 8);
    }, std::as_bytes(std::span(data)), when_sent(sent));
    sent.wait();
    std::fill(data.begin(), data.end(), 0x2222);  // reuse the buffer at once
    std::uint64_t first = 0, last = 0;
    Synchronizer ask;
    call_return(ThreadId{next_process(), 0}, [] { return seen_first; }, into(first, ask));
    call_return(ThreadId{next_process(), 0}, [] { return seen_last; }, into(last, ask));
    ask.wait();
    EXPECT_EQ(first, 0x1111u) << size << " bytes";
    EXPECT_EQ(last, 0x1111u) << size << " bytes";
    job().barrier();
  }
}
