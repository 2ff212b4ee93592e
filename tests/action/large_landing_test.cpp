// LargeLanding: the mapping a pointer chunk larger than an arena segment
// lands in, and the one spare a worker keeps for the next such chunk.
#include "../../src/action/large_landing.hpp"

#include <gtest/gtest.h>

#include <cstring>

#include "rdmx/core/error.hpp"

namespace {

using rdmx::parcel::LargeLanding;
constexpr std::size_t MiB = std::size_t{1} << 20;

TEST(LargeLanding, GivesWritablePageAlignedMemory) {
  LargeLanding landing;
  auto p = landing.allocate(3 * MiB + 5);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(p.get()) % 4096, 0u);
  std::memset(p.get(), 0x5a, 3 * MiB + 5);
  EXPECT_EQ(p.get()[3 * MiB + 4], std::byte{0x5a});
  EXPECT_EQ(landing.spare_bytes(), 0u);  // in use: nothing spare
}

TEST(LargeLanding, KeepsTheReleasedMappingAndServesTheNextChunkFromIt) {
  LargeLanding landing;
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
  LargeLanding landing;
  auto held = landing.allocate(2 * MiB);
  std::memset(held.get(), 1, 2 * MiB);
  auto other = landing.allocate(2 * MiB);
  EXPECT_NE(other.get(), held.get());
  std::memset(other.get(), 2, 2 * MiB);
  EXPECT_EQ(held.get()[2 * MiB - 1], std::byte{1});
}

TEST(LargeLanding, KeepsOnlyTheLargerOfTwoReleasedMappings) {
  LargeLanding landing;
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
    LargeLanding landing;
    p = landing.allocate(MiB);
  }
  std::memset(p.get(), 3, MiB);  // still mapped; unmapped when p goes
  EXPECT_EQ(p.get()[MiB - 1], std::byte{3});
}

TEST(LargeLanding, RefusesHostileSizes) {
  LargeLanding landing;
  EXPECT_THROW(landing.allocate(0), rdmx::Error);
  EXPECT_THROW(landing.allocate(~std::size_t{0}), rdmx::Error);
  try {
    landing.allocate(~std::size_t{0} / 2);  // no such mapping: a clear error, not a crash
    FAIL() << "a mapping of half the address space";
  } catch (const rdmx::Error& e) {
    EXPECT_EQ(e.code(), rdmx::Errc::out_of_memory);
  }
}

}  // namespace
