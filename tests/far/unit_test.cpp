// The far-memory manager in one process, over the in-process device.
#include <gtest/gtest.h>

#include <mutex>
#include <set>
#include <thread>

#include "../error_from.hpp"
#include "hooked_device.hpp"
#include "reply_size.hpp"
#include "rdmx/far/array.hpp"
#include "rdmx/far/offload.hpp"
#include "rdmx/far/pointer.hpp"
#include "rdmx/far/shared_pointer.hpp"
#include "shadow.hpp"

using namespace rdmx;
using namespace rdmx::far;
using rdmx::far::testing::HookedDevice;

namespace {
Config small_cache(std::size_t cache = 64 * 1024, std::size_t region = 4 << 20) {
  Config c;
  c.cache_bytes = cache;
  c.region_bytes = region;
  return c;
}
struct Point {
  int x, y;
};
Errc error_of(auto&& f) { return rdmx::testing::error_from(f).code(); }
}  // namespace

TEST(FarUnit, SizeClasses) {
  EXPECT_EQ(size_class_of(1), 0u);
  EXPECT_EQ(size_class_of(64), 0u);
  EXPECT_EQ(size_class_of(65), 1u);
  EXPECT_EQ(size_class_of(4096), 6u);
  EXPECT_EQ(size_class_of(16384), 8u);
  EXPECT_EQ(error_of([] { size_class_of(16385); }), Errc::invalid_argument);
}

TEST(FarUnit, PointerIsOneWordAndTracksLocalOrRemote) {
  Manager manager(make_local_device(2, 1 << 20), small_cache());
  auto p = make_unique<Point>(Point{1, 2});
  EXPECT_TRUE(p.is_local());
  {
    DerefScope scope;
    p.deref_mut(scope)->x = 7;
  }
  EXPECT_TRUE(p.evict());
  EXPECT_FALSE(p.is_local());
  EXPECT_EQ(state::class_of(p.state_word()), 0u);
  DerefScope scope;
  EXPECT_EQ(p.deref(scope)->x, 7);
  EXPECT_EQ(p.deref(scope)->y, 2);
  EXPECT_TRUE(p.is_local());
  EXPECT_EQ(manager.stats().write_backs, 1u);
  EXPECT_EQ(manager.stats().misses, 1u);
}

TEST(FarUnit, ObjectsSpreadOverServers) {
  Manager manager(make_local_device(3, 1 << 20), small_cache());
  std::vector<UniquePtr<Point>> v;
  std::set<std::uint32_t> servers;
  for (int i = 0; i < 6; ++i) {
    v.push_back(make_unique<Point>(Point{i, i}));
    v.back().evict();
    servers.insert(state::server_of(v.back().state_word()));
  }
  EXPECT_EQ(servers.size(), 3u);
}

TEST(FarUnit, PinnedObjectsAreNotEvicted) {
  Manager manager(make_local_device(1, 1 << 20), small_cache());
  auto p = make_unique<Point>(Point{3, 4});
  DerefScope scope;
  const Point* local = p.deref(scope);
  EXPECT_FALSE(p.evict());
  // Fill the cache many times over: p stays where it is.
  std::vector<UniquePtr<std::array<char, 4096>>> filler;
  for (int i = 0; i < 64; ++i) filler.push_back(make_unique<std::array<char, 4096>>());
  EXPECT_EQ(p.deref(scope), local);
  EXPECT_EQ(local->x, 3);
  EXPECT_GT(manager.stats().evictions, 0u);
}

TEST(FarUnit, BudgetIsRespected) {
  Manager manager(make_local_device(2, 4 << 20), small_cache(64 * 1024));
  const std::size_t checked = shadow::random_operations(manager, 200, 3000, 1);
  EXPECT_GT(checked, 3000u);
  Stats s = manager.stats();
  EXPECT_LE(s.peak_resident_bytes, s.cache_bytes);
  EXPECT_GT(s.evictions, 100u);
  EXPECT_GT(s.write_backs, 0u);
  EXPECT_EQ(s.objects, 0u);  // every object freed
}

TEST(FarUnit, ConcurrentReadersAndWritersAgreeWithTheirShadows) {
  Manager manager(make_local_device(2, 8 << 20), small_cache(128 * 1024));
  std::vector<std::thread> threads;
  std::atomic<std::size_t> checked{0};
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([t, &checked, &manager] { checked += shadow::random_operations(manager, 100, 1500, 100 + t); });
  for (auto& t : threads) t.join();
  EXPECT_GT(checked.load(), 4 * 1500u);
  EXPECT_LE(manager.stats().peak_resident_bytes, manager.stats().cache_bytes);
  EXPECT_GT(manager.stats().evictions, 100u);
}

// Threads sharing objects: the program orders accesses to one object (a
// mutex per object, as it must for any shared data), eviction runs in
// whichever thread needs a frame, holding none of those mutexes. Every read
// must see the last write.
TEST(FarUnit, SharedObjectsUnderEviction) {
  Manager manager(make_local_device(1, 8 << 20), small_cache(64 * 1024));
  const shadow::SharedRun run = shadow::shared_objects<1024>(128, 4, 4000, 3);
  EXPECT_EQ(run.wrong, 0u);
  EXPECT_EQ(run.checked, 4 * 4000u + 128);
  EXPECT_GT(manager.stats().evictions, 0u);
}

