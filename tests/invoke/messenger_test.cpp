// One-sided remote invocation (Messenger) across real processes and threads.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <numeric>
#include <thread>
#include <vector>

#include "rdmx/fabric/job.hpp"
#include "rdmx/fabric/rma.hpp"
#include "rdmx/invoke/aggregator.hpp"
#include "rdmx/invoke/messenger.hpp"
#include "threads.hpp"
#include "rdmx/memory/arena.hpp"

using namespace rdmx;
using rdmx::test::global, rdmx::test::job, rdmx::test::load_calls, rdmx::test::thread_at;

namespace {

// [receiving thread][sending thread (global index)]
std::vector<std::vector<std::atomic<std::uint64_t>>> last_seen;
std::atomic<std::uint64_t> out_of_order{0};
std::atomic<std::uint64_t> executed{0};

// Rank 1's thread 0 stops polling before rank 0 starts filling its ring:
// it says so with a send-based call to rank 0's service thread, then sleeps
// until `go`.
std::atomic<bool> parked{false};
void park_until(std::atomic<bool>& go) {
  Synchronizer sync;
  call(ThreadId{0, service_thread}, [] { parked = true; }, when_sent(sync));
  sync.wait();
  while (!go.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
}
void wait_until_parked() {
  while (!parked.load()) progress();
  parked = false;
}

// Calls that check they run in order: in_order(1), in_order(2), ...
std::atomic<std::uint64_t> in_order_got{0}, in_order_disorder{0};
auto in_order(std::uint64_t seq) {
  return [seq] {
    if (in_order_got.load() + 1 != seq) in_order_disorder.fetch_add(1);
    in_order_got.store(seq);
  };
}

// Rank 0 runs fill(release) against rank 1's thread 0, parked (not polling)
// until release() or fill's end. fill makes in_order calls to {1, 0} and
// returns how many it made; all of them must then run once, in order.
// Returns (on rank 1) how many ran.
std::uint64_t against_parked_receiver(const std::function<std::uint64_t(const std::function<void()>&)>& fill) {
  static std::atomic<bool> go{false};
  go = false;
  in_order_got = 0;
  in_order_disorder = 0;
  job().barrier();
  if (job().rank() == 0) {
    wait_until_parked();
    bool released = false;
    auto release = [&] {
      if (!released) call(ThreadId{1, service_thread}, [] { go = true; });
      released = true;
    };
    const std::uint64_t total = fill(release);
    release();
    // A consumed notification through the same messenger runs after them all.
    Synchronizer sync;
    MessengerGlobal().call({1, 0}, [total] {
      if (in_order_got.load() != total) in_order_disorder.fetch_add(1);
    }, when_run(sync));
    sync.wait();
  } else if (job().rank() == 1) {
    park_until(go);
  }
  job().barrier();  // serves calls while it waits
  if (job().rank() == 1) EXPECT_EQ(in_order_disorder.load(), 0u);
  const std::uint64_t ran = in_order_got.load();
  job().barrier();
  return ran;
}

void reset_tables() {
  const std::uint32_t t = job().threads_per_process();
  last_seen = std::vector<std::vector<std::atomic<std::uint64_t>>>(t);
  for (auto& row : last_seen) row = std::vector<std::atomic<std::uint64_t>>(job().total_threads());
  out_of_order = 0;
  executed = 0;
}

// Call i (1, 2, ...) from sender `from` runs on `dest`: counts it, and
// whether it came in order.
void seen(std::uint32_t from, std::uint64_t i, ThreadId dest) {
  EXPECT_EQ(call_destination(), dest);
  auto& last = last_seen[dest.thread][from];
  if (last.load(std::memory_order_relaxed) + 1 != i) out_of_order.fetch_add(1);
  // Release: whoever sees the count (serve_until_all_seen) sees this call
  // done, also when a helper thread ran it.
  last.store(i, std::memory_order_release);
  executed.fetch_add(1, std::memory_order_relaxed);
}

// Serve calls until every sender's n-th call has run on `me`.
void serve_until_all_seen(MessengerGlobal& messenger, ThreadId me, std::uint64_t n) {
  messenger.flush();
  for (;;) {
    bool all = true;
    for (std::uint32_t g = 0; g < job().total_threads(); ++g) all = all && last_seen[me.thread][g].load() == n;
    if (all) return;
    messenger.process_calls();
  }
}
}  // namespace

// Every thread calls every thread (itself included) n times; each call runs
// exactly once, in order per sender, on the thread it was sent to.
TEST(Messenger, AllToAllExactlyOnceInOrder) {
  reset_tables();
  job().barrier();
  constexpr std::uint64_t n = load_calls;
  const std::uint32_t total = job().total_threads();
  job().run([&](ThreadId me) {
    MessengerGlobal messenger;
    const std::uint32_t from = global(me);
    for (std::uint64_t i = 1; i <= n; ++i) {
      for (std::uint32_t g = 0; g < total; ++g) {
        const ThreadId dest = thread_at(g);
        messenger.call(dest, [from, i, dest] { seen(from, i, dest); });
      }
      if (i % 512 == 0) messenger.process_calls();
    }
    serve_until_all_seen(messenger, me, n);
  });
  EXPECT_EQ(out_of_order.load(), 0u);
  EXPECT_EQ(executed.load(), n * total * job().threads_per_process());
  job().barrier();
}

// A plain call goes straight into the chunk its messenger left open (shared
// memory); every other call, and any call to another destination, goes
// through the messenger, which first takes over what was written. Mixed in
// random runs, with captures of several sizes, every call must still run
// once, in order per sender, on its thread.
TEST(Messenger, InlinedAndMessengerCallsKeepOrder) {
  reset_tables();
  job().barrier();
  constexpr std::uint64_t n = load_calls;
  const std::uint32_t total = job().total_threads();
  std::atomic<std::uint64_t> bad_payload{0};
  job().run([&](ThreadId me) {
    MessengerGlobal messenger;
    const std::uint32_t from = global(me);
    std::vector<std::uint64_t> next(total, 1);
    std::uint64_t rng = 0x9e3779b97f4a7c15ull * (from + 1), remaining = n * total;
    std::uint32_t g = from % total;
    while (remaining > 0) {
      rng = rng * 6364136223846793005ull + 1442695040888963407ull;
      const std::uint64_t r = rng >> 33;
      if (r % 16 == 0 || next[g] > n) g = (g + 1) % total;  // runs of ~16 calls per destination
      if (next[g] > n) continue;
      const ThreadId dest = thread_at(g);
      const std::uint64_t i = next[g]++;
      --remaining;
      switch (r / 16 % 64) {
        case 0: {  // through the messenger: a buffer travels with it
          std::array<std::uint64_t, 5> bytes{i, i, i, i, i};
          messenger.call_buffer(dest, [from, i, dest, &bad_payload](std::span<std::byte> b) {
            std::uint64_t first = 0;
            std::memcpy(&first, b.data(), sizeof first);
            if (b.size() != 40 || first != i) bad_payload.fetch_add(1);
            seen(from, i, dest);
          }, std::as_bytes(std::span(bytes)));
          break;
        }
        case 1: {  // through the messenger, waited for (serves calls meanwhile)
          Synchronizer sync;
          messenger.call(dest, [from, i, dest] { seen(from, i, dest); }, when_run(sync));
          sync.wait();
          break;
        }
        case 2:
        case 3: {  // inlined, 200 bytes of captures
          std::array<std::uint64_t, 25> big;
          big.fill(i * 3);
          messenger.call(dest, [from, i, dest, big, &bad_payload] {
            if (big[0] != i * 3 || big[24] != i * 3) bad_payload.fetch_add(1);
            seen(from, i, dest);
          });
          break;
        }
        default:  // inlined, 24 bytes
          messenger.call(dest, [from, i, dest] { seen(from, i, dest); });
      }
      if (remaining % 512 == 0) messenger.process_calls();
    }
    serve_until_all_seen(messenger, me, n);
  });
  EXPECT_EQ(out_of_order.load(), 0u);
  EXPECT_EQ(bad_payload.load(), 0u);
  EXPECT_EQ(executed.load(), n * total * job().threads_per_process());
  job().barrier();
}

TEST(Messenger, ConsumedNotificationAndCallReturn) {
  // Calls to a thread run only while it progresses: every thread keeps
  // serving until it has run the 2 calls each thread sends it.
  static std::vector<std::atomic<int>> served;
  served = std::vector<std::atomic<int>>(job().threads_per_process());
  job().barrier();
  job().run([&](ThreadId me) {
    MessengerGlobal messenger;
    Synchronizer sync;
    const std::uint32_t total = job().total_threads();
    std::vector<std::uint64_t> answers(total, 0);
    std::atomic<int> ran{0};
    for (std::uint32_t g = 0; g < total; ++g) {
      const std::uint64_t x = 1000 + global(me) * 7 + g;
      messenger.call_return(thread_at(g), [x] {
        served[call_destination().thread].fetch_add(1);
        return x * x + call_destination().thread;
      }, into(answers[g], sync));
      std::atomic<int>* counter = me.process == thread_at(g).process ? &ran : nullptr;
      messenger.call(thread_at(g), [counter] {
        served[call_destination().thread].fetch_add(1);
        if (counter != nullptr) counter->fetch_add(1);
      }, when_run(sync));
    }
    sync.wait();
    EXPECT_EQ(sync.operations_left(), 0);
    EXPECT_EQ(ran.load(), static_cast<int>(job().threads_per_process()));
    for (std::uint32_t g = 0; g < total; ++g) {
      const std::uint64_t x = 1000 + global(me) * 7 + g;
      EXPECT_EQ(answers[g], x * x + thread_at(g).thread) << "from thread " << g;
    }
    while (served[me.thread].load() < static_cast<int>(2 * total)) messenger.process_calls();
  });
  job().barrier();
}

// Every completion on every path: call_return as a future over a messenger
// and an aggregator, and completions in registered memory given to the
// paths that answer them by message (send-based, aggregated).
TEST(Messenger, EveryCompletionOnEveryPath) {
  static std::vector<std::atomic<int>> served;
  served = std::vector<std::atomic<int>>(job().threads_per_process());
  job().barrier();
  job().run([&](ThreadId me) {
    MessengerGlobal messenger;
    Aggregator aggregator(Aggregation::ovfl);
    RemoteObject<Synchronizer> remote_sync;
    const std::uint32_t total = job().total_threads();
    std::vector<Future<std::uint64_t>> futures;
    std::vector<std::unique_ptr<RemoteObject<std::uint64_t>>> sent_back;
    for (std::uint32_t g = 0; g < total; ++g) {
      const std::uint64_t x = 2000 + global(me) * 7 + g;
      auto square = [x] {
        served[call_destination().thread].fetch_add(1);
        return x * x;
      };
      futures.push_back(messenger.call_return(thread_at(g), square));
      futures.push_back(aggregator.call_return(thread_at(g), square));
      sent_back.push_back(std::make_unique<RemoteObject<std::uint64_t>>(0));
      call_return(thread_at(g), [x] {
        served[this_thread().thread].fetch_add(1);
        return x + 1;
      }, into(*sent_back.back(), remote_sync));
      aggregator.call(thread_at(g), [] { served[call_destination().thread].fetch_add(1); }, when_run(remote_sync));
    }
    aggregator.flush();
    std::vector<Future<std::uint64_t>> done = when_all(std::move(futures)).get();
    remote_sync->wait();
    for (std::uint32_t g = 0; g < total; ++g) {
      const std::uint64_t x = 2000 + global(me) * 7 + g;
      EXPECT_EQ(done[2 * g].get(), x * x) << "messenger, thread " << g;
      EXPECT_EQ(done[2 * g + 1].get(), x * x) << "aggregator, thread " << g;
      EXPECT_EQ(**sent_back[g], x + 1) << "send-based into a RemoteObject, thread " << g;
    }
    aggregator.shutdown();
    while (served[me.thread].load() < static_cast<int>(4 * total)) messenger.process_calls();
  });
  job().barrier();
}

// The same exchange answered by RDMA: results land in registered
// RemoteObjects and each consumed call is one atomic decrement of the
// caller's registered Synchronizer (no message back).
TEST(Messenger, AnswersByRdmaIntoRemoteObjects) {
  static std::vector<std::atomic<int>> served;
  served = std::vector<std::atomic<int>>(job().threads_per_process());
  job().barrier();
  job().run([&](ThreadId me) {
    struct Answer {
      std::uint64_t square;
      std::uint32_t process, thread;
      char text[40];
    };
    MessengerGlobal messenger;
    RemoteObject<Synchronizer> sync;
    const std::uint32_t total = job().total_threads();
    std::vector<std::unique_ptr<RemoteObject<Answer>>> answers;
    std::atomic<int> ran{0};
    for (int round = 0; round < 3; ++round) {
      for (std::uint32_t g = 0; g < total; ++g) {
        answers.push_back(std::make_unique<RemoteObject<Answer>>());
        const std::uint64_t x = 1000 + global(me) * 7 + g + round;
        messenger.call_return(thread_at(g), [x] {
          served[call_destination().thread].fetch_add(1);
          Answer a{x * x, call_destination().process, call_destination().thread, {}};
          std::snprintf(a.text, sizeof a.text, "answer %llu", static_cast<unsigned long long>(x));
          return a;
        }, into(*answers.back(), sync));
        std::atomic<int>* counter = me.process == thread_at(g).process ? &ran : nullptr;
        messenger.call(thread_at(g), [counter] {
          served[call_destination().thread].fetch_add(1);
          if (counter != nullptr) counter->fetch_add(1);
        }, when_run(sync));
      }
    }
    sync->wait();
    EXPECT_EQ(sync->operations_left(), 0);
    EXPECT_EQ(ran.load(), static_cast<int>(3 * job().threads_per_process()));
    for (int round = 0; round < 3; ++round) {
      for (std::uint32_t g = 0; g < total; ++g) {
        const Answer& a = **answers[round * total + g];
        const std::uint64_t x = 1000 + global(me) * 7 + g + round;
        EXPECT_EQ(a.square, x * x);
        EXPECT_EQ(ThreadId(a.process, a.thread), thread_at(g));
        EXPECT_EQ(std::string(a.text), "answer " + std::to_string(x));
      }
    }
    // A failure still arrives, as a message, in the registered Synchronizer.
    RemoteObject<Synchronizer> failing;
    messenger.call(thread_at((global(me) + 1) % total), [] {
      served[call_destination().thread].fetch_add(1);
      throw std::runtime_error("no answer by RDMA");
    }, when_run(failing));
    try {
      failing->wait();
      ADD_FAILURE() << "no exception";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), Errc::remote_exception);
      EXPECT_NE(std::string(e.what()).find("no answer by RDMA"), std::string::npos) << e.what();
    }
    while (served[me.thread].load() < static_cast<int>(6 * total + 1)) messenger.process_calls();
  });
  job().barrier();
}

