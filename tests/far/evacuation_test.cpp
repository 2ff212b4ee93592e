// Eviction whose write-backs travel without the manager's lock: other
// threads hit, miss and evict while one waits on the network, a handler
// run during a write-back may dereference far memory (even the object on
// its way out), and a failed write-back leaves every object intact.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <future>
#include <string>
#include <mutex>
#include <optional>
#include <random>
#include <thread>

#include "../error_from.hpp"
#include "hooked_device.hpp"
#include "rdmx/far/pointer.hpp"
#include "shadow.hpp"

using namespace rdmx;
using namespace rdmx::far;

namespace {

// `evacuator`: off, eviction happens only on the thread that needs a frame,
// which the tests of inline write-backs rely on.
Config small_cache(std::size_t cache, bool evacuator = false) {
  Config c;
  c.cache_bytes = cache;
  c.region_bytes = 8 << 20;
  c.evacuator = evacuator ? Evacuator::on : Evacuator::off;
  c.free_low = 0.05;
  c.free_high = 0.10;
  return c;
}

using rdmx::far::testing::HookedDevice;
using Obj = shadow::Pattern<1024>;
constexpr auto patience = std::chrono::seconds(60);  // a miss takes microseconds; this only bounds a hang

}  // namespace

// Threads share objects far larger than the budget (each object ordered by
// its own mutex, as shared data must be), every write-back is slow, and
// every value read must be the last one written.
TEST(FarEvacuation, SlowWriteBacksUnderThreadsKeepEveryValue) {
  std::atomic<int> in_flight{0}, most_in_flight{0};
  Manager manager(std::make_unique<HookedDevice>([&] {
                    const int now = ++in_flight;
                    int seen = most_in_flight.load();
                    while (now > seen && !most_in_flight.compare_exchange_weak(seen, now)) {
                    }
                    std::this_thread::sleep_for(std::chrono::microseconds(500));
                    --in_flight;
                  }),
                  small_cache(64 * 1024));
  // 256 KiB of data, 64 KiB of cache; every other access writes.
  const shadow::SharedRun run = shadow::shared_objects<1024>(256, 4, 1500, 2);
  EXPECT_EQ(run.wrong, 0u);
  EXPECT_EQ(run.checked, 4 * 1500u + 256);
  EXPECT_GT(manager.stats().write_backs, 100u);
  EXPECT_LE(manager.stats().peak_resident_bytes, manager.stats().cache_bytes);
  // Write-backs overlapped: none of them held the lock while it waited.
  EXPECT_GT(most_in_flight.load(), 1);
}

// While one thread's write-back waits on the network, another thread
// misses (it needs the lock to take a frame), and a handler run inline by
// the waiting thread dereferences far memory: a miss of its own and the
// very object being written back, which it changes. All of it completes.
TEST(FarEvacuation, HandlersDereferenceDuringAWriteBack) {
  UniquePtr<Obj>* victim = nullptr;
  UniquePtr<Obj>* other = nullptr;
  UniquePtr<Obj>* third = nullptr;
  bool hooked = false;
  std::string failure;
  std::future<bool> missed;  // out here: a miss stuck behind the write-back must not block the hook's return
  Manager manager(std::make_unique<HookedDevice>([&] {
                    if (victim == nullptr || hooked) return;
                    hooked = true;
                    // Another thread misses while this write-back is in flight.
                    missed = std::async(std::launch::async, [&] {
                      DerefScope scope;
                      return other->deref(scope)->is(2);
                    });
                    if (missed.wait_for(patience) != std::future_status::ready) {
                      failure = "another thread's miss did not complete during a write-back";
                      return;  // the miss finishes once this write-back ends; the test fails
                    }
                    if (!missed.get()) failure = "another thread's miss read a wrong value";
                    // The handler, on this thread: a miss, then the object on its way out.
                    DerefScope scope;
                    if (!third->deref(scope)->is(3)) failure = "the handler's miss read a wrong value";
                    Obj* mine = victim->deref_mut(scope);
                    if (!mine->is(1)) failure = "the handler read a wrong value of the object being written back";
                    *mine = Obj::of(11);
                  }),
                  small_cache(64 * 1024));
  auto a = make_unique<Obj>(Obj::of(1));
  auto b = make_unique<Obj>(Obj::of(2));
  auto c = make_unique<Obj>(Obj::of(3));
  ASSERT_TRUE(b.evict());
  ASSERT_TRUE(c.evict());
  victim = &a;
  other = &b;
  third = &c;
  // The handler called this eviction off: the object stays, with its new value.
  EXPECT_FALSE(a.evict());
  if (missed.valid()) missed.wait();
  EXPECT_TRUE(hooked);
  EXPECT_EQ(failure, "");
  EXPECT_TRUE(a.is_local());
  EXPECT_NE(a.state_word() & state::dirty, 0u);
  EXPECT_NE(a.state_word() & state::busy, state::busy);
  // Written back for real now, then read back from the server.
  EXPECT_TRUE(a.evict());
  EXPECT_FALSE(a.is_local());
  EXPECT_TRUE(a.read().is(11));
  EXPECT_TRUE(b.read().is(2));
  EXPECT_TRUE(c.read().is(3));
}

