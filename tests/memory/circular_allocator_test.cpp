#include "rdmx/memory/circular_allocator.hpp"

#include <gtest/gtest.h>

#include <set>
#include <vector>

#include "rdmx/core/error.hpp"
#include "rdmx/memory/region_table.hpp"
#include "support.hpp"

namespace rdmx::memory {
namespace {

using testing::context;
using testing::KiB;
using testing::MiB;
using transfer::EpochTag;
using transfer::FlushEpoch;

class Circular : public ::testing::Test {
 protected:
  Arena arena{context(), testing::small_arena(1 * MiB, 4 * MiB)};

  CircularAllocator ring(std::size_t initial, std::size_t max, Growth growth, std::size_t unit = 1024) {
    return CircularAllocator(arena, {.unit_size = unit, .initial_units = initial, .max_units = max, .growth = growth});
  }
};

constexpr EpochTag done{};  // "used locally, nothing outstanding"

TEST_F(Circular, RotatesInRingOrder) {
  auto alloc = ring(4, 4, Growth::linear);
  std::vector<std::byte*> first;
  for (int i = 0; i < 4; ++i) {
    auto unit = alloc.try_allocate();
    ASSERT_TRUE(unit);
    EXPECT_EQ(unit->size, 1024u);
    first.push_back(unit->data);
    alloc.tag(*unit, done);
  }
  EXPECT_EQ(std::set<std::byte*>(first.begin(), first.end()).size(), 4u);
  for (int round = 0; round < 3; ++round) {
    for (int i = 0; i < 4; ++i) {
      auto unit = alloc.try_allocate();
      ASSERT_TRUE(unit);
      EXPECT_EQ(unit->data, first[i]) << "round " << round << " unit " << i;
      alloc.tag(*unit, done);
    }
  }
  EXPECT_EQ(alloc.units(), 4u);
}

TEST_F(Circular, UnitsAreNamedRegisteredMemory) {
  auto alloc = ring(2, 2, Growth::linear);
  auto unit = alloc.try_allocate();
  ASSERT_TRUE(unit);
  auto where = RegionTable::process().find(unit->data, unit->size);
  ASSERT_TRUE(where);
  EXPECT_EQ(where->region, unit->region);
  EXPECT_EQ(where->offset, unit->offset);
}

TEST_F(Circular, UntaggedUnitIsInUse) {
  auto alloc = ring(2, 2, Growth::linear);
  auto a = alloc.try_allocate();
  auto b = alloc.try_allocate();
  ASSERT_TRUE(a && b);
  EXPECT_FALSE(alloc.try_allocate());  // a is next, and it was never tagged
  alloc.tag(*a, done);
  auto again = alloc.try_allocate();
  ASSERT_TRUE(again);
  EXPECT_EQ(again->data, a->data);
  EXPECT_FALSE(alloc.try_allocate());  // b still untagged, a taken again
}

TEST_F(Circular, FreedWhenTheFlushEpochCompletes) {
  auto alloc = ring(2, 2, Growth::linear);
  FlushEpoch epoch;
  auto a = alloc.try_allocate();
  auto b = alloc.try_allocate();
  ASSERT_TRUE(a && b);
  alloc.tag(*a, {&epoch, epoch.current()});
  alloc.tag(*b, {&epoch, epoch.current()});
  EXPECT_FALSE(alloc.try_allocate());
  const std::uint64_t closed = epoch.close();
  EXPECT_FALSE(alloc.try_allocate());  // closed, flush not complete yet
  epoch.mark_completed(closed);
  auto c = alloc.try_allocate();
  auto d = alloc.try_allocate();
  ASSERT_TRUE(c && d);
  EXPECT_EQ(c->data, a->data);
  EXPECT_EQ(d->data, b->data);
}

TEST_F(Circular, UnitUsedWithTwoEpochsWaitsForBoth) {
  auto alloc = ring(1, 1, Growth::linear);
  FlushEpoch one, two;
  auto a = alloc.try_allocate();
  ASSERT_TRUE(a);
  alloc.tag(*a, {&one, one.current()});
  alloc.tag(*a, {&two, two.current()});
  one.mark_completed(one.close());
  EXPECT_FALSE(alloc.try_allocate());
  two.mark_completed(two.close());
  EXPECT_TRUE(alloc.try_allocate());
}

struct Flusher {
  FlushEpoch* epoch;
  std::uint64_t closed;
  int calls = 0;
  static bool progress(void* self) {
    auto* f = static_cast<Flusher*>(self);
    if (++f->calls == 5) f->epoch->mark_completed(f->closed);
    return true;
  }
};

TEST_F(Circular, AllocateProgressesUntilAUnitFrees) {
  auto alloc = ring(1, 1, Growth::linear);
  FlushEpoch epoch;
  auto a = alloc.try_allocate();
  ASSERT_TRUE(a);
  alloc.tag(*a, {&epoch, epoch.current()});
  Flusher flusher{&epoch, epoch.close()};
  Block b = alloc.allocate(ProgressHook{&Flusher::progress, &flusher});
  EXPECT_EQ(b.data, a->data);
  EXPECT_EQ(flusher.calls, 5);
}

TEST_F(Circular, GrowsLinearlyUpToTheLimit) {
  auto alloc = ring(2, 6, Growth::linear);
  std::set<std::byte*> seen;
  const std::size_t expected_units[] = {2, 2, 4, 4, 6, 6};
  for (std::size_t size : expected_units) {
    auto unit = alloc.try_allocate();  // never tagged: forces growth
    ASSERT_TRUE(unit);
    seen.insert(unit->data);
    EXPECT_EQ(alloc.units(), size);
  }
  EXPECT_EQ(seen.size(), 6u);
  EXPECT_FALSE(alloc.try_allocate());
  EXPECT_EQ(alloc.units(), 6u);
}

TEST_F(Circular, GrowsExponentiallyUpToTheLimit) {
  auto alloc = ring(2, 16, Growth::exponential);
  std::set<std::byte*> seen;
  for (int i = 1; i <= 16; ++i) {
    auto unit = alloc.try_allocate();
    ASSERT_TRUE(unit);
    seen.insert(unit->data);
    const std::size_t expected = i <= 2 ? 2 : i <= 4 ? 4 : i <= 8 ? 8 : 16;
    EXPECT_EQ(alloc.units(), expected) << "after " << i << " units";
  }
  EXPECT_EQ(seen.size(), 16u);
  EXPECT_FALSE(alloc.try_allocate());
}

TEST_F(Circular, LimitReturnsNulloptWithoutGrowing) {
  auto alloc = ring(3, 3, Growth::exponential);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(alloc.try_allocate());
  EXPECT_FALSE(alloc.try_allocate());
  EXPECT_EQ(alloc.units(), 3u);
}

TEST_F(Circular, GrowthInsertsNewUnitsAfterTheCurrentPosition) {
  auto alloc = ring(3, 6, Growth::linear);
  auto a0 = alloc.try_allocate(), a1 = alloc.try_allocate(), a2 = alloc.try_allocate();
  ASSERT_TRUE(a0 && a1 && a2);
  alloc.tag(*a0, done);
  alloc.tag(*a2, done);  // a1 stays busy
  auto x = alloc.try_allocate();
  ASSERT_TRUE(x);
  EXPECT_EQ(x->data, a0->data);
  alloc.tag(*x, done);
  // a1 is next and busy: three new units go here, ahead of it.
  std::set<std::byte*> old{a0->data, a1->data, a2->data};
  std::vector<std::byte*> fresh;
  for (int i = 0; i < 3; ++i) {
    auto n = alloc.try_allocate();
    ASSERT_TRUE(n);
    EXPECT_EQ(old.count(n->data), 0u) << "expected a new unit, got an old one at step " << i;
    fresh.push_back(n->data);
    alloc.tag(*n, done);
  }
  EXPECT_EQ(alloc.units(), 6u);
  // The busy unit comes right after the new ones; at the limit the ring
  // waits for it rather than skipping ahead (ring order is reuse order).
  EXPECT_FALSE(alloc.try_allocate());
  alloc.tag(*a1, done);
  const std::vector<std::byte*> order{a1->data, a2->data, a0->data, fresh[0], fresh[1], fresh[2], a1->data};
  for (std::size_t i = 0; i < order.size(); ++i) {
    auto unit = alloc.try_allocate();
    ASSERT_TRUE(unit);
    EXPECT_EQ(unit->data, order[i]) << "position " << i;
    alloc.tag(*unit, done);
  }
}

TEST_F(Circular, GrowthSpanningSeveralArenaChunks) {
  // 256 KiB units: a 1 MiB segment holds 4, so doubling to 8 needs chunks in two segments.
  auto alloc = ring(2, 8, Growth::exponential, 256 * KiB);
  std::set<std::byte*> seen;
  for (int i = 0; i < 8; ++i) {
    auto unit = alloc.try_allocate();
    ASSERT_TRUE(unit);
    seen.insert(unit->data);
    ASSERT_TRUE(RegionTable::process().find(unit->data, unit->size));
  }
  EXPECT_EQ(seen.size(), 8u);
  EXPECT_GE(arena.segment_count(), 2u);
}

TEST_F(Circular, TagOfAForeignBlockIsInvalidArgument) {
  auto alloc = ring(2, 2, Growth::linear);
  auto a = alloc.try_allocate();
  ASSERT_TRUE(a);
  std::byte local[16];
  EXPECT_THROW(alloc.tag(Block{local, 16, 0, 0}, done), Error);
  EXPECT_THROW(alloc.tag(a->slice(8, 8), done), Error);  // inside a unit, not its start
}

TEST_F(Circular, BadOptionsAreInvalidArgument) {
  auto code = [](auto&& f) {
    try {
      f();
    } catch (const Error& e) {
      return e.code();
    }
    return Errc::transport;
  };
  EXPECT_EQ(code([&] { ring(2, 2, Growth::linear, 0); }), Errc::invalid_argument);
  EXPECT_EQ(code([&] { ring(0, 2, Growth::linear); }), Errc::invalid_argument);
  EXPECT_EQ(code([&] { ring(4, 2, Growth::linear); }), Errc::invalid_argument);
  EXPECT_EQ(code([&] { ring(1, 1, Growth::linear, 2 * MiB); }), Errc::invalid_argument);
}

}  // namespace
}  // namespace rdmx::memory
