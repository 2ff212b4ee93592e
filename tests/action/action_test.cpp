// Typed remote actions (async / post, with completions) across real processes:
// small and multi-megabyte arguments and results, zero copy, futures with
// continuations, remote exceptions and type mismatches. Every process runs
// every test; unless a test says otherwise, rank r calls rank r+1's thread 0.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <map>
#include <numeric>
#include <stdexcept>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "rdmx/fabric/call.hpp"
#include "rdmx/fabric/job.hpp"
#include "rdmx/fabric/rma.hpp"
#include "rdmx/action/action.hpp"
#include "rdmx/invoke/messenger.hpp"
#include "rdmx/memory/arena.hpp"

using namespace rdmx;
namespace serial = rdmx::serial;
using Clock = std::chrono::steady_clock;

namespace {

Job& job() { return Job::current(); }
ThreadId next_rank() { return {(job().rank() + 1) % job().size(), 0}; }
std::uint32_t previous_rank() { return (job().rank() + job().size() - 1) % job().size(); }

// ---- actions ----

int add(int a, int b) { return a + b; }
std::string greet(const std::string& who, int times) {
  std::string s;
  for (int i = 0; i < times; ++i) s += "hello " + who + ";";
  return s;
}
std::uint32_t where() { return this_thread().process; }

struct Point {
  std::int64_t id;
  std::string label;
  std::vector<double> xs;
  template <class Archive>
  void serialize(Archive& ar) {
    ar(id, label, xs);
  }
  friend bool operator==(const Point&, const Point&) = default;
};
Point shift(Point p, double by) {
  for (double& x : p.xs) x += by;
  p.label += "+";
  return p;
}
std::map<std::string, std::tuple<int, double>> index_of(const std::vector<std::string>& words) {
  std::map<std::string, std::tuple<int, double>> m;
  for (std::size_t i = 0; i < words.size(); ++i) m[words[i]] = {static_cast<int>(i), 0.5 * static_cast<double>(i)};
  return m;
}

std::atomic<std::int64_t> bumped{0};
void bump(std::int64_t by) { bumped += by; }
std::int64_t read_bumped() { return bumped.load(); }

// A pattern both sides can check without sending it twice.
double pattern(std::size_t i) { return static_cast<double>(i % 1000) * 0.25; }
// The sum of a large vector, and whether each element is as sent.
std::tuple<double, bool> check_vector(std::vector<double> v) {
  bool ok = true;
  for (std::size_t i = 0; i < v.size(); ++i) ok = ok && v[i] == pattern(i);
  return {std::accumulate(v.begin(), v.end(), 0.0), ok};
}
std::vector<double> make_vector(std::size_t n) {
  std::vector<double> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = pattern(i);
  return v;
}

// What a received buffer looks like on the destination: its size, a
// checksum, and whether its memory is registered (the landing buffer the
// RDMA get wrote into, taken over without a copy).
struct Landed {
  std::uint64_t size = 0;
  std::uint64_t sum = 0;
  bool registered = false;
  template <class Archive>
  void serialize(Archive& ar) {
    ar(size, sum, registered);
  }
};
bool is_registered(const void* p, std::size_t n) {
  try {
    (void)local_locator(p, n);
    return true;
  } catch (const Error&) {
    return false;
  }
}
Landed land_buffer(serial::SerializeBuffer<char> b) {
  std::uint64_t sum = 0;
  for (char c : b) sum += static_cast<unsigned char>(c);
  return {b.size(), sum, is_registered(b.data(), b.size())};
}
Landed land_rma(serial::RmaVector<std::uint32_t> v) {
  std::uint64_t sum = 0;
  for (auto x : v) sum += x;
  const bool keyed = v.key().region != 0 && is_registered(v.data(), v.size() * sizeof(std::uint32_t));
  return {v.size(), sum, keyed};
}

// Parks the destination: runs (without progressing) until released.
std::atomic<bool> released{false};
void park() {
  const auto until = Clock::now() + std::chrono::seconds(20);
  while (!released.load() && Clock::now() < until) std::this_thread::sleep_for(std::chrono::milliseconds(1));
}
std::uint64_t count_b(serial::SerializeBuffer<char> b) { return static_cast<std::uint64_t>(std::count(b.begin(), b.end(), 'b')); }

// Set by the caller once its when_sent counted down (through a send-based call).
std::atomic<bool> callback_seen{false};
bool wait_for_callback(serial::SerializeBuffer<char> b) {
  const auto until = Clock::now() + std::chrono::seconds(15);
  while (!callback_seen.load() && Clock::now() < until) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  return callback_seen.load() && !b.empty();
}

int thrower(int code) {
  if (code == 1) throw std::runtime_error("boom " + std::to_string(code));
  if (code == 2) throw Error(Errc::out_of_memory, "remote pool exhausted");
  if (code == 3) throw 42;
  return code;
}

std::atomic<int> mismatch_runs{0};
int counted(int x) {
  ++mismatch_runs;
  return x;
}

std::vector<std::int64_t> big_result(std::size_t n) {
  std::vector<std::int64_t> v(n);
  std::iota(v.begin(), v.end(), std::int64_t{7});
  return v;
}
std::uint64_t count_words(std::vector<std::string> words) { return words.size(); }

void barrier() { job().barrier(); }

// A slow destination: hold() runs until release() arrives (served by its
// own nested progress), so its caller sees it pending for as long as it likes.
std::atomic<bool> let_go{false};
int hold(int v) {
  const auto until = Clock::now() + std::chrono::seconds(60);
  while (!let_go.load() && Clock::now() < until) progress();
  return let_go.load() ? v : -1;
}
void release() { let_go = true; }

}  // namespace