TEST(Messenger, CallBufferCarriesItsBytes) {
  std::atomic<std::uint64_t> bad{0}, good{0};
  job().barrier();
  const ThreadId dest{(job().rank() + 1) % job().size(), 0};
  MessengerGlobal messenger;
  Synchronizer sync;
  std::vector<std::byte> data(std::min<std::size_t>(5000, MessengerOptions::from_env().chunk_size - 256));
  std::atomic<std::uint64_t>* bad_p = &bad;
  std::atomic<std::uint64_t>* good_p = &good;
  const bool local = dest.process == job().rank();
  for (std::size_t size = 0; size < data.size(); size += 37) {
    for (std::size_t i = 0; i < size; ++i) data[i] = static_cast<std::byte>(i * 31 + size);
    messenger.call_buffer(dest, [size, local, bad_p, good_p](std::span<std::byte> got) {
      bool ok = got.size() == size;
      for (std::size_t i = 0; ok && i < size; ++i) ok = got[i] == static_cast<std::byte>(i * 31 + size);
      if (local) (ok ? good_p : bad_p)->fetch_add(1);
      if (!ok) { std::fprintf(stderr, "buffer mismatch: got %zu bytes, want %zu\n", got.size(), size); std::abort(); }  // fails the test on that process
    }, std::span(data).first(size), when_run(sync));
  }
  sync.wait();
  if (job().size() == 1) {
    EXPECT_EQ(bad.load(), 0u);
    EXPECT_GT(good.load(), 0u);
  }
  job().barrier();
}

