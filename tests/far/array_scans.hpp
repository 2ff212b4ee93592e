// Element-by-element scans of a far::Array through at / at_mut, checked
// against a shadow copy, for the prefetcher's tests (in-process and jobs).
#pragma once
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

#include "rdmx/far/array.hpp"

namespace rdmx::far::scans {

using Elements = Array<std::uint64_t>;
constexpr std::size_t per_chunk = Elements::per_chunk;

inline std::uint64_t value_of(std::size_t i) { return i * 0x9E3779B97F4A7C15ull + 1; }

// A scan visits chunks first, first + stride, ... (stride may be negative)
// while they exist; in each chunk it reads three elements (first, middle,
// last), each in a scope of its own, and every fourth chunk it also
// rewrites one. Every value is checked against `shadow`; returns the
// number of chunks visited.
inline std::size_t strided_scan(Elements& a, std::vector<std::uint64_t>& shadow, std::size_t first, std::int64_t stride,
                                std::uint64_t salt) {
  const auto chunks = static_cast<std::int64_t>((a.size() + per_chunk - 1) / per_chunk);
  std::size_t visited = 0;
  for (std::int64_t c = static_cast<std::int64_t>(first); c >= 0 && c < chunks; c += stride, ++visited) {
    const std::size_t base = static_cast<std::size_t>(c) * per_chunk;
    const std::size_t last = std::min(a.size(), base + per_chunk) - 1;
    for (std::size_t i : {base, (base + last) / 2, last}) {
      DerefScope scope;
      EXPECT_EQ(a.at(scope, i), shadow[i]) << "element " << i << " (stride " << stride << ")";
    }
    if (visited % 4 == 0) {
      const std::size_t i = base + (salt + visited) % (last - base + 1);
      DerefScope scope;
      a.at_mut(scope, i) = shadow[i] = value_of(i) ^ salt ^ visited;
    }
  }
  return visited;
}

// Random element reads (no stride repeats for long): returns how many.
inline std::size_t random_reads(const Elements& a, const std::vector<std::uint64_t>& shadow, std::size_t count, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  for (std::size_t k = 0; k < count; ++k) {
    const std::size_t i = rng() % a.size();
    DerefScope scope;
    EXPECT_EQ(a.at(scope, i), shadow[i]) << "element " << i;
  }
  return count;
}

inline void fill(Elements& a, std::vector<std::uint64_t>& shadow) {
  shadow.resize(a.size());
  a.for_each_mut([&](std::size_t i, std::uint64_t& x) { x = shadow[i] = value_of(i); });
}

inline void check_all(const Elements& a, const std::vector<std::uint64_t>& shadow) {
  std::size_t wrong = 0;
  a.for_each([&](std::size_t i, const std::uint64_t& x) { wrong += x != shadow[i]; });
  EXPECT_EQ(wrong, 0u);
}

}  // namespace rdmx::far::scans