// Freeing an object whose write-back another thread has on the network
// waits for it to land, then frees it: no error, and its block and frame
// are reused cleanly.
TEST(FarEvacuation, FreeWaitsForAWriteBackInFlight) {
  std::promise<void> writing, go;
  std::shared_future<void> may_finish = go.get_future().share();
  bool first = true;
  Manager manager(std::make_unique<HookedDevice>([&] {
                    if (!first) return;
                    first = false;
                    writing.set_value();
                    may_finish.wait_for(patience);
                  }),
                  small_cache(64 * 1024));
  auto a = make_unique<Obj>(Obj::of(5));
  std::future<bool> evicted = std::async(std::launch::async, [&] { return a.evict(); });
  ASSERT_EQ(writing.get_future().wait_for(patience), std::future_status::ready);
  auto freed = std::async(std::launch::async, [&] { a.reset(); });
  EXPECT_EQ(freed.wait_for(std::chrono::milliseconds(50)), std::future_status::timeout);  // it waits
  go.set_value();
  EXPECT_TRUE(evicted.get());
  freed.get();
  EXPECT_FALSE(static_cast<bool>(a));
  EXPECT_EQ(manager.stats().objects, 0u);
  auto b = make_unique<Obj>(Obj::of(6));
  EXPECT_TRUE(b.evict());
  EXPECT_TRUE(b.read().is(6));
}

// A write-back that fails (a transport error) fails the dereference that
// needed the frame, and leaves every object local, dirty and intact.
TEST(FarEvacuation, AFailedWriteBackKeepsTheObject) {
  bool fail = false;
  Manager manager(std::make_unique<HookedDevice>([&] {
                    if (fail) throw Error(Errc::transport, "injected: the write-back failed");
                  }),
                  small_cache(64 * 1024));
  std::vector<UniquePtr<Obj>> v;
  for (int i = 0; i < 60; ++i) v.push_back(make_unique<Obj>(Obj::of(100 + i)));  // nearly the whole cache, dirty
  auto spare = make_unique<Obj>(Obj::of(7));
  ASSERT_TRUE(spare.evict());
  for (int i = 60; i < 64; ++i) v.push_back(make_unique<Obj>(Obj::of(100 + i)));
  fail = true;
  EXPECT_EQ(rdmx::testing::error_from([&] { spare.read(); }).code(), Errc::transport);
  fail = false;
  for (int i = 0; i < 64; ++i) EXPECT_TRUE(v[i].read().is(100 + i)) << i;
  EXPECT_TRUE(spare.read().is(7));
}

// ---- The background evacuator ----

namespace {
// Threads of this process, from /proc: the evacuator is one while it runs.
int threads_now() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);)
    if (line.rfind("Threads:", 0) == 0) return std::stoi(line.substr(8));
  return -1;
}
// Polls `done` until it holds or `patience` ends.
bool eventually(const std::function<bool()>& done) {
  const auto deadline = std::chrono::steady_clock::now() + patience;
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}
}  // namespace