TEST(FarUnit, ErrorsAreClear) {
  Manager manager(make_local_device(1, 64 * 1024), small_cache());
  UniquePtr<Point> p = make_unique<Point>(Point{1, 1});
  // Out of far memory: the 64 KiB region holds three more 16 KiB objects.
  std::vector<UniquePtr<std::array<char, 16384>>> big;
  for (int i = 0; i < 3; ++i) big.push_back(make_unique<std::array<char, 16384>>());
  EXPECT_EQ(error_of([] { make_unique<std::array<char, 16384>>(); }), Errc::out_of_memory);
  big.pop_back();
  big.push_back(make_unique<std::array<char, 16384>>());  // the freed block is reused
  // Freeing a pinned object, dereferencing a null one.
  {
    DerefScope scope;
    p.deref(scope);
    EXPECT_EQ(error_of([&] { p.reset(); }), Errc::invalid_argument);
  }
  UniquePtr<Point> q = std::move(p);
  DerefScope scope;
  EXPECT_EQ(error_of([&] { p.deref(scope); }), Errc::invalid_argument);
  EXPECT_EQ(q.deref(scope)->x, 1);
  // A second manager in the process, a cache below four slabs.
  EXPECT_EQ(error_of([] { Manager m(make_local_device(1, 1 << 20), small_cache()); }), Errc::invalid_argument);
}

// A pin held by another thread is waited for, however long the scheduler
// keeps that thread away (a loaded machine can for tens of milliseconds);
// only this thread's own pin is an error at once (ErrorsAreClear).
TEST(FarUnit, FreeAndEvictWaitForAnotherThreadsPin) {
  Manager manager(make_local_device(1, 4 << 20), small_cache());
  UniquePtr<Point> p = make_unique<Point>(Point{3, 4});
  UniquePtr<Point> q = make_unique<Point>(Point{5, 6});
  std::atomic<int> phase{0};  // 1: pinned, 2: about to end the scope
  std::thread holder([&] {
    DerefScope scope;
    EXPECT_EQ(p.deref(scope)->x, 3);
    EXPECT_EQ(q.deref(scope)->x, 5);
    phase = 1;
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    phase = 2;
  });
  while (phase.load() == 0) std::this_thread::yield();
  EXPECT_TRUE(q.evict());
  EXPECT_EQ(phase.load(), 2);  // not before the scope let go
  EXPECT_FALSE(q.is_local());
  p.reset();
  holder.join();
  DerefScope scope;
  EXPECT_EQ(q.deref(scope)->y, 6);
}

TEST(FarUnit, BudgetExhaustedByPinsIsAnError) {
  Manager manager(make_local_device(1, 4 << 20), small_cache(64 * 1024));
  std::vector<UniquePtr<std::array<char, 16384>>> v;
  for (int i = 0; i < 8; ++i) v.push_back(make_unique<std::array<char, 16384>>());
  DerefScope scope;
  for (int i = 0; i < 4; ++i) v[i].deref(scope);
  EXPECT_EQ(error_of([&] { v[5].deref(scope); }), Errc::out_of_memory);
}

TEST(FarUnit, BadConfiguration) {
  EXPECT_EQ(error_of([] { Manager m(make_local_device(1, 1 << 20), small_cache(16 * 1024)); }), Errc::invalid_argument);
  EXPECT_EQ(error_of([] { size_class_of(std::size_t{1} << 40); }), Errc::invalid_argument);
}

TEST(FarUnit, DeviceChecksEveryOffset) {
  auto device = make_local_device(1, 4096);
  char buffer[64];
  EXPECT_EQ(error_of([&] { device->read(0, 4096 - 32, buffer, 64); }), Errc::invalid_argument);
  EXPECT_EQ(error_of([&] { device->write(1, 0, buffer, 64); }), Errc::invalid_argument);
  EXPECT_EQ(error_of([&] { device->read(0, ~0ull, buffer, 64); }), Errc::invalid_argument);
}

// The job reports a process failed before any operation met the loss: a
// replicated device drops that process's copies at once, so reads (single
// and batched) go to the survivor and writes to it alone; with both copies
// of a group reported, the group fails with peer_failed.
TEST(FarUnit, ReplicationDropsTheCopiesOfAFailedProcess) {
  auto owned = std::make_unique<HookedDevice>(nullptr, 4, 1 << 20);
  HookedDevice& inner = *owned;
  const auto device = make_replicated(std::move(owned), 2);  // groups {0, 1} and {2, 3}
  const std::uint64_t value = 42;
  std::uint64_t back = 0;
  device->write(1, 0, &value, sizeof value);
  EXPECT_EQ(inner.writes(2), 1u);
  EXPECT_EQ(inner.writes(3), 1u);
  device->process_failed(inner.rank_of(2));
  device->read(1, 0, &back, sizeof back);
  EXPECT_EQ(back, 42u);
  const Device::Transfer batch[] = {{1, 0, &back, sizeof back}, {0, 0, &back, sizeof back}};
  device->read_many(batch);
  EXPECT_EQ(inner.reads(2), 0u);
  EXPECT_EQ(inner.reads(3), 2u);
  EXPECT_EQ(inner.reads(0), 1u);  // the other group as before
  device->write(1, 0, &value, sizeof value);
  EXPECT_EQ(inner.writes(2), 1u);
  EXPECT_EQ(inner.writes(3), 2u);
  device->process_failed(inner.rank_of(3));
  EXPECT_EQ(error_of([&] { device->read(1, 0, &back, sizeof back); }), Errc::peer_failed);
  EXPECT_EQ(inner.reads(3), 2u);
}