// A call made with Publish::at_once reaches its destination while the
// caller does not progress at all; a batched one would wait for the
// caller's next progress (or publish_bytes more calls). Where UCX emulates
// RDMA (TCP), the write itself needs the caller's progress to leave.
TEST(Messenger, PublishAtOnceNeedsNoProgressFromTheCaller) {
  static std::atomic<bool> heard{false};
  heard = false;
  job().barrier();
  if (job().size() >= 2 && job().rank() == 0 && !rma_emulated(1)) {
    MessengerGlobal(Policy::retry, Publish::at_once).call({1, 0}, [] {
      call(ThreadId{0, service_thread}, [] { heard = true; });  // rank 0's service thread progresses by itself
    });
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (!heard.load() && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    EXPECT_TRUE(heard.load()) << "a call published at once did not run while its caller was idle";
  }
  job().barrier();
}

TEST(Messenger, RemoteExceptionReachesTheCaller) {
  MessengerGlobal messenger;
  Synchronizer sync;
  const ThreadId dest{(job().rank() + 1) % job().size(), 0};
  messenger.call(dest, [] { throw std::runtime_error("boom from afar"); }, when_run(sync));
  try {
    sync.wait();
    ADD_FAILURE() << "no exception";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::remote_exception);
    EXPECT_NE(std::string(e.what()).find("boom from afar"), std::string::npos) << e.what();
  }
  job().barrier();
}