// Threads read and write shared and private objects (both sizes, batches,
// explicit evictions, nested scopes) while the evacuator writes victims
// back behind them, each write-back taking `write`: every value read is the
// last one written and the budget holds.
namespace {
void evacuate_under_threads(const Config& config, std::chrono::microseconds write, std::size_t rounds, std::size_t operations,
                            unsigned seed) {
  Manager manager(std::make_unique<HookedDevice>([write] { std::this_thread::sleep_for(write); }), config);
  std::atomic<std::size_t> checked{0};
  std::thread shared([&] {
    const shadow::SharedRun run = shadow::shared_objects<1024>(512, 2, rounds, 2, std::chrono::microseconds(20));
    EXPECT_EQ(run.wrong, 0u);
    checked += run.checked;
  });
  std::vector<std::thread> threads;
  for (unsigned t = 0; t < 2; ++t)
    threads.emplace_back([&, t] { checked += shadow::random_operations(manager, 60, operations, seed + t); });
  shared.join();
  for (auto& t : threads) t.join();
  EXPECT_GT(checked.load(), 2 * rounds + 2 * operations);
  const Stats s = manager.stats();
  EXPECT_LE(s.peak_resident_bytes, s.cache_bytes);
  EXPECT_GT(s.background_evictions, 0u) << s.inline_evictions << " inline, " << s.evictions << " in all, " << s.misses << " misses";
  EXPECT_EQ(s.background_failures, 0u);
  EXPECT_GE(s.evictions, s.inline_evictions + s.background_evictions);
  EXPECT_EQ(s.objects, 0u);
}
}  // namespace

TEST(FarEvacuation, BackgroundEvacuationUnderThreadsKeepsEveryValue) {
  evacuate_under_threads(small_cache(256 * 1024, true), std::chrono::microseconds(100), 1500, 800, 300);
}

// With work between accesses (think time) the evacuator keeps up: most
// misses find a free frame, and most evictions happen in the background. A
// count, not a timing: the bound is lenient (more than half) so that a
// busy machine that delays the evacuator now and then still passes.
TEST(FarEvacuation, WithThinkTimeMostEvictionsAreBackground) {
  const int before = threads_now();
  {
    Manager manager(make_local_device(1, 8 << 20), small_cache(64 * 1024, true));
    std::vector<UniquePtr<Obj>> v;
    std::vector<std::uint64_t> version(256, 0);  // 256 KiB of objects, 64 KiB of cache
    for (int i = 0; i < 256; ++i) v.push_back(make_unique<Obj>(Obj::of(0)));
    const Stats warm = manager.stats();
    std::mt19937 rng(5);
    std::size_t wrong = 0;
    for (int op = 0; op < 3000; ++op) {
      const std::size_t i = rng() % v.size();
      {
        DerefScope scope;
        if (!v[i].deref(scope)->is(version[i])) ++wrong;
        if (rng() % 2 == 0) *v[i].deref_mut(scope) = Obj::of(++version[i]);
      }
      std::this_thread::sleep_for(std::chrono::microseconds(50));  // the program's own work
    }
    EXPECT_EQ(wrong, 0u);
    const Stats s = manager.stats();
    const std::uint64_t background = s.background_evictions - warm.background_evictions;
    const std::uint64_t inline_ = s.inline_evictions - warm.inline_evictions;
    EXPECT_GT(s.misses - warm.misses, 1000u);
    EXPECT_GT(background, inline_) << background << " evictions in the background, " << inline_ << " inline";
    EXPECT_EQ(threads_now(), before + 1);  // the evacuator
  }
  EXPECT_EQ(threads_now(), before);  // joined by the Manager's destructor
}