TEST(FarUnit, ReplicationSurvivesTheLossOfOneCopy) {
  auto owned = std::make_unique<HookedDevice>(nullptr, 4, 1 << 20);
  HookedDevice& device = *owned;
  Config c = small_cache();
  c.replication = 2;
  Manager manager(std::move(owned), c);
  EXPECT_EQ(manager.device().servers(), 2u);
  std::vector<UniquePtr<std::uint64_t>> v;
  for (std::uint64_t i = 0; i < 16; ++i) {
    v.push_back(make_unique<std::uint64_t>(i * 3));
    ASSERT_TRUE(v.back().evict());
  }
  device.kill(1);  // group 0 keeps server 0
  {
    DerefScope scope;
    for (std::uint64_t i = 0; i < 16; ++i) {
      EXPECT_EQ(*v[i].deref(scope), i * 3);
      *v[i].deref_mut(scope) += 1;
    }
  }
  for (auto& p : v) ASSERT_TRUE(p.evict());  // written to the surviving copies only
  device.kill(2);  // group 1 keeps server 3
  {
    DerefScope scope;
    for (std::uint64_t i = 0; i < 16; ++i) EXPECT_EQ(*v[i].deref(scope), i * 3 + 1);
  }
  for (auto& p : v) ASSERT_TRUE(p.evict());
  device.kill(0);  // group 0 is gone: its objects fail clearly, group 1's still read
  std::size_t lost = 0, read = 0;
  for (std::uint64_t i = 0; i < 16; ++i) {
    DerefScope scope;
    try {
      EXPECT_EQ(*v[i].deref(scope), i * 3 + 1);
      ++read;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), Errc::peer_failed);
      EXPECT_NE(std::string(e.what()).find("every copy of server group 0"), std::string::npos) << e.what();
      ++lost;
    }
  }
  EXPECT_EQ(lost, 8u);
  EXPECT_EQ(read, 8u);
}

// CLOCK keeps what is used between two passes of its hand and drops what
// is only read non-temporally: while a stream of misses sweeps the cache
// (a round of it is about half a turn of the hand), 16 objects read every
// round seldom miss again, and 16 read with deref_nt keep missing.
TEST(FarUnit, ClockKeepsReferencedObjectsAndDropsNonTemporalOnes) {
  Config c = small_cache();  // 1024 frames of 64 bytes
  c.evacuator = Evacuator::off;
  Manager manager(make_local_device(1, 4 << 20), c);
  using Object = std::array<std::uint64_t, 8>;
  const auto make = [](std::size_t n, std::uint64_t first) {
    std::vector<UniquePtr<Object>> v;
    for (std::size_t i = 0; i < n; ++i) {
      v.push_back(far::make_unique<Object>(Object{first + i}));
      v.back().evict();
    }
    return v;
  };
  auto kept = make(16, 0), dropped = make(16, 100), stream = make(4096, 1000);
  std::size_t cursor = 0;
  std::uint64_t kept_misses = 0, dropped_misses = 0;
  constexpr int rounds = 40;
  for (int round = 0; round < rounds; ++round) {
    for (int i = 0; i < 256; ++i, cursor = (cursor + 1) % stream.size()) {
      DerefScope scope;
      ASSERT_EQ((*stream[cursor].deref(scope))[0], 1000 + cursor);
    }
    std::uint64_t before = manager.stats().misses;
    for (std::size_t i = 0; i < kept.size(); ++i) {
      DerefScope scope;
      ASSERT_EQ((*kept[i].deref(scope))[0], i);
    }
    if (round > 0) kept_misses += manager.stats().misses - before;
    before = manager.stats().misses;
    for (std::size_t i = 0; i < dropped.size(); ++i) {
      DerefScope scope;
      ASSERT_EQ((*dropped[i].deref_nt(scope))[0], 100 + i);
    }
    dropped_misses += manager.stats().misses - before;
  }
  // Not never: a turn of the hand that finds most objects cold is short,
  // and two turns between the rounds' reads drop the used ones too.
  EXPECT_LE(kept_misses * 4, dropped_misses) << kept_misses << " against " << dropped_misses;
  EXPECT_GE(dropped_misses, rounds * dropped.size() / 4);
}