TEST(Messenger, CallLargerThanAChunkIsRejected) {
  MessengerGlobal messenger;
  const ThreadId dest{(job().rank() + 1) % job().size(), 0};
  std::vector<std::byte> big(MessengerOptions::from_env().chunk_size);
  try {
    messenger.call_buffer(dest, [](std::span<std::byte>) {}, big);
    ADD_FAILURE() << "no exception";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::message_too_large);
    EXPECT_NE(std::string(e.what()).find("RDMX_CHUNK_SIZE"), std::string::npos) << e.what();
  }
  EXPECT_THROW(messenger.call(ThreadId{job().size(), 0}, [] {}), Error);
  EXPECT_THROW(messenger.call(ThreadId{0, service_thread}, [] {}), Error);
  if (job().size() > 1) {  // a broadcast's buffer to read must be the root's own
    Synchronizer sync;
    const RemoteLocator elsewhere{(job().rank() + 1) % job().size(), 0, 0, 8};
    EXPECT_THROW(messenger.broadcast_buffer([](std::span<std::byte>) {}, elsewhere, when_run(sync)), Error);
    EXPECT_EQ(sync.operations_left(), 0);
  }
  job().barrier();
}

// A receiver that does not poll: the sender fills c_max chunks, then
// try_call refuses (false); once the receiver drains, calls get through. Every accepted call runs exactly once, in order.
TEST(Messenger, BackPressureFailsThenRecovers) {
  if (job().size() < 2) GTEST_SKIP() << "needs two processes";
  if (job().helpers_per_process() != 0) GTEST_SKIP() << "helper threads consume for the parked receiver";
  const std::uint64_t ran = against_parked_receiver([](const std::function<void()>& release) {
    MessengerGlobal messenger;
    std::uint64_t accepted = 0;
    while (accepted < 50'000'000 && messenger.try_call({1, 0}, in_order(accepted + 1))) ++accepted;
    EXPECT_LT(accepted, 50'000'000u) << "the sender never ran out of chunks";
    std::printf("[messenger] refused after %llu calls\n", static_cast<unsigned long long>(accepted));
    release();
    for (int k = 0; k < 100000; ++k) messenger.call({1, 0}, in_order(++accepted));
    return accepted;
  });
  if (job().rank() == 1) EXPECT_GT(ran, 100000u);
}