// The evacuator that watches for work between rounds (Watch::on; by default
// only where cores are spare, so never on a 2-core machine): the same
// threads and checks as above, every value intact, the budget held, and the
// watching thread stopped and joined by the Manager's destructor.
TEST(FarEvacuation, WatchingEvacuatorKeepsEveryValueAndStops) {
  const int before = threads_now();
  Config c = small_cache(256 * 1024, true);
  c.evacuator_watch = Watch::on;
  evacuate_under_threads(c, std::chrono::microseconds(20), 1000, 600, 700);
  EXPECT_EQ(threads_now(), before);  // the watching evacuator stopped and joined
}

// RDMX_FAR_EVACUATOR_WATCH takes auto, on or off and nothing else.
TEST(FarEvacuation, WatchSettingIsParsedAndChecked) {
  EXPECT_EQ(Config::env_evacuator_watch(), Watch::automatic);
  ::setenv("RDMX_FAR_EVACUATOR_WATCH", "on", 1);
  EXPECT_EQ(Config::env_evacuator_watch(), Watch::on);
  ::setenv("RDMX_FAR_EVACUATOR_WATCH", "off", 1);
  EXPECT_EQ(Config::env_evacuator_watch(), Watch::off);
  ::setenv("RDMX_FAR_EVACUATOR_WATCH", "always", 1);
  EXPECT_THROW(Config::env_evacuator_watch(), Error);
  ::unsetenv("RDMX_FAR_EVACUATOR_WATCH");
  EXPECT_STREQ(to_string(Watch::automatic), "auto");
}

// The evacuator off (Config::evacuator, RDMX_FAR_EVACUATOR=off): no thread,
// every eviction on the thread that needs a frame, as before it existed.
TEST(FarEvacuation, OffByConfigEvictsOnlyInline) {
  const int before = threads_now();
  Manager manager(make_local_device(2, 8 << 20), small_cache(64 * 1024, false));
  EXPECT_GT(shadow::random_operations(manager, 200, 2000, 9), 2000u);
  const Stats s = manager.stats();
  EXPECT_EQ(s.background_evictions, 0u);
  EXPECT_GT(s.inline_evictions, 100u);
  EXPECT_LE(s.peak_resident_bytes, s.cache_bytes);
  EXPECT_EQ(threads_now(), before);
}

TEST(FarEvacuation, BadMarksAreRefused) {
  for (auto [low, high] : {std::pair{0.0, 0.1}, std::pair{0.2, 0.1}, std::pair{0.1, 0.6}, std::pair{-0.1, 0.1}}) {
    Config c = small_cache(64 * 1024, true);
    c.free_low = low;
    c.free_high = high;
    const Error e = rdmx::testing::error_from([&] { Manager m(make_local_device(1, 1 << 20), c); });
    EXPECT_EQ(e.code(), Errc::invalid_argument) << low << " " << high;
    EXPECT_NE(std::string(e.what()).find("RDMX_FAR_FREE_LOW"), std::string::npos) << e.what();
  }
  Config off = small_cache(64 * 1024, false);
  off.free_low = 0;  // not used with the evacuator off
  Manager m(make_local_device(1, 1 << 20), off);
}

// The Manager is destroyed while the evacuator's write-back is on the
// network: the destructor waits for it to land and for the thread to end,
// so nothing is freed under the transfer (the sanitizer builds would see it).
TEST(FarEvacuation, TeardownWhileTheEvacuatorWritesBack) {
  const auto main_thread = std::this_thread::get_id();
  std::promise<void> writing;
  std::atomic<bool> signalled{false}, landed{false};
  auto manager = std::make_unique<Manager>(std::make_unique<HookedDevice>([&] {
                                             if (std::this_thread::get_id() == main_thread || signalled.exchange(true)) return;
                                             writing.set_value();
                                             // Teardown starts meanwhile.
                                             std::this_thread::sleep_for(std::chrono::milliseconds(200));
                                             landed = true;
                                           }),
                                           small_cache(64 * 1024, true));
  // Objects through the word-level operations, so that nothing has to be
  // freed before the Manager goes: every one dirty from its allocation.
  std::vector<std::atomic<std::uint64_t>> words(128);
  std::future<void> written = writing.get_future();
  for (auto& w : words) {
    std::memset(far::detail::allocate(far::detail::runtime(), w, sizeof(Obj)), 1, sizeof(Obj));
    far::detail::commit(w);
  }
  ASSERT_EQ(written.wait_for(patience), std::future_status::ready);
  manager.reset();
  EXPECT_TRUE(landed.load());
}

