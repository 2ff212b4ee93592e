// LargeLanding: the mapping a pointer chunk larger than an arena segment
// lands in, and the one spare a worker keeps for the next such chunk.
#include "../../src/action/large_landing.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "rdmx/core/error.hpp"

namespace {

using rdmx::parcel::LargeLanding;
constexpr std::size_t MiB = std::size_t{1} << 20;
constexpr std::size_t GiB = std::size_t{1} << 30;

TEST(LargeLanding, GivesWritablePageAlignedMemory) {
  LargeLanding landing(GiB);
  auto p = landing.allocate(3 * MiB + 5);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(p.get()) % 4096, 0u);
  std::memset(p.get(), 0x5a, 3 * MiB + 5);
  EXPECT_EQ(p.get()[3 * MiB + 4], std::byte{0x5a});
  EXPECT_EQ(landing.spare_bytes(), 0u);  // in use: nothing spare
}

TEST(LargeLanding, KeepsTheReleasedMappingAndServesTheNextChunkFromIt) {
  LargeLanding landing(GiB);
  std::byte* first = nullptr;
  {
    auto p = landing.allocate(4 * MiB);
    first = p.get();
  }
  EXPECT_EQ(landing.spare_bytes(), 4 * MiB);
  auto q = landing.allocate(2 * MiB);  // fits the spare: reused, already faulted
  EXPECT_EQ(q.get(), first);
  EXPECT_EQ(landing.spare_bytes(), 0u);
}

TEST(LargeLanding, NeverHandsOutASpareThatIsStillHeld) {
  LargeLanding landing(GiB);
  auto held = landing.allocate(2 * MiB);
  std::memset(held.get(), 1, 2 * MiB);
  auto other = landing.allocate(2 * MiB);
  EXPECT_NE(other.get(), held.get());
  std::memset(other.get(), 2, 2 * MiB);
  EXPECT_EQ(held.get()[2 * MiB - 1], std::byte{1});
}

TEST(LargeLanding, KeepsOnlyTheLargerOfTwoReleasedMappings) {
  LargeLanding landing(GiB);
  auto small = landing.allocate(1 * MiB);
  auto large = landing.allocate(8 * MiB);
  std::byte* large_address = large.get();
  large.reset();
  small.reset();  // smaller than the spare: unmapped
  EXPECT_EQ(landing.spare_bytes(), 8 * MiB);
  auto again = landing.allocate(16 * MiB);  // larger than the spare: a new mapping
  EXPECT_NE(again.get(), large_address);
  EXPECT_EQ(landing.spare_bytes(), 8 * MiB);
  again.reset();  // larger: replaces the spare
  EXPECT_EQ(landing.spare_bytes(), 16 * MiB);
}

TEST(LargeLanding, MemoryOutlivesTheLandingThatGaveIt) {
  std::shared_ptr<std::byte> p;
  {
    LargeLanding landing(GiB);
    p = landing.allocate(MiB);
  }
  std::memset(p.get(), 3, MiB);  // still mapped; unmapped when p goes
  EXPECT_EQ(p.get()[MiB - 1], std::byte{3});
}

TEST(LargeLanding, RefusesHostileSizes) {
  LargeLanding landing(GiB);
  EXPECT_THROW(landing.allocate(0), rdmx::Error);
  EXPECT_THROW(landing.allocate(~std::size_t{0}), rdmx::Error);
  try {
    landing.allocate(~std::size_t{0} / 2);  // no such mapping: a clear error, not a crash
    FAIL() << "a mapping of half the address space";
  } catch (const rdmx::Error& e) {
    EXPECT_EQ(e.code(), rdmx::Errc::out_of_memory);
  }
}

TEST(LargeLanding, BoundsTheBytesMappedAtOnce) {
  LargeLanding landing(8 * MiB);
  auto a = landing.allocate(6 * MiB);
  try {
    landing.allocate(4 * MiB);  // 6 + 4 > 8, all of it in use
    FAIL() << "mapped past the limit";
  } catch (const rdmx::Error& e) {
    EXPECT_EQ(e.code(), rdmx::Errc::out_of_memory);
    EXPECT_NE(std::string(e.what()).find("RDMX_ARENA_MAX"), std::string::npos) << e.what();
  }
  std::byte* first = a.get();
  a.reset();  // the spare now: still mapped, still counted
  EXPECT_EQ(landing.mapped_bytes(), 6 * MiB);
  auto b = landing.allocate(4 * MiB);  // served by the spare
  EXPECT_EQ(b.get(), first);
  auto c = landing.allocate(2 * MiB);
  EXPECT_EQ(landing.mapped_bytes(), 8 * MiB);
  EXPECT_THROW(landing.allocate(1), rdmx::Error);
  b.reset();
  c.reset();
  EXPECT_EQ(landing.mapped_bytes(), 6 * MiB);  // the larger one stays as the spare
}

TEST(LargeLanding, GivesUpTheSpareRatherThanRefuseAChunkThatFitsWithoutIt) {
  LargeLanding landing(8 * MiB);
  landing.allocate(6 * MiB).reset();
  EXPECT_EQ(landing.spare_bytes(), 6 * MiB);
  auto b = landing.allocate(7 * MiB);  // too large for the spare, too large beside it
  EXPECT_EQ(landing.spare_bytes(), 0u);
  EXPECT_EQ(landing.mapped_bytes(), 7 * MiB);
  std::memset(b.get(), 1, 7 * MiB);
}

TEST(LargeLanding, RefusesAZeroLimit) { EXPECT_THROW(LargeLanding(0), rdmx::Error); }

}  // namespace