// Both aggregation modes: everything arrives once, in order per sender, and
// each thread counts one shutdown per peer aggregator that called it.
TEST(Aggregator, TradAndOvflDeliverEverythingInOrder) {
  for (Aggregation mode : {Aggregation::trad, Aggregation::ovfl}) {
    reset_tables();
    job().barrier();  // no peer calls here before the tables are reset
    constexpr std::uint64_t n = load_calls / 2;
    const std::uint32_t total = job().total_threads();
    job().run([&](ThreadId me) {
      Aggregator agg(mode);
      const std::uint32_t from = global(me);
      for (std::uint64_t i = 1; i <= n; ++i) {
        for (std::uint32_t g = 0; g < total; ++g) {
          const ThreadId dest = thread_at(g);
          agg.call(dest, [from, i, dest] {
            auto& last = last_seen[dest.thread][from];
            if (last.load(std::memory_order_relaxed) + 1 != i) out_of_order.fetch_add(1);
            last.store(i, std::memory_order_relaxed);
            executed.fetch_add(1, std::memory_order_relaxed);
          });
        }
        if (i % 1024 == 0) progress();
      }
      agg.shutdown();
      EXPECT_THROW(agg.call(me, [] {}), Error);
      // A shutdown runs after everything its aggregator sent: once all peers
      // are counted, all their calls have run here.
      agg.wait_for_shutdowns(total);
      for (std::uint32_t g = 0; g < total; ++g) EXPECT_EQ(last_seen[me.thread][g].load(), n);
    });
    EXPECT_EQ(out_of_order.load(), 0u) << (mode == Aggregation::trad ? "trad" : "ovfl");
    EXPECT_EQ(executed.load(), n * total * job().threads_per_process());
  }
  job().barrier();
}

// ovfl towards a receiver that does not poll: calls queue locally (in
// registered memory) once c_max chunks are full; at the limit a call waits
// (serving this thread) until the receiver, released from another thread,
// makes room. Nothing is refused: every call runs once, in order.
TEST(Aggregator, OvflWaitsAtItsLimitAndDropsNothing) {
  if (job().size() < 2) GTEST_SKIP() << "needs two processes";
  if (job().helpers_per_process() != 0) GTEST_SKIP() << "helper threads consume for the parked receiver";
  against_parked_receiver([](const std::function<void()>& release) {
    const auto options = MessengerOptions::from_env();
    const std::uint64_t ring_calls = options.max_chunks * ((options.chunk_size - 64) / 24);
    constexpr std::size_t limit = 1 << 20;
    // Twice what the ring and the queue hold: the loop cannot end before the
    // receiver is released.
    const std::uint64_t total = ring_calls + 2 * (limit / 24);
    std::atomic<bool> released{false};
    std::thread releaser([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      released = true;
      release();
    });
    {
      Aggregator agg(Aggregation::ovfl, {4096, limit});
      for (std::uint64_t i = 1; i <= total; ++i) agg.call({1, 0}, in_order(i));
      EXPECT_TRUE(released.load()) << "calls past the limit did not wait for the receiver";
    }
    releaser.join();
    return total;
  });
}

