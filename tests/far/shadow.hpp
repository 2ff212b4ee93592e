// Random far-object operations checked against a shadow copy in ordinary
// memory: every value read must be the last one written.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <random>
#include <span>
#include <thread>
#include <vector>

#include "rdmx/far/pointer.hpp"

namespace rdmx::far::shadow {

// A far object with a checkable pattern: every word derives from `seed`.
template <std::size_t Bytes>
struct Pattern {
  std::array<std::uint64_t, Bytes / 8> words;
  static Pattern of(std::uint64_t seed) {
    Pattern p;
    for (std::size_t i = 0; i < p.words.size(); ++i) p.words[i] = seed * 0x9E3779B97F4A7C15ull + i;
    return p;
  }
  bool is(std::uint64_t seed) const { return *this == of(seed); }
  friend bool operator==(const Pattern&, const Pattern&) = default;
};

// `count` objects of each of two sizes, `ops` random reads, writes,
// non-temporal reads, explicit evictions, batches and nested scopes;
// returns the number of values checked. Every object dereferenced must lie
// in `manager`'s cache.
inline std::size_t random_operations(const Manager& manager, std::size_t count, std::size_t ops, std::uint64_t seed) {
  using Small = Pattern<64>;
  using Large = Pattern<4096>;
  std::mt19937_64 rng(seed);
  std::vector<UniquePtr<Small>> small;
  std::vector<UniquePtr<Large>> large;
  std::vector<std::uint64_t> small_shadow, large_shadow;
  for (std::size_t i = 0; i < count; ++i) {
    small_shadow.push_back(rng());
    small.push_back(make_unique<Small>(Small::of(small_shadow.back())));
    large_shadow.push_back(rng());
    large.push_back(make_unique<Large>(Large::of(large_shadow.back())));
  }
  std::size_t checked = 0;
  for (std::size_t op = 0; op < ops; ++op) {
    const std::size_t i = rng() % count, j = rng() % count;
    DerefScope outer;
    switch (rng() % 6) {
      case 0: {  // read both sizes in one scope
        const Small* s = small[i].deref(outer);
        const Large* l = large[j].deref(outer);
        EXPECT_TRUE(manager.in_cache(s) && manager.in_cache(l));
        EXPECT_TRUE(s->is(small_shadow[i])) << "small object " << i;
        EXPECT_TRUE(l->is(large_shadow[j])) << "large object " << j;
        checked += 2;
        break;
      }
      case 1: {  // write
        small_shadow[i] = rng();
        *small[i].deref_mut(outer) = Small::of(small_shadow[i]);
        large_shadow[j] = rng();
        *large[j].deref_mut(outer) = Large::of(large_shadow[j]);
        break;
      }
      case 2: {  // nested scopes: the outer object stays pinned and valid
        const Small* s = small[i].deref(outer);
        for (int k = 0; k < 8; ++k) {
          DerefScope inner;
          const std::size_t x = rng() % count;
          EXPECT_TRUE(large[x].deref_nt(inner)->is(large_shadow[x]));
          ++checked;
        }
        EXPECT_TRUE(s->is(small_shadow[i]));
        ++checked;
        break;
      }
      case 3: {  // forced eviction, then read back
        large[j].evict();
        EXPECT_FALSE(large[j].is_local());
        EXPECT_TRUE(large[j].deref(outer)->is(large_shadow[j]));
        ++checked;
        break;
      }
      case 4: {  // a batch: misses in flight together
        const std::size_t first = std::min(i, count - std::min<std::size_t>(count, 8));
        const std::size_t n = std::min<std::size_t>(count, 8);
        auto objects = deref_all(outer, std::span<const UniquePtr<Large>>(large.data() + first, n));
        for (std::size_t k = 0; k < n; ++k) EXPECT_TRUE(objects[k]->is(large_shadow[first + k])) << "large object " << first + k;
        checked += n;
        break;
      }
      default: {  // replace an object: free and allocate
        small_shadow[i] = rng();
        small[i] = make_unique<Small>(Small::of(small_shadow[i]));
        break;
      }
    }
  }
  for (std::size_t i = 0; i < count; ++i) {
    DerefScope scope;
    EXPECT_TRUE(small[i].deref(scope)->is(small_shadow[i]));
    EXPECT_TRUE(large[i].deref(scope)->is(large_shadow[i]));
    checked += 2;
  }
  return checked;
}

// Threads sharing objects: `objects` objects of `Bytes`, each ordered by
// its own mutex (as the program must order any data it shares), and
// `threads` threads making `ops` random accesses each. Every access checks
// the value against the object's version; one in `write_one_in` then writes
// the next version. `think`: work between accesses, during which the thread
// holds no scope. Eviction runs wherever it runs, holding none of those
// mutexes.
struct SharedRun {
  std::size_t wrong = 0;    // values that were not the last one written
  std::size_t checked = 0;
};
template <std::size_t Bytes>
SharedRun shared_objects(int objects, int threads, int ops, int write_one_in, std::chrono::microseconds think = {}) {
  using Obj = Pattern<Bytes>;
  std::vector<UniquePtr<Obj>> v;
  std::vector<std::uint64_t> version(objects, 0);
  std::vector<std::mutex> locks(objects);
  for (int i = 0; i < objects; ++i) v.push_back(make_unique<Obj>(Obj::of(0)));
  std::atomic<std::size_t> wrong{0}, checked{0};
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t)
    workers.emplace_back([&, t] {
      std::mt19937 rng(t);
      for (int op = 0; op < ops; ++op) {
        const int i = static_cast<int>(rng() % objects);
        {
          std::lock_guard lock(locks[i]);
          DerefScope scope;
          if (!v[i].deref(scope)->is(version[i])) ++wrong;
          if (rng() % write_one_in == 0) *v[i].deref_mut(scope) = Obj::of(++version[i]);
          ++checked;
        }
        if (think.count() > 0) std::this_thread::sleep_for(think);
      }
    });
  for (auto& w : workers) w.join();
  for (int i = 0; i < objects; ++i) {
    DerefScope scope;
    if (!v[i].deref(scope)->is(version[i])) ++wrong;
    ++checked;
  }
  return {wrong.load(), checked.load()};
}

}  // namespace rdmx::far::shadow