TEST(Action, SmallArgumentsAndResults) {
  const ThreadId to = next_rank();
  Future<int> sum = async(action<&add>, to, 2, 40);
  Future<std::string> text = async(action<&greet>, to, "rdmx", 2);  // const char* converted to std::string
  Future<std::uint32_t> there = async(action<&where>, to);
  const Point p{7, "p", {1.0, 2.0, 3.0}};
  Future<Point> moved = async(action<&shift>, to, p, 0.5);
  Future<std::map<std::string, std::tuple<int, double>>> m =
      async(action<&index_of>, to, std::vector<std::string>{"a", "b", "c"});
  EXPECT_EQ(sum.get(), 42);
  EXPECT_EQ(text.get(), "hello rdmx;hello rdmx;");
  EXPECT_EQ(there.get(), to.process);
  EXPECT_EQ(moved.get(), (Point{7, "p+", {1.5, 2.5, 3.5}}));
  const auto map = m.get();
  EXPECT_EQ(std::get<0>(map.at("c")), 2);
  EXPECT_DOUBLE_EQ(std::get<1>(map.at("b")), 0.5);
  barrier();
}

TEST(Action, LambdasAndVoidActions) {
  const ThreadId to = next_rank();
  bumped = 0;
  barrier();
  auto square = [](std::int64_t x) { return x * x; };
  EXPECT_EQ(async(square, to, std::int64_t{12}).get(), 144);
  Future<void> done = async(action<&bump>, to, std::int64_t{5});
  done.get();
  EXPECT_EQ(async(action<&read_bumped>, to).get(), 5);
  barrier();
}

TEST(Action, PostRunsEveryAction) {
  const ThreadId to = next_rank();
  bumped = 0;
  barrier();
  constexpr int n = 200;
  for (int i = 0; i < n; ++i) post(action<&bump>, to, std::int64_t{1});
  // Posts are not ordered with the reads: read until all have run.
  const auto until = Clock::now() + std::chrono::seconds(20);
  std::int64_t seen = 0;
  while ((seen = async(action<&read_bumped>, to).get()) < n && Clock::now() < until) {
  }
  EXPECT_EQ(seen, n);
  barrier();
}

