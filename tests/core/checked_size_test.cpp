#include "rdmx/core/checked_size.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "../error_from.hpp"

namespace rdmx {
namespace {

constexpr std::size_t max = SIZE_MAX;

using rdmx::testing::error_from;

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

TEST(CheckedSize, InRangeResultsAreExact) {
  EXPECT_EQ(checked_add(max - 1, 1, "t"), max);
  EXPECT_EQ(checked_add(0, 0, "t"), 0u);
  EXPECT_EQ(checked_mul(max / 8, 8, "t"), max / 8 * 8);
  EXPECT_EQ(checked_mul(0, max, "t"), 0u);
  EXPECT_EQ(checked_round_up(0, 64, "t"), 0u);
  EXPECT_EQ(checked_round_up(1, 64, "t"), 64u);
  EXPECT_EQ(checked_round_up(64, 64, "t"), 64u);
  EXPECT_EQ(checked_round_up(100, 3, "t"), 102u);  // not only powers of two
  EXPECT_EQ(checked_round_up(max - 63, 64, "t"), max - 63);  // already a multiple
}

TEST(CheckedSize, AddOverflowNamesTheOperands) {
  Error e = error_from([] { checked_add(max, 1, "widget"); });
  EXPECT_EQ(e.code(), Errc::out_of_memory);
  EXPECT_TRUE(contains(e.what(), "widget")) << e.what();
  EXPECT_TRUE(contains(e.what(), std::to_string(max))) << e.what();
}

TEST(CheckedSize, MultiplyOverflowNamesTheOperands) {
  Error e = error_from([] { checked_mul(std::size_t{1} << 62, 8, "vector", Errc::invalid_argument); });
  EXPECT_EQ(e.code(), Errc::invalid_argument);
  EXPECT_TRUE(contains(e.what(), std::to_string(std::size_t{1} << 62) + " * 8")) << e.what();
}

TEST(CheckedSize, RoundUpNearTheTopThrowsInsteadOfWrappingToZero) {
  // (n + 63) / 64 * 64 is 0 for these: a 0-byte block for a huge request.
  for (std::size_t n : {max, max - 1, max - 62}) {
    Error e = error_from([n] { checked_round_up(n, 64, "chunk"); });
    EXPECT_EQ(e.code(), Errc::out_of_memory);
    EXPECT_TRUE(contains(e.what(), std::to_string(n))) << e.what();
  }
  EXPECT_EQ(error_from([] { checked_round_up(5, 0, "chunk"); }).code(), Errc::invalid_argument);
}

}  // namespace
}  // namespace rdmx