// Replication 1: the only server of the victims is lost while the
// evacuator works. Its write-backs fail, counted and logged, with back-off
// (it does not spin), the victims stay local, dirty and intact, and the
// program learns of the loss from its own next operation that needs the
// server. Once the server is back the evacuator works again: it never died.
TEST(FarEvacuation, ALostServerStopsNeitherTheEvacuatorNorTheProgram) {
  auto owned = std::make_unique<HookedDevice>(nullptr);
  HookedDevice& device = *owned;
  Manager manager(std::move(owned), small_cache(64 * 1024, true));
  std::vector<UniquePtr<Obj>> v;
  for (int i = 0; i < 56; ++i) v.push_back(make_unique<Obj>(Obj::of(100 + i)));  // dirty, 56 of 64 KiB
  device.kill(0);
  // New objects take frames without the server: the evacuator wakes, and
  // once the cache is full the program's own eviction fails.
  std::optional<Errc> program_saw;
  for (int i = 56; i < 200 && !program_saw; ++i) {
    try {
      v.push_back(make_unique<Obj>(Obj::of(100 + i)));
    } catch (const Error& e) {
      program_saw = e.code();
    }
  }
  EXPECT_EQ(program_saw, std::optional(Errc::peer_failed));
  ASSERT_TRUE(eventually([&] { return manager.stats().background_failures > 0; }));
  const std::uint64_t failures = manager.stats().background_failures;
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  // Backing off: a handful of tries at most in 300 ms, not thousands.
  EXPECT_LE(manager.stats().background_failures - failures, 10u);
  EXPECT_EQ(manager.stats().background_evictions, 0u);
  for (std::size_t i = 0; i < v.size(); ++i) {
    EXPECT_TRUE(v[i].is_local()) << i;
    DerefScope scope;
    EXPECT_TRUE(v[i].deref(scope)->is(100 + i)) << i;
  }
  device.revive(0);
  ASSERT_TRUE(eventually([&] { return manager.stats().background_evictions > 0; }));
  for (std::size_t i = 0; i < 300; ++i) {
    if (i >= v.size()) v.push_back(make_unique<Obj>(Obj::of(100 + i)));
    EXPECT_TRUE(v[i].read().is(100 + i)) << i;
  }
  EXPECT_LE(manager.stats().peak_resident_bytes, manager.stats().cache_bytes);
}

// Replication 2: one copy of the group is lost; the evacuator's write-backs
// go to the survivor, and every value reads back.
TEST(FarEvacuation, ReplicatedWriteBacksInTheBackgroundGoToTheSurvivor) {
  auto owned = std::make_unique<HookedDevice>(nullptr, 2);
  HookedDevice& device = *owned;
  Config c = small_cache(64 * 1024, true);
  c.replication = 2;
  Manager manager(std::move(owned), c);
  std::vector<UniquePtr<Obj>> v;
  for (int i = 0; i < 40; ++i) v.push_back(make_unique<Obj>(Obj::of(i)));
  device.kill(1);
  const shadow::SharedRun run = shadow::shared_objects<1024>(256, 2, 2000, 2, std::chrono::microseconds(20));
  EXPECT_EQ(run.wrong, 0u);
  for (int i = 0; i < 40; ++i) EXPECT_TRUE(v[i].read().is(i)) << i;
  const Stats s = manager.stats();
  EXPECT_GT(s.background_evictions, 0u);
  EXPECT_EQ(s.background_failures, 0u);
}