// A fetch that fails is not counted as a miss; the object stays remote and
// a later dereference fails the same way.
TEST(FarUnit, FailedFetchesAreNoMisses) {
  auto owned = std::make_unique<HookedDevice>(nullptr, 1, 1 << 20);
  HookedDevice& device = *owned;
  Manager manager(std::move(owned), small_cache());
  auto a = make_unique<std::uint64_t>(std::uint64_t{7});
  auto b = make_unique<std::uint64_t>(std::uint64_t{8});
  ASSERT_TRUE(a.evict());
  ASSERT_TRUE(b.evict());
  {
    DerefScope scope;
    EXPECT_EQ(*a.deref(scope), 7u);
  }
  EXPECT_EQ(manager.stats().misses, 1u);
  device.kill(0);
  for (int i = 0; i < 2; ++i) {
    DerefScope scope;
    EXPECT_EQ(error_of([&] { b.deref(scope); }), Errc::peer_failed);
  }
  EXPECT_EQ(manager.stats().misses, 1u);
  EXPECT_FALSE(b.is_local());
}

TEST(FarUnit, ReplicationNeedsDivisibleServers) {
  Config c = small_cache();
  c.replication = 2;
  EXPECT_EQ(error_of([&] { Manager m(make_local_device(3, 1 << 20), c); }), Errc::invalid_argument);
}

TEST(FarUnit, SharedPointersShareOneObject) {
  Manager manager(make_local_device(1, 1 << 20), small_cache());
  auto a = make_shared<Point>(Point{1, 2});
  SharedPtr<Point> b = a;
  EXPECT_EQ(a.use_count(), 2);
  b.write({3, 4});
  EXPECT_TRUE(a.evict());
  EXPECT_FALSE(b.is_local());  // one state word: both copies see the eviction
  EXPECT_EQ(b.read().x, 3);
  EXPECT_TRUE(a.is_local());
  EXPECT_EQ(manager.stats().objects, 1u);
  a.reset();
  EXPECT_EQ(b.read().y, 4);
  b.reset();
  EXPECT_EQ(manager.stats().objects, 0u);  // the last copy freed it
  DerefScope scope;
  EXPECT_EQ(error_of([&] { b.deref(scope); }), Errc::invalid_argument);
}

TEST(FarUnit, ReadAndWriteCopy) {
  Manager manager(make_local_device(1, 1 << 20), small_cache());
  auto p = make_unique<Point>(Point{5, 6});
  p.write({7, 8});
  p.evict();
  EXPECT_EQ(p.read().x, 7);
  EXPECT_EQ(p.read().y, 8);
}

TEST(FarUnit, DerefAllFetchesABatch) {
  Manager manager(make_local_device(2, 4 << 20), small_cache(64 * 1024));
  using Obj = shadow::Pattern<512>;
  std::vector<UniquePtr<Obj>> v;
  for (std::uint64_t i = 0; i < 200; ++i) {  // 100 KiB: more than the budget
    v.push_back(make_unique<Obj>(Obj::of(i)));
    v.back().evict();
  }
  const auto misses = manager.stats().misses;
  {
    DerefScope scope;
    // Local and remote objects in one batch.
    v[3].deref(scope);
    auto objects = deref_all(scope, std::span<const UniquePtr<Obj>>(v.data(), 32));
    ASSERT_EQ(objects.size(), 32u);
    for (std::uint64_t i = 0; i < 32; ++i) EXPECT_TRUE(objects[i]->is(i)) << i;
    EXPECT_EQ(manager.stats().misses - misses, 32u);
    EXPECT_EQ(scope.pinned(), 33u);
    // A word named twice is fetched once.
    std::atomic<std::uint64_t>* twice[] = {&v[50].word(), &v[50].word()};
    void* out[2] = {};
    far::detail::deref_start(twice, sizeof(Obj), scope, Access::read, out).finish();
    EXPECT_EQ(out[0], out[1]);
    EXPECT_TRUE(static_cast<const Obj*>(out[0])->is(50));
    EXPECT_EQ(manager.stats().misses - misses, 33u);
  }
  // A batch larger than the budget: a clear error, and every object still works after.
  {
    DerefScope scope;
    EXPECT_EQ(error_of([&] { deref_all(scope, std::span<const UniquePtr<Obj>>(v)); }), Errc::out_of_memory);
  }
  for (std::uint64_t i = 0; i < 200; ++i) EXPECT_TRUE(v[i].read().is(i)) << i;
  // Writes through a batch are written back.
  {
    DerefScope scope;
    auto objects = deref_all(scope, std::span<const UniquePtr<Obj>>(v.data() + 40, 8), Access::write);
    for (std::uint64_t i = 0; i < 8; ++i) *objects[i] = Obj::of(1000 + i);
  }
  for (std::uint64_t i = 0; i < 8; ++i) {
    v[40 + i].evict();
    EXPECT_TRUE(v[40 + i].read().is(1000 + i));
  }
}

