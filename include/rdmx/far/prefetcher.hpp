// The stride detector behind far::Array's prefetcher (AIFM's array
// prefetcher, without its thread). Each thread keeps, per array, the chunk
// indices it accessed last: once the same stride (positive or negative,
// any length) has been seen twice in a row, the next chunks along it are
// worth fetching ahead; when the stride breaks, nothing is fetched until a
// new one repeats. Per thread, so two threads scanning one array neither
// confuse each other's pattern nor need a lock.
#pragma once
#include <cstddef>
#include <cstdint>

namespace rdmx::far::detail {

class AccessPattern {
 public:
  static constexpr std::size_t max_depth = 64;
  AccessPattern() noexcept { forget_fetched(); }

  // Chunk `index` (of `count`) is accessed. Fills `ahead` with the chunks
  // to fetch now, so that `depth` chunks along the stride are on their way
  // (topped up once half of them have been used), and returns how many.
  // `hit`: this chunk had been fetched ahead and is used for the first time.
  std::size_t access(std::size_t index, std::size_t count, std::size_t depth, std::size_t* ahead, bool& hit) noexcept;
  // A prefetch of chunk `index` started (access() named it).
  void fetched(std::size_t index) noexcept;

 private:
  static constexpr std::size_t tracked = 2 * max_depth;
  std::int64_t last_ = -1;     // the last chunk accessed; -1: none yet
  std::int64_t stride_ = 0;
  std::size_t repeats_ = 0;    // how many times in a row stride_ was seen
  std::int64_t frontier_ = 0;  // the furthest chunk along the stride named for prefetching
  // Chunks fetched ahead and not used yet, -1 in free entries (a ring: the
  // oldest are forgotten).
  std::int64_t fetched_[tracked];
  std::size_t fetched_next_ = 0;
  void forget_fetched() noexcept;
};

// This thread's pattern for the array numbered `array` (numbers from
// next_array_number() are never reused, so a new array at the address of
// a destroyed one starts afresh). A thread remembers a few arrays.
AccessPattern& access_pattern(std::uint64_t array) noexcept;
std::uint64_t next_array_number() noexcept;

}  // namespace rdmx::far::detail