// Seriema's second call_buffer: the buffer is RDMA-written into memory the
// caller allocated in the destination's process, then the call runs on it.
TEST(Messenger, CallBufferWrittenIntoTheDestinationsBuffer) {
  const ThreadId dest{(job().rank() + 1) % job().size(), 0};
  const RemoteLocator landing = allocate_remote(dest.process, 4096);
  std::vector<std::byte> data(3000);
  for (std::size_t i = 0; i < data.size(); ++i) data[i] = static_cast<std::byte>(i * 7 + job().rank());
  MessengerGlobal messenger;
  Synchronizer sent, consumed;
  const std::uint32_t from = job().rank();
  messenger.call_buffer(dest, [](std::span<std::byte>) {}, data, landing, when_sent(sent));
  sent.wait();  // the write has left `data`
  messenger.call_buffer(dest, [from](std::span<std::byte> got) {
    bool ok = got.size() == 3000;
    for (std::size_t i = 0; ok && i < got.size(); ++i) ok = got[i] == static_cast<std::byte>(i * 7 + from);
    if (!ok) throw std::runtime_error("the written buffer does not hold the caller's bytes");
  }, data, landing, when_run(consumed));
  consumed.wait();  // throws if the check failed remotely
  // The buffer must be in the destination's process, and big enough.
  EXPECT_THROW(messenger.call_buffer(dest, [](std::span<std::byte>) {}, std::span(data), landing.slice(0, 100)), Error);
  job().barrier();
  free_remote(landing);
  job().barrier();
}

// Seriema's third call_buffer: the destination RDMA-reads the caller's
// registered buffer, then runs the call on its own copy.
TEST(Messenger, CallBufferReadByTheDestination) {
  const ThreadId dest{(job().rank() + 1) % job().size(), 0};
  memory::Block block = job().arena().allocate_chunk(8192);
  for (std::size_t i = 0; i < 8192; ++i) block.data[i] = static_cast<std::byte>(i * 13 + job().rank());
  const RemoteLocator orig = local_locator(block.data, 8192);
  MessengerGlobal messenger;
  Synchronizer read, ran;
  const std::uint32_t from = job().rank();
  auto check = [from](std::span<std::byte> got) {
    bool ok = got.size() == 8192;
    for (std::size_t i = 0; ok && i < got.size(); ++i) ok = got[i] == static_cast<std::byte>(i * 13 + from);
    if (!ok) throw std::runtime_error("the read buffer does not hold the caller's bytes");
  };
  messenger.call_buffer(dest, check, orig, when_sent(read));
  read.wait();  // the destination has read `orig`
  messenger.call_buffer(dest, check, orig, when_run(ran));
  ran.wait();
  job().barrier();
  job().arena().release_chunk(block);
}

// The destination reads a buffer without blocking: calls from the same
// sender still run in order behind the read (and see its effect).
TEST(Messenger, ReadCallBufferKeepsSenderOrder) {
  const ThreadId dest{(job().rank() + 1) % job().size(), 0};
  constexpr std::size_t size = 4 << 20;
  memory::Block block = job().arena().allocate_chunk(size);
  for (std::size_t i = 0; i < size; i += 4096) block.data[i] = static_cast<std::byte>(i / 4096 + job().rank());
  const RemoteLocator orig = local_locator(block.data, size);
  static std::atomic<std::uint64_t> step{0};
  step = 0;
  job().barrier();
  MessengerGlobal messenger;
  Synchronizer ran;
  const std::uint32_t from = job().rank();
  for (std::uint64_t round = 0; round < 4; ++round) {
    messenger.call_buffer(dest, [from, round](std::span<std::byte> got) {
      for (std::size_t i = 0; i < got.size(); i += 4096)
        if (got[i] != static_cast<std::byte>(i / 4096 + from)) throw std::runtime_error("wrong bytes read");
      if (got.size() != size || step.load() != 2 * round) throw std::runtime_error("read call out of order");
      step.fetch_add(1);
    }, orig, when_run(ran));
    messenger.call(dest, [round] {
      if (step.load() != 2 * round + 1) throw std::runtime_error("a call overtook the read before it");
      step.fetch_add(1);
    }, when_run(ran));
  }
  ran.wait();
  job().barrier();
  job().arena().release_chunk(block);
}

// One-sided broadcast: from every thread, every thread of the job runs the
// call exactly once; when_run counts down after all of them did.
// Rounds alternate broadcast, broadcast_buffer with the buffer in the call,
// and broadcast_buffer with the buffer read from the root by every thread.
// hits[t * total + root]: how often thread t ran root's broadcasts. Serve
// calls until each root's `rounds` have reached thread t, then check none
// ran twice.
void serve_until_every_root_reached(const std::vector<std::atomic<std::uint64_t>>& hits, std::uint32_t t, int rounds) {
  const std::uint32_t total = job().total_threads();
  auto count = [&](std::uint32_t root) { return hits[std::size_t{t} * total + root].load(); };
  for (bool all = false; !all;) {
    all = true;
    for (std::uint32_t g = 0; g < total; ++g) all = all && count(g) >= static_cast<std::uint64_t>(rounds);
    if (!all) MessengerGlobal().process_calls();
  }
  for (std::uint32_t g = 0; g < total; ++g) EXPECT_EQ(count(g), static_cast<std::uint64_t>(rounds)) << "from root " << g;
}