TEST(FarUnit, ArrayScansInWindowsUnderASmallBudget) {
  Manager manager(make_local_device(2, 4 << 20), small_cache(64 * 1024));
  Array<std::uint64_t> a(100000);  // 800 KiB: 12 times the budget
  EXPECT_EQ(Array<std::uint64_t>::per_chunk, 512u);
  a.for_each_mut([](std::size_t i, std::uint64_t& x) { x = i * i; });
  std::uint64_t sum = 0, expected = 0;
  a.for_each([&](std::size_t i, const std::uint64_t& x) {
    EXPECT_EQ(x, std::uint64_t{i} * i);
    sum += x;
  });
  for (std::uint64_t i = 0; i < 100000; ++i) expected += i * i;
  EXPECT_EQ(sum, expected);
  EXPECT_GT(manager.stats().write_backs, 100u);
  // A range that starts and ends inside chunks.
  std::size_t visited = 0;
  a.for_each([&](std::size_t i, const std::uint64_t&) {
    EXPECT_GE(i, 1000u);
    EXPECT_LT(i, 3001u);
    ++visited;
  }, 1000, 3001, 3);
  EXPECT_EQ(visited, 2001u);
  {
    DerefScope scope;
    a.at_mut(scope, 77777) = 5;
    EXPECT_EQ(a.at(scope, 77777), 5u);
    EXPECT_EQ(error_of([&] { a.at(scope, 100000); }), Errc::invalid_argument);
  }
}

// A byte-wise copy of a far pointer's word (what a memcpy of a UniquePtr
// makes) is caught, local or remote, by dereference and by free.
TEST(FarUnit, DanglingWordsAndDoubleFreesAreErrors) {
  Manager manager(make_local_device(1, 1 << 20), small_cache());
  auto p = make_unique<Point>(Point{1, 2});
  std::atomic<std::uint64_t> copy{p.state_word()};  // local: names p's frame
  {
    DerefScope scope;
    const Error e = rdmx::testing::error_from([&] { far::detail::deref(copy, sizeof(Point), scope, Access::read); });
    EXPECT_EQ(e.code(), Errc::invalid_argument);
    EXPECT_NE(std::string(e.what()).find("dangling"), std::string::npos) << e.what();
  }
  EXPECT_EQ(error_of([&] { far::detail::free(far::detail::runtime(), copy); }), Errc::invalid_argument);
  ASSERT_TRUE(p.evict());
  std::atomic<std::uint64_t> remote_copy{p.state_word()};  // remote: names p's far block
  p.reset();
  const Error e = rdmx::testing::error_from([&] { far::detail::free(far::detail::runtime(), remote_copy); });
  EXPECT_EQ(e.code(), Errc::invalid_argument);
  EXPECT_NE(std::string(e.what()).find("double free"), std::string::npos) << e.what();
  EXPECT_EQ(manager.stats().objects, 0u);
  // A word naming a block outside every share.
  std::atomic<std::uint64_t> foreign{state::remote(0, 1ull << 30, 0)};
  EXPECT_EQ(error_of([&] { far::detail::free(far::detail::runtime(), foreign); }), Errc::invalid_argument);
  {
    DerefScope scope;
    EXPECT_EQ(error_of([&] { far::detail::deref(foreign, 64, scope, Access::read); }), Errc::invalid_argument);
  }
  std::atomic<std::uint64_t> bad_server{state::remote(7, 0, 0)};
  DerefScope scope;
  EXPECT_EQ(error_of([&] { far::detail::deref(bad_server, 64, scope, Access::read); }), Errc::invalid_argument);
}

TEST(FarUnit, SettingsFromTheEnvironment) {
  ::setenv("RDMX_FAR_SERVERS", "1,2", 1);
  ::setenv("RDMX_FAR_PATH", "two-sided", 1);
  ::setenv("RDMX_FAR_CACHE", "1M", 1);
  Config c;
  EXPECT_EQ(c.servers, (std::vector<std::uint32_t>{1, 2}));
  EXPECT_EQ(c.path, Path::two_sided);
  EXPECT_EQ(c.cache_bytes, std::size_t{1} << 20);
  ::setenv("RDMX_FAR_EVACUATOR", "off", 1);
  ::setenv("RDMX_FAR_FREE_LOW", "20", 1);
  ::setenv("RDMX_FAR_FREE_HIGH", "30", 1);
  EXPECT_EQ(Config{}.evacuator, Evacuator::off);
  EXPECT_DOUBLE_EQ(Config{}.free_low, 0.2);
  EXPECT_DOUBLE_EQ(Config{}.free_high, 0.3);
  for (const char* junk : {"x", "1,", ",1", "1,,2", "1 2", "-1", "99999999999"}) {
    ::setenv("RDMX_FAR_SERVERS", junk, 1);
    const Error e = rdmx::testing::error_from([] { Config::env_servers(); });
    EXPECT_EQ(e.code(), Errc::invalid_argument) << junk;
    EXPECT_NE(std::string(e.what()).find("RDMX_FAR_SERVERS"), std::string::npos) << e.what();
  }
  ::setenv("RDMX_FAR_PATH", "rdma", 1);
  EXPECT_EQ(error_of([] { Config::env_path(); }), Errc::invalid_argument);
  ::setenv("RDMX_FAR_REPLICATION", "0", 1);
  EXPECT_EQ(error_of([] { Config::env_replication(); }), Errc::invalid_argument);
  ::setenv("RDMX_FAR_EVACUATOR", "on", 1);
  EXPECT_EQ(Config::env_evacuator(), Evacuator::on);
  ::setenv("RDMX_FAR_EVACUATOR", "sometimes", 1);
  EXPECT_EQ(error_of([] { Config::env_evacuator(); }), Errc::invalid_argument);
  for (const char* junk : {"0", "51", "5%", "0.1"}) {
    ::setenv("RDMX_FAR_FREE_LOW", junk, 1);
    const Error e = rdmx::testing::error_from([] { Config::env_free_low(); });
    EXPECT_EQ(e.code(), Errc::invalid_argument) << junk;
    EXPECT_NE(std::string(e.what()).find("RDMX_FAR_FREE_LOW"), std::string::npos) << e.what();
  }
  for (const char* name : {"RDMX_FAR_SERVERS", "RDMX_FAR_PATH", "RDMX_FAR_CACHE", "RDMX_FAR_REPLICATION", "RDMX_FAR_EVACUATOR",
                           "RDMX_FAR_FREE_LOW", "RDMX_FAR_FREE_HIGH"})
    ::unsetenv(name);
  EXPECT_TRUE(Config{}.servers.empty());
  EXPECT_EQ(Config{}.path, Path::one_sided);
  EXPECT_EQ(Config{}.evacuator, Evacuator::automatic);
  EXPECT_LT(Config{}.free_low, Config{}.free_high);
}

