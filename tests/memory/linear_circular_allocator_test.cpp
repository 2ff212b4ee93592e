#include "rdmx/memory/linear_circular_allocator.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <set>

#include "rdmx/core/error.hpp"
#include "rdmx/memory/region_table.hpp"
#include "support.hpp"

namespace rdmx::memory {
namespace {

using testing::context;
using testing::MiB;
using transfer::EpochTag;
using transfer::FlushEpoch;

class LinearCircular : public ::testing::Test {
 protected:
  Arena arena{context(), testing::small_arena(1 * MiB, 4 * MiB)};

  LinearCircularAllocator ring(std::size_t initial, std::size_t max, Growth growth = Growth::linear,
                               std::size_t unit = 1024, std::size_t alignment = 16) {
    return LinearCircularAllocator(arena, {.unit_size = unit,
                                           .initial_units = initial,
                                           .max_units = max,
                                           .growth = growth,
                                           .alignment = alignment});
  }
};

constexpr EpochTag done{};

TEST_F(LinearCircular, PacksSegmentsInsideAUnit) {
  auto alloc = ring(2, 2);
  auto a = alloc.try_allocate(100);
  auto b = alloc.try_allocate(200);
  auto c = alloc.try_allocate(16);
  ASSERT_TRUE(a && b && c);
  EXPECT_EQ(a->size, 100u);
  EXPECT_EQ(b->data, a->data + 112);  // 100 rounded up to the 16-byte alignment
  EXPECT_EQ(c->data, b->data + 208);
  EXPECT_EQ(c->region, a->region);
  EXPECT_EQ(c->offset, a->offset + 112 + 208);
  for (auto* s : {&*a, &*b, &*c}) EXPECT_EQ(reinterpret_cast<std::uintptr_t>(s->data) % 16, 0u);
  auto where = RegionTable::process().find(b->data, b->size);
  ASSERT_TRUE(where);
  EXPECT_EQ(where->offset, b->offset);
}

TEST_F(LinearCircular, MovesToTheNextUnitWhenFull) {
  auto alloc = ring(2, 2);
  auto a = alloc.try_allocate(600);
  auto b = alloc.try_allocate(600);  // does not fit behind a
  ASSERT_TRUE(a && b);
  EXPECT_EQ(b->data, a->data + 1024);  // start of the next unit (both from one chunk)
  auto c = alloc.try_allocate(416);    // 600 aligned up to 608, + 416 fills b's unit exactly
  ASSERT_TRUE(c);
  EXPECT_EQ(c->data, b->data + 608);
  EXPECT_EQ(alloc.units(), 2u);
}

TEST_F(LinearCircular, OversizeAndEmptyRequestsAreInvalidArgument) {
  auto alloc = ring(1, 1);
  try {
    alloc.try_allocate(1025);
    FAIL() << "a segment larger than a unit was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::invalid_argument);
  }
  EXPECT_THROW(alloc.try_allocate(0), Error);
  EXPECT_TRUE(alloc.try_allocate(1024));  // exactly one unit is fine
}

TEST_F(LinearCircular, UnitIsReusedOnlyWhenAllItsSegmentsAreTaggedAndFlushed) {
  auto alloc = ring(1, 1);
  FlushEpoch epoch;
  auto s1 = alloc.try_allocate(512);
  auto s2 = alloc.try_allocate(512);
  ASSERT_TRUE(s1 && s2);
  alloc.tag(*s1, {&epoch, epoch.current()});
  EXPECT_FALSE(alloc.try_allocate(512));  // s2 not tagged yet
  alloc.tag(*s2, {&epoch, epoch.current()});
  EXPECT_FALSE(alloc.try_allocate(512));  // tagged, flush not done
  epoch.mark_completed(epoch.close());
  auto s3 = alloc.try_allocate(512);
  ASSERT_TRUE(s3);
  EXPECT_EQ(s3->data, s1->data);
}

TEST_F(LinearCircular, KeepsTheHighestTagOfAnEpoch) {
  auto alloc = ring(1, 1);
  FlushEpoch epoch;
  const std::uint64_t early = epoch.close();
  const std::uint64_t late = epoch.current();
  auto s1 = alloc.try_allocate(512);
  auto s2 = alloc.try_allocate(512);
  ASSERT_TRUE(s1 && s2);
  alloc.tag(*s1, {&epoch, late});
  alloc.tag(*s2, {&epoch, early});  // a lower tag must not hide the higher one
  epoch.mark_completed(early);
  EXPECT_FALSE(alloc.try_allocate(512));
  epoch.mark_completed(epoch.close());
  EXPECT_TRUE(alloc.try_allocate(512));
}

TEST_F(LinearCircular, GrowsAndStopsAtTheLimit) {
  auto alloc = ring(1, 4, Growth::exponential);
  std::set<std::byte*> units;
  const std::size_t expected_units[] = {1, 2, 4, 4};
  for (std::size_t expected : expected_units) {
    auto s = alloc.try_allocate(1024);  // a whole unit, never tagged
    ASSERT_TRUE(s);
    units.insert(s->data);
    EXPECT_EQ(alloc.units(), expected);
  }
  EXPECT_EQ(units.size(), 4u);
  EXPECT_FALSE(alloc.try_allocate(1));

  auto linear = ring(2, 5, Growth::linear);
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(linear.try_allocate(1024)) << i;
  EXPECT_EQ(linear.units(), 5u);  // 2, 4, then capped at 5
  EXPECT_FALSE(linear.try_allocate(1024));
}

// The unit stride used to round SIZE_MAX up to 0, pass the segment check
// and divide by zero when the ring first grew.
TEST_F(LinearCircular, UnitSizeNearTheTopIsInvalidArgument) {
  for (std::size_t unit : {SIZE_MAX, SIZE_MAX - 63}) {
    try {
      ring(1, 2, Growth::linear, unit);
      ADD_FAILURE() << "unit size " << unit << " accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), Errc::invalid_argument) << e.what();
    }
  }
}

TEST_F(LinearCircular, DoubleTagAndForeignBlockAreInvalidArgument) {
  auto alloc = ring(1, 1);
  auto s = alloc.try_allocate(100);
  ASSERT_TRUE(s);
  alloc.tag(*s, done);
  EXPECT_THROW(alloc.tag(*s, done), Error);
  std::byte local[8];
  EXPECT_THROW(alloc.tag(Block{local, 8, 0, 0}, done), Error);
}

struct Flusher {
  FlushEpoch* epoch;
  std::uint64_t closed;
  int calls = 0;
  static bool progress(void* self) {
    auto* f = static_cast<Flusher*>(self);
    if (++f->calls == 3) f->epoch->mark_completed(f->closed);
    return true;
  }
};

TEST_F(LinearCircular, AllocateProgressesUntilAUnitFrees) {
  auto alloc = ring(1, 1);
  FlushEpoch epoch;
  auto s = alloc.try_allocate(1000);
  ASSERT_TRUE(s);
  alloc.tag(*s, {&epoch, epoch.current()});
  Flusher flusher{&epoch, epoch.close()};
  Block b = alloc.allocate(100, ProgressHook{&Flusher::progress, &flusher});
  EXPECT_EQ(b.data, s->data);
  EXPECT_EQ(flusher.calls, 3);
}

}  // namespace
}  // namespace rdmx::memory