TEST(Action, MultiMegabyteArgumentsAndResults) {
  const ThreadId to = next_rank();
  constexpr std::size_t n = (8u << 20) / sizeof(double);  // 8 MiB
  std::vector<double> v = make_vector(n);
  const double expected = std::accumulate(v.begin(), v.end(), 0.0);
  auto [sum, ok] = async(action<&check_vector>, to, v).get();  // an lvalue: sent as a copy
  EXPECT_TRUE(ok);
  EXPECT_DOUBLE_EQ(sum, expected);
  std::tie(sum, ok) = async(action<&check_vector>, to, std::move(v)).get();  // moved in: not copied
  EXPECT_TRUE(ok);
  EXPECT_DOUBLE_EQ(sum, expected);

  // A large result comes back as a rendezvous reply.
  std::vector<std::int64_t> r = async(action<&big_result>, to, std::size_t{3u << 18}).get();
  ASSERT_EQ(r.size(), 3u << 18);
  EXPECT_EQ(r.front(), 7);
  EXPECT_EQ(r.back(), static_cast<std::int64_t>(7 + r.size() - 1));

  // A large string, and many small values that together exceed what a
  // one-sided call carries (sent as a send-based call instead).
  std::string big(3u << 20, 'x');
  EXPECT_EQ(async(action<&greet>, to, big, 1).get().size(), big.size() + 7);
  std::vector<std::string> words(40000, "word");
  EXPECT_EQ(async(action<&count_words>, to, words).get(), words.size());
  barrier();
}

// The archive holds the chunk list, not the data: what is sent eagerly does
// not grow with the argument, and the destination pulls the rest.
TEST(Action, ArchiveSizeIndependentOfArgumentSize) {
  // Rank 0 alone sends, so its counters see its requests only (no replies of its own).
  barrier();
  if (job().rank() != 0) {
    barrier();
    return;
  }
  const ThreadId to = next_rank();
  std::uint64_t message[2] = {}, chunks[2] = {};
  const std::size_t sizes[2] = {std::size_t{1} << 20, std::size_t{16} << 20};
  for (int i = 0; i < 2; ++i) {
    serial::SerializeBuffer<char> b(sizes[i]);
    std::memset(b.data(), 3, b.size());
    const auto before = parcel::stats();
    Future<Landed> f = async(action<&land_buffer>, to, b);
    const auto after = parcel::stats();
    message[i] = after.message_bytes - before.message_bytes;
    chunks[i] = after.chunk_bytes - before.chunk_bytes;
    EXPECT_EQ(after.rendezvous, before.rendezvous + 1);
    const Landed l = f.get();
    EXPECT_EQ(l.size, sizes[i]);
    EXPECT_EQ(l.sum, 3 * sizes[i]);
  }
  EXPECT_EQ(chunks[0], sizes[0]);
  EXPECT_EQ(chunks[1], sizes[1]);
  EXPECT_LT(message[0], 128u);
  EXPECT_LE(message[1], message[0] + 2);  // at most the longer varint of the size
  barrier();
}

// SerializeBuffer and RmaVector arguments arrive in the registered memory
// the RDMA get wrote into: the destination's object owns the landing buffer.
TEST(Action, ReceivedBuffersAreTheLandingMemory) {
  const ThreadId to = next_rank();
  // Read before the barrier: until every process has arrived, nobody sends.
  const std::uint64_t pulled = parcel::stats().pulled_bytes;
  barrier();
  serial::RmaMemory memory(job().arena());
  serial::SerializeBuffer<char> b(std::size_t{4} << 20);
  std::memset(b.data(), 1, b.size());
  serial::RmaVector<std::uint32_t> v(std::size_t{1} << 20, 2u, &memory);
  Landed lb = async(action<&land_buffer>, to, b).get();
  Landed lv = async(action<&land_rma>, to, v).get();
  EXPECT_EQ(lb.size, b.size());
  EXPECT_EQ(lb.sum, b.size());
  EXPECT_TRUE(lb.registered);
  EXPECT_EQ(lv.size, v.size());
  EXPECT_EQ(lv.sum, 2 * v.size());
  EXPECT_TRUE(lv.registered);
  // Below the threshold the same calls are eager: nothing is pulled.
  serial::SerializeBuffer<char> small(100);
  std::memset(small.data(), 1, small.size());
  Landed ls = async(action<&land_buffer>, to, small).get();
  EXPECT_EQ(ls.sum, 100u);
  EXPECT_FALSE(ls.registered);
  barrier();
  // This thread pulled the predecessor's two large arguments (and nothing else).
  EXPECT_EQ(parcel::stats().pulled_bytes - pulled, (std::size_t{4} << 20) + (std::size_t{4} << 20));
  barrier();
}