// The two halves of a batch: work between starting the misses and using
// the objects, a dereference of an in-flight object by the thread that
// started it, and a batch nobody finished.
TEST(FarUnit, BatchesInFlight) {
  Manager manager(make_local_device(1, 1 << 20), small_cache());
  std::vector<UniquePtr<std::uint64_t>> v;
  for (std::uint64_t i = 0; i < 8; ++i) {
    v.push_back(make_unique<std::uint64_t>(i + 100));
    v.back().evict();
  }
  std::vector<std::atomic<std::uint64_t>*> words;
  for (auto& p : v) words.push_back(&p.word());
  std::vector<void*> out(words.size());
  {
    DerefScope scope;
    far::detail::InFlight batch = far::detail::deref_start(words, sizeof(std::uint64_t), scope, Access::read, out);
    // Its own thread dereferences an object still in flight: the batch finishes first.
    EXPECT_EQ(*v[5].deref(scope), 105u);
    batch.finish();
    for (std::uint64_t i = 0; i < 8; ++i) EXPECT_EQ(*static_cast<const std::uint64_t*>(out[i]), i + 100);
  }
  for (auto& p : v) ASSERT_TRUE(p.evict());
  DerefScope scope;
  {
    far::detail::InFlight unfinished = far::detail::deref_start(words, sizeof(std::uint64_t), scope, Access::read, out);
  }  // finished by its destructor
  for (std::uint64_t i = 0; i < 8; ++i) EXPECT_TRUE(v[i].is_local());
  EXPECT_EQ(*v[2].deref(scope), 102u);
}

TEST(FarUnit, PrefetchOverlapsWork) {
  Manager manager(make_local_device(2, 4 << 20), small_cache(64 * 1024));
  using Obj = shadow::Pattern<1024>;
  std::vector<UniquePtr<Obj>> v;
  for (std::uint64_t i = 0; i < 256; ++i) v.push_back(make_unique<Obj>(Obj::of(i)));  // 4 times the budget
  std::size_t checked = 0;
  for (std::size_t first = 0; first + 16 <= v.size(); first += 16) {
    DerefScope scope;
    Prefetch<UniquePtr<Obj>> next(scope, std::span<const UniquePtr<Obj>>(v.data() + first, 16));
    checked += first;  // work while the misses travel
    const auto objects = next.get();
    for (std::size_t k = 0; k < 16; ++k) EXPECT_TRUE(objects[k]->is(first + k)) << first + k;
  }
  EXPECT_GT(checked, 0u);
  EXPECT_GE(manager.stats().misses, 200u);
}

namespace {
// Offloaded operations: trivially copyable, they travel by value.
struct CountAbove {
  double threshold;
  struct Result {
    std::uint64_t count;
    double largest;
  };
  Result identity() const { return {0, -1e300}; }
  void fold(Result& r, const double* items, std::size_t n) const {
    for (std::size_t i = 0; i < n; ++i) {
      r.count += items[i] > threshold;
      r.largest = std::max(r.largest, items[i]);
    }
  }
  void combine(Result& r, const Result& p) const {
    r.count += p.count;
    r.largest = std::max(r.largest, p.largest);
  }
};
struct Scale {
  double by;
  void apply(double* items, std::size_t n) const {
    for (std::size_t i = 0; i < n; ++i) items[i] *= by;
  }
};
struct Throws {
  using Result = int;
  int identity() const { return 0; }
  void fold(int&, const double*, std::size_t) const { throw std::runtime_error("no folding today"); }
  void combine(int&, const int&) const {}
};
}  // namespace