TEST(Messenger, BroadcastReachesEveryThreadOnce) {
  static std::vector<std::atomic<std::uint64_t>> hits;  // [receiving thread][root]
  const std::uint32_t total = job().total_threads();
  hits = std::vector<std::atomic<std::uint64_t>>(std::size_t{job().threads_per_process()} * total);
  job().barrier();
  constexpr int rounds = 21;
  static constexpr std::size_t read_size = 64 * 1024;
  job().run([&](ThreadId me) {
    MessengerGlobal messenger;
    const std::uint32_t root = global(me);
    std::vector<std::byte> payload(100, static_cast<std::byte>(root));
    memory::Block block = job().arena().allocate_chunk(read_size);
    for (std::size_t i = 0; i < read_size; ++i) block.data[i] = static_cast<std::byte>(i * 31 + root);
    const RemoteLocator orig = local_locator(block.data, read_size);
    for (int k = 0; k < rounds; ++k) {
      Synchronizer sync;
      if (k % 3 == 2) {
        messenger.broadcast_buffer([root](std::span<std::byte> data) {
          bool ok = data.size() == read_size;
          for (std::size_t i = 0; ok && i < data.size(); ++i) ok = data[i] == static_cast<std::byte>(i * 31 + root);
          if (!ok) throw std::runtime_error("the broadcast buffer read from its root differs");
          hits[std::size_t{call_destination().thread} * Job::current().total_threads() + root].fetch_add(1);
        }, orig, when_run(sync));
      } else if (k % 3 == 0) {
        messenger.broadcast([root] {
          hits[std::size_t{call_destination().thread} * Job::current().total_threads() + root].fetch_add(1);
        }, when_run(sync));
      } else {
        messenger.broadcast_buffer([root](std::span<std::byte> data) {
          if (data.size() != 100 || data[99] != static_cast<std::byte>(root)) throw std::runtime_error("bad broadcast buffer");
          hits[std::size_t{call_destination().thread} * Job::current().total_threads() + root].fetch_add(1);
        }, payload, when_run(sync));
      }
      sync.wait();  // throws what a thread's function threw
    }
    job().arena().release_chunk(block);
    // Every other root's broadcasts reach this thread too.
    serve_until_every_root_reached(hits, me.thread, rounds);
  });
  job().barrier();
}

// Table 1's broadcast_buffer into destination buffers: every thread keeps one
// buffer per root; the root's bytes are written into its own, and each thread
// writes its buffer into its children's before they run. Every thread
// scribbles over its buffer in func: a child that still reads its parent's
// old bytes shows a forward that did not wait for its writes.
namespace {
std::vector<RemoteLocator> gather_buffers(std::byte* mine, std::size_t bytes) {
  const RemoteLocator here = local_locator(mine, bytes);
  std::vector<RemoteLocator> all;
  for (const auto& b : job().allgather(std::as_bytes(std::span(&here, 1)))) {
    RemoteLocator l;
    std::memcpy(&l, b.data(), sizeof l);
    all.push_back(l);
  }
  return all;
}
std::byte pattern(std::size_t i, std::uint32_t root, int round) { return static_cast<std::byte>(i * 13 + root * 7 + round); }
}  // namespace

