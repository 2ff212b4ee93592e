// Eviction whose write-backs travel without the manager's lock: other
// threads hit, miss and evict while one waits on the network, a handler
// run during a write-back may dereference far memory (even the object on
// its way out), and a failed write-back leaves every object intact.
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <future>
#include <mutex>
#include <random>
#include <thread>

#include "../error_from.hpp"
#include "rdmx/far/pointer.hpp"
#include "shadow.hpp"

using namespace rdmx;
using namespace rdmx::far;

namespace {

Config small_cache(std::size_t cache) {
  Config c;
  c.cache_bytes = cache;
  c.region_bytes = 8 << 20;
  return c;
}

// The in-process device with a hook in every write-back (a slow network,
// or a call handler that progress runs while the write waits).
class HookedDevice final : public Device {
 public:
  explicit HookedDevice(std::function<void()> on_write) : inner_(make_local_device(1, 8 << 20)), on_write_(std::move(on_write)) {}
  const char* name() const noexcept override { return "hooked"; }
  std::size_t servers() const noexcept override { return inner_->servers(); }
  std::uint64_t region_bytes(std::size_t server) const override { return inner_->region_bytes(server); }
  std::uint32_t rank_of(std::size_t server) const override { return inner_->rank_of(server); }
  void read(std::size_t server, std::uint64_t offset, void* local, std::size_t bytes) override {
    inner_->read(server, offset, local, bytes);
  }
  void write(std::size_t server, std::uint64_t offset, const void* local, std::size_t bytes) override {
    inner_->write(server, offset, local, bytes);  // the transfer's reads of the slot
    if (on_write_) on_write_();                   // then its wait
  }
  void compute(std::size_t server, const Offload& work) override { inner_->compute(server, work); }
  bool computes() const noexcept override { return inner_->computes(); }

 private:
  std::unique_ptr<Device> inner_;
  std::function<void()> on_write_;
};

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
  constexpr int objects = 256;  // 256 KiB of data, 64 KiB of cache
  std::vector<UniquePtr<Obj>> v;
  std::vector<std::uint64_t> version(objects, 0);
  std::vector<std::mutex> locks(objects);
  for (int i = 0; i < objects; ++i) v.push_back(make_unique<Obj>(Obj::of(0)));
  std::vector<std::thread> threads;
  std::atomic<int> bad{0};
  std::atomic<std::size_t> checked{0};
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      std::mt19937 rng(t);
      for (int op = 0; op < 1500; ++op) {
        const int i = static_cast<int>(rng() % objects);
        std::lock_guard lock(locks[i]);
        DerefScope scope;
        if (rng() % 2 == 0) {
          if (!v[i].deref(scope)->is(version[i])) ++bad;
          *v[i].deref_mut(scope) = Obj::of(++version[i]);
        } else if (!v[i].deref(scope)->is(version[i])) {
          ++bad;
        }
        ++checked;
      }
    });
  for (auto& t : threads) t.join();
  for (int i = 0; i < objects; ++i) {
    DerefScope scope;
    if (!v[i].deref(scope)->is(version[i])) ++bad;
  }
  EXPECT_EQ(bad.load(), 0);
  EXPECT_EQ(checked.load(), 4 * 1500u);
  EXPECT_GT(manager.stats().write_backs, 100u);
  EXPECT_LE(manager.stats().peak_resident_bytes, manager.stats().cache_bytes);
  // Write-backs overlapped: none of them held the lock while it waited.
  EXPECT_GT(most_in_flight.load(), 1);
}

// While one thread's write-back waits on the network, another thread
// misses (it needs the lock to take a slot), and a handler run inline by
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
// waits for it to land, then frees it: no error, and its block and slot
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
// needed the slot, and leaves every object local, dirty and intact.
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