// The destination reads the sender's own memory when it pulls, so a change
// made after async() but before the pull shows: nothing was copied at send.
TEST(Action, SenderMemoryIsPulledNotCopied) {
  released = false;
  barrier();
  if (job().rank() == 0) {
    constexpr std::size_t n = std::size_t{1} << 20;
    std::vector<char> memory(n, 'a');
    post(action<&park>, {1, 0});  // rank 1's thread runs it and stops progressing
    Future<std::uint64_t> f = async(action<&count_b>, {1, 0}, serial::SerializeBuffer<char>::reference(memory.data(), n));
    std::fill(memory.begin(), memory.end(), 'b');
    call(ThreadId{1, service_thread}, [] { released = true; });
    EXPECT_EQ(f.get(), n);
  }
  barrier();
}

TEST(Action, CompletionsSayWhenBuffersMayBeReusedAndWhenItRan) {
  callback_seen = false;
  barrier();
  if (job().rank() == 0) {
    // Eager: before async returns.
    Synchronizer sent;
    Future<int> small = async(when_sent(sent), action<&add>, {1, 0}, 1, 2);
    EXPECT_EQ(sent.operations_left(), 0);
    EXPECT_EQ(small.get(), 3);
    // Rendezvous: once rank 1 has pulled the buffer, before the action ends
    // (which waits for the word sent after the wait below).
    Synchronizer pulled;
    Future<bool> big = async(parcel::Path::send, when_sent(pulled), action<&wait_for_callback>, {1, 0},
                             serial::SerializeBuffer<char>(std::size_t{2} << 20));
    pulled.wait();
    EXPECT_FALSE(big.ready());
    call(ThreadId{1, service_thread}, [] { callback_seen = true; });
    EXPECT_TRUE(big.get());
    // when_run: once the future is complete, failures included; post with
    // a completion too.
    Synchronizer ran;
    Future<int> sum = async(when_run(ran), action<&add>, {1, 0}, 4, 5);
    ran.wait();
    EXPECT_TRUE(sum.ready());
    EXPECT_EQ(sum.get(), 9);
    Synchronizer thrown;
    post(when_run(thrown), action<&thrower>, {1, 0}, 1);
    try {
      thrown.wait();
      ADD_FAILURE() << "a posted action's exception did not fail its completion";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), Errc::remote_exception);
      EXPECT_NE(std::string(e.what()).find("boom 1"), std::string::npos) << e.what();
    }
  }
  barrier();
}

TEST(Action, ThenAndWhenAll) {
  const ThreadId to = next_rank();
  // then: a value continuation, and one returning another remote call's future.
  Future<int> plus_one = async(action<&add>, to, 1, 1).then([](int& v) { return v + 1; });
  Future<int> chained = async(action<&add>, to, 2, 3).then([to](int& v) { return async(action<&add>, to, v, 10); });
  EXPECT_EQ(plus_one.get(), 3);
  EXPECT_EQ(chained.get(), 15);
  // when_all over many calls to every process.
  std::vector<Future<int>> all;
  for (int i = 0; i < 64; ++i) all.push_back(async(action<&add>, ThreadId{static_cast<std::uint32_t>(i) % job().size(), 0}, i, 1));
  std::vector<Future<int>> done = when_all(std::move(all)).get();
  for (int i = 0; i < 64; ++i) EXPECT_EQ(done[i].get(), i + 1);
  auto [a, b] = when_all(async(action<&add>, to, 1, 2), async(action<&greet>, to, std::string("x"), 1)).get();
  EXPECT_EQ(a.get(), 3);
  EXPECT_EQ(b.get(), "hello x;");
  barrier();
}