TEST(FarUnit, OffloadedReduceAndUpdateMatchLocalLoops) {
  Manager manager(make_local_device(3, 4 << 20), small_cache());
  constexpr std::size_t n = 100003;  // the last chunk is partly used: only its elements count
  Array<double> a(n);
  a.for_each_mut([](std::size_t i, double& x) { x = static_cast<double>(i % 1000); });
  {
    DerefScope scope;
    a.at_mut(scope, 5) = 1e6;  // dirty in the cache: the servers must see it
  }
  double local = 0;
  a.for_each([&](std::size_t, const double& x) { local += x; });
  EXPECT_EQ(a.reduce_remote(Sum<double>{}), local);
  const auto above = a.reduce_remote(CountAbove{990});
  EXPECT_EQ(above.largest, 1e6);
  std::uint64_t expected = 0;
  a.for_each([&](std::size_t, const double& x) { expected += x > 990; });
  EXPECT_EQ(above.count, expected);

  EXPECT_EQ(a.update_remote(Scale{2}), n);
  // Local copies were dropped: what is read now is what the servers changed.
  std::size_t wrong = 0;
  a.for_each([&](std::size_t i, const double& x) { wrong += x != (i == 5 ? 2e6 : 2.0 * (i % 1000)); });
  EXPECT_EQ(wrong, 0u);
  EXPECT_EQ(a.reduce_remote(Sum<double>{}), 2 * local);
}

TEST(FarUnit, OffloadErrorsAreClear) {
  Manager manager(make_local_device(1, 4 << 20), small_cache());
  Array<double> a(10000);
  {
    DerefScope scope;
    a.at(scope, 600);  // chunk 1 pinned
    const Error e = rdmx::testing::error_from([&] { a.reduce_remote(Sum<double>{}); });
    EXPECT_EQ(e.code(), Errc::invalid_argument);
    EXPECT_NE(std::string(e.what()).find("chunk 1 is in use"), std::string::npos) << e.what();
  }
  const Error thrown = rdmx::testing::error_from([&] { a.reduce_remote(Throws{}); });
  EXPECT_EQ(thrown.code(), Errc::remote_exception);
  EXPECT_NE(std::string(thrown.what()).find("no folding today"), std::string::npos) << thrown.what();
  // Malformed requests (hostile input at a server) are refused, not run.
  struct SumKind {
    static double start(const Sum<double>&) { return 0; }
    static void run(const Sum<double>& op, double& r, double* items, std::size_t k) { op.fold(r, items, k); }
  };
  using Header = far::detail::OffloadHeader<Sum<double>>;
  const auto request = [&](std::vector<std::byte> args) {
    double result = 0;
    manager.device().compute(0, Device::Offload{fabric::FunctionId<far::detail::OffloadHandler<Sum<double>, double, SumKind>>::value, args,
                                                &result, sizeof result, false});
    return result;
  };
  const auto with = [](Header h, std::vector<far::detail::OffloadObject> objects) {
    std::vector<std::byte> args(sizeof h + objects.size() * sizeof(far::detail::OffloadObject));
    std::memcpy(args.data(), &h, sizeof h);
    if (!objects.empty()) std::memcpy(args.data() + sizeof h, objects.data(), objects.size() * sizeof(far::detail::OffloadObject));
    return args;
  };
  EXPECT_EQ(error_of([&] { request(std::vector<std::byte>(5)); }), Errc::protocol);
  EXPECT_EQ(error_of([&] { request(with(Header{Sum<double>{}, 3, 64}, {{0, 8, 0}})); }), Errc::protocol);     // count lies
  EXPECT_EQ(error_of([&] { request(with(Header{Sum<double>{}, 1, 64}, {{0, 9, 0}})); }), Errc::protocol);     // items overrun
  EXPECT_EQ(error_of([&] { request(with(Header{Sum<double>{}, 1, 64}, {{4 << 20, 8, 0}})); }), Errc::invalid_argument);  // outside
  EXPECT_EQ(request(with(Header{Sum<double>{}, 0, 64}, {})), 0.0);  // nothing to fold
}

TEST(FarUnit, OffloadReplyOfAnotherSizeIsRefused) {
  Manager manager(make_local_device(1, 4 << 20), small_cache());
  far_test::expect_reply_sizes_checked(manager.device());
}

TEST(FarUnit, OffloadedUpdatesReachEveryCopy) {
  auto owned = std::make_unique<HookedDevice>(nullptr, 2, 4 << 20);
  HookedDevice& device = *owned;
  Config c = small_cache();
  c.replication = 2;
  Manager manager(std::move(owned), c);
  Array<double> a(20000);
  a.for_each_mut([](std::size_t i, double& x) { x = static_cast<double>(i); });
  EXPECT_EQ(a.update_remote(Scale{3}), 20000u);
  device.kill(0);  // the survivor has the update too
  double sum = 0;
  a.for_each([&](std::size_t, const double& x) { sum += x; });
  EXPECT_EQ(sum, 3.0 * 20000 * 19999 / 2);
  EXPECT_EQ(a.reduce_remote(Sum<double>{}), sum);
  device.kill(1);
  EXPECT_EQ(error_of([&] { a.reduce_remote(Sum<double>{}); }), Errc::peer_failed);
}

