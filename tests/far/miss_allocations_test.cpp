// A dereference that misses allocates nothing once warm, on either path:
// not for the scope that pins the object, nor for the name of the server
// an error would carry, nor for the get's completion. Over shared memory a
// one-sided miss costs a few hundred nanoseconds, and each malloc/free pair
// is a sizable part of that (docs/results/far.md). Asserted is "none per
// miss": fewer than one in a hundred misses, and the first allocation's
// stack is printed either way.
#include <gtest/gtest.h>

#include <cstdio>
#include <span>
#include <vector>

#include "../counted_allocations.hpp"
#include "rdmx/fabric/job.hpp"
#include "rdmx/far/pointer.hpp"

using namespace rdmx;
using namespace rdmx::far;
using namespace rdmx::testing;

namespace {

struct Object {
  unsigned char bytes[64];
};

constexpr std::size_t cache_bytes = 64 * 1024;

// Dereferences `misses` objects from `cursor` on, each in a scope of its
// own, counting this thread's allocations; returns how many objects read wrong.
std::size_t sweep(std::vector<UniquePtr<Object>>& set, std::size_t& cursor, std::size_t misses, bool write) {
  std::size_t wrong = 0;
  counting = true;
  for (std::size_t i = 0; i < misses; ++i, cursor = (cursor + 1) % set.size()) {
    DerefScope scope;
    if (write) {
      Object* o = set[cursor].deref_mut(scope);
      wrong += o->bytes[0] != static_cast<unsigned char>(cursor);
      o->bytes[63] = static_cast<unsigned char>(cursor);
    } else {
      wrong += set[cursor].deref(scope)->bytes[0] != static_cast<unsigned char>(cursor);
    }
  }
  counting = false;
  return wrong;
}

void cold_misses(Path path) {
  Job& job = Job::current();
  Config config;
  config.cache_bytes = cache_bytes;
  config.region_bytes = 8 << 20;
  config.path = path;
  // Every miss below evicts exactly one victim, on this thread: counts of
  // misses and write-backs are exact only without the background evacuator.
  config.evacuator = Evacuator::off;
  Manager manager(job, config);
  if (manager.serving()) return;  // serve until the client is done (the destructor's barrier)
  // Twice the cache, swept in order: CLOCK has always just evicted the
  // object asked for next, so every dereference misses. (Small: over TCP,
  // on a loaded machine, a miss can wait milliseconds for the server.)
  std::vector<UniquePtr<Object>> set;
  for (std::size_t i = 0; i < 2 * cache_bytes / sizeof(Object); ++i) {
    Object o{};
    o.bytes[0] = static_cast<unsigned char>(i);
    set.push_back(make_unique<Object>(o));
  }
  std::size_t cursor = 0;
  // Warm: every object written back once, the slabs carved, the transport's endpoints up.
  ASSERT_EQ(sweep(set, cursor, set.size(), false), 0u);
  allocations = 0;

  constexpr std::size_t misses = 2000;
  const Stats before = manager.stats();
  EXPECT_EQ(sweep(set, cursor, misses, false), 0u);
  const Stats after_reads = manager.stats();
  EXPECT_EQ(after_reads.misses - before.misses, misses);
  expect_none_per(misses, "cold reads");
  allocations = 0;

  // Writes: from the second sweep on, every victim is dirty and written back.
  ASSERT_EQ(sweep(set, cursor, set.size(), true), 0u);
  allocations = 0;
  const Stats before_writes = manager.stats();
  EXPECT_EQ(sweep(set, cursor, misses, true), 0u);
  const Stats after = manager.stats();
  EXPECT_EQ(after.misses - before_writes.misses, misses);
  EXPECT_EQ(after.write_backs - before_writes.write_backs, misses);
  expect_none_per(misses, "cold writes with dirty victims");

  // Batches of 16 misses in flight (deref_all): the batch's own state
  // allocates, about a dozen times a batch, but its misses do not (before,
  // one-sided: a future each, two allocations per miss).
  ASSERT_EQ(sweep(set, cursor, set.size(), false), 0u);  // clean victims again
  constexpr std::size_t batch = 16, batches = 100;
  allocations = 0;
  std::size_t wrong = 0;
  counting = true;
  for (std::size_t b = 0; b < batches; ++b) {
    if (cursor + batch > set.size()) cursor = 0;
    DerefScope scope;
    const auto objects = deref_all(scope, std::span<const UniquePtr<Object>>(set.data() + cursor, batch));
    for (std::size_t i = 0; i < batch; ++i) wrong += objects[i]->bytes[0] != static_cast<unsigned char>(cursor + i);
    cursor += batch;
  }
  counting = false;
  EXPECT_EQ(wrong, 0u);
  std::fprintf(stderr, "%zu heap allocations during %zu batches of %zu misses\n", allocations, batches, batch);
  EXPECT_LT(allocations, batches * batch) << "the misses of a batch allocate";
}

}  // namespace

TEST(FarMissAllocations, OneSided) { cold_misses(Path::one_sided); }
TEST(FarMissAllocations, TwoSided) { cold_misses(Path::two_sided); }