TEST(Action, GetReturnsAValueThatOutlivesItsFuture) {
  const ThreadId to = next_rank();
  // A reference to get()'s result of a temporary future: by value, it lives on.
  const std::string& text = async(action<&greet>, to, std::string("dropped"), 3).get();
  EXPECT_EQ(text, "hello dropped;hello dropped;hello dropped;");
  Future<int> once = async(action<&add>, to, 1, 2);
  EXPECT_EQ(once.get(), 3);
  EXPECT_FALSE(once.valid());
  try {
    once.get();
    ADD_FAILURE() << "a second get() returned";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::invalid_argument);
    EXPECT_NE(std::string(e.what()).find("already taken by get()"), std::string::npos) << e.what();
  }
  barrier();
}

TEST(Action, WaitForTimesOutOnASlowDestinationThenSucceeds) {
  let_go = false;
  barrier();
  if (job().rank() == 0) {  // one caller: holds in a ring would wait for each other
    const ThreadId to{1, 0};
    Future<int> f = async(action<&hold>, to, 7);
    EXPECT_EQ(f.wait_for(std::chrono::milliseconds(50)), future_status::timeout);  // held: cannot be ready
    EXPECT_FALSE(f.ready());
    post(action<&release>, to);
    EXPECT_EQ(f.wait_for(std::chrono::seconds(60)), future_status::ready);
    EXPECT_EQ(f.get(), 7);
  }
  barrier();
}

TEST(Action, WhenAnyReturnsTheFirstReadyCall) {
  let_go = false;
  barrier();
  if (job().rank() == 0) {
    const ThreadId held{1, 0};
    std::vector<Future<int>> calls;
    calls.push_back(async(action<&hold>, held, 1));
    calls.push_back(async(action<&add>, next_rank(), 2, 3));  // answered while the first is held
    calls.push_back(async(action<&hold>, held, 2));
    EXPECT_EQ(wait_any(calls), 1u);
    auto [index, futures] = when_any(std::move(calls)).get();
    EXPECT_EQ(index, 1u);
    EXPECT_EQ(futures[1].get(), 5);
    EXPECT_FALSE(futures[0].ready());
    EXPECT_FALSE(futures[2].ready());
    Promise<std::string> never;  // no progress hook: waiting progresses the call's
    auto [which, pair] = when_any(never.get_future(), async(action<&add>, held, 1, 1)).get();
    EXPECT_EQ(which, 1u);
    EXPECT_EQ(std::get<1>(pair).get(), 2);
    post(action<&release>, held);
    EXPECT_EQ(futures[0].get(), 1);
    EXPECT_EQ(futures[2].get(), 2);
  }
  barrier();
}

TEST(Action, SharedFutureIsReadByEveryThread) {
  SharedFuture<std::string> s = async(action<&greet>, next_rank(), std::string("s"), 2).share();
  std::vector<std::string> seen(job().threads_per_process());
  std::vector<const std::string*> where(job().threads_per_process());
  job().run([&seen, &where, s](ThreadId me) {
    const SharedFuture<std::string> mine = s;  // a copy per thread; thread 0 progresses the call
    seen[me.thread] = mine.get();
    where[me.thread] = &mine.get();
  });
  for (std::size_t t = 0; t < seen.size(); ++t) {
    EXPECT_EQ(seen[t], "hello s;hello s;");
    EXPECT_EQ(where[t], &s.get()) << "one value, shared, never copied";
  }
  barrier();
}

TEST(Action, RemoteExceptionsArriveInTheFuture) {
  const ThreadId to = next_rank();
  auto expect_remote = [](Future<int> f, const std::string& needle) {
    try {
      f.get();
      ADD_FAILURE() << "no exception for " << needle;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), Errc::remote_exception) << e.what();
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  expect_remote(async(action<&thrower>, to, 1), "std::runtime_error: boom 1");
  expect_remote(async(action<&thrower>, to, 2), "out_of_memory): remote pool exhausted");
  expect_remote(async(action<&thrower>, to, 3), "non-standard exception");
  EXPECT_EQ(async(action<&thrower>, to, 4).get(), 4);
  // A value continuation is skipped; a future continuation sees the failure.
  bool ran = false;
  Future<int> skipped = async(action<&thrower>, to, 1).then([&](int& v) {
    ran = true;
    return v;
  });
  EXPECT_THROW(skipped.get(), Error);
  EXPECT_FALSE(ran);
  Future<bool> seen = async(action<&thrower>, to, 1).then([](Future<int> f) { return f.failed(); });
  EXPECT_TRUE(seen.get());
  // What a continuation throws fails the future then() returned, as thrown.
  Future<int> local = async(action<&add>, to, 1, 1).then([](int&) -> int { throw std::logic_error("local"); });
  EXPECT_THROW(local.get(), std::logic_error);
  barrier();
}