// The default (Evacuator::automatic) runs the evacuator over an in-process
// device: its write-backs need no service thread there.
TEST(FarEvacuation, AutomaticRunsInProcess) {
  Config c = small_cache(64 * 1024, true);
  c.evacuator = Evacuator::automatic;
  c.free_low = 0.15;  // marks 9.6 KiB apart: a round frees 9 objects, worth a wake
  c.free_high = 0.30;
  Manager manager(make_local_device(1, 8 << 20), c);
  std::vector<UniquePtr<Obj>> v;
  for (int i = 0; i < 128; ++i) v.push_back(make_unique<Obj>(Obj::of(i)));  // twice the cache
  EXPECT_TRUE(eventually([&] {
    for (int i = 0; i < 128; ++i) EXPECT_TRUE(v[i].read().is(i)) << i;
    return manager.stats().background_evictions > 0;
  }));
}

// By default a sleeping evacuator is woken only for rounds that free
// several objects of the size the misses need: with the marks 3 KiB apart
// (5 % and 10 % of 64 KiB) and 1 KiB objects, waking it would cost each
// miss more than the few evictions it takes over, so it never starts and
// every eviction is inline. Asked for (Evacuator::on), it runs regardless.
TEST(FarEvacuation, AutomaticIsNotWokenForAFewObjects) {
  for (const Evacuator mode : {Evacuator::automatic, Evacuator::on}) {
    SCOPED_TRACE(mode == Evacuator::on ? "on" : "automatic");
    const int before = threads_now();
    Config c = small_cache(64 * 1024, true);
    c.evacuator = mode;
    Manager manager(make_local_device(1, 8 << 20), c);
    std::vector<UniquePtr<Obj>> v;
    for (int i = 0; i < 128; ++i) v.push_back(make_unique<Obj>(Obj::of(i)));  // twice the cache
    for (int round = 0; round < 3; ++round)
      for (int i = 0; i < 128; ++i) EXPECT_TRUE(v[i].read().is(i)) << i;
    if (mode == Evacuator::automatic) {
      EXPECT_EQ(threads_now(), before);
      EXPECT_EQ(manager.stats().background_evictions, 0u);
      EXPECT_GT(manager.stats().inline_evictions, 128u);
    } else {
      EXPECT_EQ(threads_now(), before + 1);
      EXPECT_TRUE(eventually([&] {
        for (int i = 0; i < 128; ++i) EXPECT_TRUE(v[i].read().is(i)) << i;
        return manager.stats().background_evictions > 0;
      }));
    }
  }
}

// Nor while its victims are clean: a read-only loop evicts inline (a clean
// eviction is a few stores, less than a wake-up costs); once the program
// writes, victims are dirty again and the evacuator takes over.
TEST(FarEvacuation, AutomaticIsNotWokenForCleanVictims) {
  Config c = small_cache(64 * 1024, true);
  c.evacuator = Evacuator::automatic;
  c.free_low = 0.15;  // marks 9.6 KiB apart: worth a wake by their gap
  c.free_high = 0.30;
  Manager manager(make_local_device(1, 8 << 20), c);
  std::vector<UniquePtr<Obj>> v;
  std::vector<std::uint64_t> version(128);
  for (int i = 0; i < 128; ++i) v.push_back(make_unique<Obj>(Obj::of(version[i] = i)));  // twice the cache, dirty
  const auto read_all = [&] {
    for (int i = 0; i < 128; ++i) EXPECT_TRUE(v[i].read().is(version[i])) << i;
  };
  for (int round = 0; round < 3; ++round) read_all();  // every object written back once: clean from here on
  const Stats quiet = manager.stats();
  for (int round = 0; round < 5; ++round) read_all();
  const Stats after = manager.stats();
  // A round already under way may finish; none starts after it.
  EXPECT_LE(after.background_evictions - quiet.background_evictions, 32u) << after.inline_evictions - quiet.inline_evictions << " inline";
  EXPECT_GT(after.inline_evictions - quiet.inline_evictions, 500u) << after.background_evictions - quiet.background_evictions << " background";
  EXPECT_TRUE(eventually([&] {
    for (int i = 0; i < 128; ++i) {
      DerefScope scope;
      *v[i].deref_mut(scope) = Obj::of(version[i] += 1000);
    }
    read_all();
    return manager.stats().background_evictions > after.background_evictions + 32;
  }));
}