// Dereferences returning futures: many outstanding in one scope, all
// completed by one wait, when_all over them, writes through them.
TEST(FarUnit, DereferenceFutures) {
  Manager manager(make_local_device(2, 4 << 20), small_cache(128 * 1024));
  using Obj = shadow::Pattern<1024>;
  std::vector<UniquePtr<Obj>> v;
  for (std::uint64_t i = 0; i < 512; ++i) v.push_back(make_unique<Obj>(Obj::of(i)));  // 4 times the budget
  std::vector<std::uint64_t> seeds(v.size());
  for (std::uint64_t i = 0; i < v.size(); ++i) seeds[i] = i;
  std::uint64_t next_seed = 1000;
  for (std::size_t first = 0; first + 48 <= v.size(); first += 48) {
    DerefScope scope;
    std::vector<Future<const Obj*>> reads;
    for (std::size_t k = 0; k < 40; ++k) reads.push_back(v[first + k].deref_async(scope));
    std::vector<Future<Obj*>> writes;
    for (std::size_t k = 40; k < 48; ++k) writes.push_back(v[first + k].deref_mut_async(scope));
    EXPECT_TRUE(reads.back().valid());
    auto all = when_all(std::move(reads)).get();  // one wait completes every one
    for (std::size_t k = 0; k < 40; ++k) {
      ASSERT_TRUE(all[k].ready());
      const Obj* o = all[k].get();
      EXPECT_TRUE(manager.in_cache(o));
      EXPECT_TRUE(o->is(seeds[first + k])) << first + k;
    }
    for (std::size_t k = 40; k < 48; ++k) {
      Obj* o = writes[k - 40].get();
      EXPECT_TRUE(o->is(seeds[first + k]));
      seeds[first + k] = next_seed;
      *o = Obj::of(next_seed++);
    }
  }
  EXPECT_GE(manager.stats().misses, 300u);
  DerefScope scope;
  for (std::size_t i = 0; i < v.size(); ++i) {
    DerefScope one;
    EXPECT_TRUE(v[i].deref_nt_async(one).get()->is(seeds[i])) << i;
  }
}

// The starting thread's own dereference of an object in flight finishes
// its transfer; a scope that ends first lands what is in flight and fails
// the futures it leaves (their addresses are no longer pinned); a future
// dropped unwaited leaves nothing behind.
TEST(FarUnit, DereferenceFuturesAndTheirScope) {
  Manager manager(make_local_device(1, 1 << 20), small_cache());
  std::vector<UniquePtr<std::uint64_t>> v;
  for (std::uint64_t i = 0; i < 16; ++i) {
    v.push_back(make_unique<std::uint64_t>(i + 100));
    ASSERT_TRUE(v.back().evict());
  }
  {
    DerefScope scope;
    auto f = v[0].deref_async(scope);
    EXPECT_EQ(*v[0].deref(scope), 100u);  // finishes the transfer first
    const std::uint64_t* p = f.get();
    EXPECT_EQ(p, v[0].deref(scope));
    EXPECT_EQ(*p, 100u);
    auto local = v[0].deref_async(scope);  // already local: ready at once
    EXPECT_TRUE(local.ready());
    EXPECT_EQ(*local.get(), 100u);
  }
  std::vector<Future<const std::uint64_t*>> left;
  {
    DerefScope scope;
    for (std::size_t i = 1; i < 16; ++i) left.push_back(v[i].deref_async(scope));
    { auto dropped = v[1].deref_async(scope); }
  }
  for (auto& f : left) {
    ASSERT_TRUE(f.ready());  // completed when the scope ended
    EXPECT_EQ(error_of([&] { f.get(); }), Errc::invalid_argument);
  }
  for (std::size_t i = 1; i < 16; ++i) {
    EXPECT_TRUE(v[i].is_local());  // landed, and no longer busy or pinned
    EXPECT_TRUE(v[i].evict());
    EXPECT_EQ(v[i].read(), i + 100);
  }
  // A failure comes from the future too: a null pointer.
  UniquePtr<std::uint64_t> null;
  DerefScope scope;
  auto f = far::detail::deref_async(null.word(), 8, scope, Access::read);
  EXPECT_EQ(error_of([&] { f.get(); }), Errc::invalid_argument);
}

// Another thread waiting for a shared far future waits until the starting
// thread finishes it; a lost server fails the future with peer_failed.
TEST(FarUnit, DereferenceFuturesAcrossThreadsAndLosses) {
  auto owned = std::make_unique<HookedDevice>(nullptr, 2, 1 << 20);
  HookedDevice& device = *owned;
  Manager manager(std::move(owned), small_cache());
  std::vector<UniquePtr<std::uint64_t>> v;
  for (std::uint64_t i = 0; i < 8; ++i) {
    v.push_back(make_unique<std::uint64_t>(i * 7));
    ASSERT_TRUE(v.back().evict());
  }
  {
    DerefScope scope;
    SharedFuture<const std::uint64_t*> shared = v[3].deref_async(scope).share();
    std::atomic<std::uint64_t> seen{0};
    std::thread waiter([&] { seen = *shared.get(); });
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    EXPECT_EQ(*shared.get(), 21u);  // this thread's wait finishes it
    waiter.join();
    EXPECT_EQ(seen.load(), 21u);
  }
  std::size_t lost = 0;
  device.kill(0);
  device.kill(1);
  DerefScope scope;
  std::vector<Future<const std::uint64_t*>> futures;
  for (auto& p : v) futures.push_back(p.deref_async(scope));
  const auto started = std::chrono::steady_clock::now();
  for (auto& f : futures) {
    if (!f.valid()) continue;
    try {
      f.get();
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), Errc::peer_failed);
      ++lost;
    }
  }
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(30));
  EXPECT_EQ(lost, 7u);  // v[3] is local since
}