TEST(Action, TypeMismatchRunsNothing) {
  const ThreadId to = next_rank();
  mismatch_runs = 0;
  barrier();
  const std::uint64_t id = action_id(action<&counted>);
  EXPECT_EQ(async(action<&counted>, to, 5).get(), 5);
  EXPECT_EQ(async(RemoteAction<int(int)>(id), to, 6).get(), 6);  // the right signature, by id
  try {
    async(RemoteAction<int(std::string)>(id), to, std::string("not an int")).get();
    ADD_FAILURE() << "a mismatched call was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::bad_archive) << e.what();
    EXPECT_NE(std::string(e.what()).find("type signature mismatch"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("nothing ran"), std::string::npos) << e.what();
  }
  EXPECT_THROW(async(RemoteAction<int(int, int)>(id), to, 1, 2).get(), Error);
  // A result of the wrong type is rejected on the caller's side.
  try {
    async(RemoteAction<std::string(int)>(id), to, 7).get();
    ADD_FAILURE() << "a mismatched result was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::bad_archive) << e.what();
  }
  try {
    async(RemoteAction<void()>(0x1234567), to).get();
    ADD_FAILURE() << "an unknown action ran";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::unknown_function) << e.what();
  }
  barrier();
  // Rank r's counter saw its predecessor's calls: the 5, the 6 and the wrong result's 7.
  EXPECT_EQ(mismatch_runs.load(), 3);
  barrier();
}

TEST(Action, BadCallsFailClearly) {
  // A destination that does not exist, and a thread that is not a worker.
  Future<int> nowhere = async(action<&add>, ThreadId{job().size(), 0}, 1, 2);
  EXPECT_TRUE(nowhere.failed());
  EXPECT_EQ(nowhere.error_code(), Errc::no_such_destination);
  Future<int> from_other_thread;
  std::thread([&] { from_other_thread = async(action<&add>, next_rank(), 1, 2); }).join();
  ASSERT_TRUE(from_other_thread.failed());
  EXPECT_EQ(from_other_thread.error_code(), Errc::invalid_argument);
  EXPECT_NE(from_other_thread.error_message().find("worker threads"), std::string::npos);
  barrier();
}

// Every worker thread calls every worker thread (itself included) with small
// and large arguments at once, then serves until its own share has run.
std::atomic<std::uint64_t> served[8];
std::uint64_t serve(std::uint32_t from, serial::SerializeBuffer<char> b) {
  served[this_thread().thread].fetch_add(1);
  return from + b.size();
}
TEST(Action, AllThreadsCallAllThreads) {
  for (auto& s : served) s = 0;
  barrier();
  const std::uint32_t total = job().total_threads();
  constexpr std::uint64_t per_destination = 40;
  job().run([&](ThreadId me) {
    const std::uint32_t from = me.process * job().threads_per_process() + me.thread;
    std::vector<Future<std::uint64_t>> futures;
    std::vector<std::uint64_t> expected;
    for (std::uint64_t i = 0; i < per_destination; ++i)
      for (std::uint32_t g = 0; g < total; ++g) {
        const std::size_t size = i % 4 == 0 ? std::size_t{256} << 10 : 16 + i;
        serial::SerializeBuffer<char> b(size);
        futures.push_back(async(action<&serve>, ThreadId{g / job().threads_per_process(), g % job().threads_per_process()}, from, b));
        expected.push_back(from + size);
      }
    auto results = when_all(std::move(futures)).get();
    for (std::size_t i = 0; i < results.size(); ++i) EXPECT_EQ(results[i].get(), expected[i]);
    const auto until = Clock::now() + std::chrono::seconds(30);
    while (served[me.thread].load() < per_destination * total && Clock::now() < until) progress();
    EXPECT_EQ(served[me.thread].load(), per_destination * total);
    MessengerGlobal().flush();
  });
  barrier();
}