TEST(Messenger, BroadcastBufferIntoDestinationBuffers) {
  static constexpr std::size_t size = 10000;
  static constexpr int rounds = 6;
  const std::uint32_t threads = job().threads_per_process(), total = job().total_threads();
  static memory::Block block;
  block = job().arena().allocate_chunk(std::size_t{threads} * total * size);
  const std::vector<RemoteLocator> base = gather_buffers(block.data, block.size);
  static std::vector<std::atomic<std::uint64_t>> hits;  // [receiving thread][root]
  hits = std::vector<std::atomic<std::uint64_t>>(std::size_t{threads} * total);
  job().barrier();
  job().run([&](ThreadId me) {
    MessengerGlobal messenger;
    const std::uint32_t root = global(me);
    // dest[i]: thread i's buffer for broadcasts from this root.
    std::vector<RemoteLocator> dest;
    for (std::uint32_t i = 0; i < total; ++i) dest.push_back(base[i / threads].slice((std::size_t{i % threads} * total + root) * size, size));
    std::vector<std::byte> orig(size);
    auto check = [root](int round) {
      return [root, round](std::span<std::byte> data) {
        const ThreadId d = call_destination();
        std::byte* expected = block.data + (std::size_t{d.thread} * Job::current().total_threads() + root) * size;
        bool ok = data.size() == size && data.data() == expected;
        for (std::size_t i = 0; ok && i < size; ++i) ok = data[i] == pattern(i, root, round);
        if (!ok) throw std::runtime_error("a destination buffer does not hold the root's bytes");
        std::memset(expected, 0xee, size);
        hits[std::size_t{d.thread} * Job::current().total_threads() + root].fetch_add(1);
      };
    };
    for (int k = 0; k < rounds; ++k) {
      for (std::size_t i = 0; i < size; ++i) orig[i] = pattern(i, root, k);
      Synchronizer sync;
      if (k + 1 < rounds) {
        messenger.broadcast_buffer(check(k), orig, dest, when_run(sync));
      } else {
        // when_sent: orig may change once the root's own buffer is written.
        messenger.broadcast_buffer(check(k), orig, dest, when_sent(sync));
      }
      sync.wait();  // throws what a thread's func threw
      std::fill(orig.begin(), orig.end(), std::byte{0});
    }
    serve_until_every_root_reached(hits, me.thread, rounds);
    // Bad tables are refused before anything is sent.
    auto nothing = [](std::span<std::byte>) {};
    EXPECT_THROW(messenger.broadcast_buffer(nothing, orig, std::span(dest).first(total - 1)), Error);
    std::vector<RemoteLocator> bad = dest;
    bad[total - 1].process = (bad[total - 1].process + 1) % job().size();
    if (job().size() > 1) EXPECT_THROW(messenger.broadcast_buffer(nothing, orig, bad), Error);
    bad = dest;
    bad[0].length = size - 1;
    EXPECT_THROW(messenger.broadcast_buffer(nothing, orig, bad), Error);
  });
  job().barrier();
  job().arena().release_chunk(block);
}

// A destination buffer that cannot be written (an unknown region) cuts its
// thread's subtree off: the root hears of each thread in it instead of
// waiting forever, and every other thread still runs the call.
TEST(Messenger, BroadcastBufferReportsUnreachedSubtrees) {
  if (job().total_threads() < 2) GTEST_SKIP() << "needs two threads";
  static constexpr std::size_t size = 256;
  const std::uint32_t threads = job().threads_per_process(), total = job().total_threads();
  static memory::Block block;
  block = job().arena().allocate_chunk(std::size_t{threads} * size);
  const std::vector<RemoteLocator> base = gather_buffers(block.data, block.size);
  static std::vector<std::atomic<int>> ran;
  ran = std::vector<std::atomic<int>>(threads);
  job().barrier();
  job().run([&](ThreadId me) {
    // From root 0, thread 1's subtree in the binomial tree is every odd thread.
    const bool reached = global(me) % 2 == 0;
    if (global(me) == 0) {
      std::vector<RemoteLocator> dest;
      for (std::uint32_t i = 0; i < total; ++i) dest.push_back(base[i / threads].slice(std::size_t{i % threads} * size, size));
      dest[1].region = 0xfffff;  // no such region
      std::vector<std::byte> orig(size, std::byte{5});
      Synchronizer sync;
      MessengerGlobal().broadcast_buffer(
          [](std::span<std::byte>) { ran[call_destination().thread].fetch_add(1); }, orig, dest, when_run(sync));
      try {
        sync.wait();
        ADD_FAILURE() << "the broadcast reported no failure";
      } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("broadcast"), std::string::npos) << e.what();
      }
    }
    if (reached)
      while (ran[me.thread].load() == 0) MessengerGlobal().process_calls();
  });
  job().barrier();
  for (std::uint32_t t = 0; t < threads; ++t)
    EXPECT_EQ(ran[t].load(), global({job().rank(), t}) % 2 == 0 ? 1 : 0) << "thread " << t;
  job().arena().release_chunk(block);
}

// Policy::retry_async towards a receiver that does not poll: no call blocks
// or fails; the excess waits in registered memory and runs, in order, once
// the receiver polls again.
TEST(Messenger, RetryAsyncNeverBlocksAndKeepsOrder) {
  if (job().size() < 2) GTEST_SKIP() << "needs two processes";
  against_parked_receiver([](const std::function<void()>&) {
    const auto options = MessengerOptions::from_env();
    const std::uint64_t n = options.max_chunks * (options.chunk_size / 24) + 50000;  // more than the ring holds
    MessengerGlobal messenger(Policy::retry_async);
    for (std::uint64_t seq = 1; seq <= n; ++seq) messenger.call({1, 0}, in_order(seq));
    return n;
  });
}
