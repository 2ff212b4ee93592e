#include "rdmx/far/prefetcher.hpp"

#include <algorithm>
#include <array>
#include <atomic>

namespace rdmx::far::detail {

std::size_t AccessPattern::access(std::size_t index, std::size_t count, std::size_t depth, std::size_t* ahead, bool& hit) noexcept {
  hit = false;
  const auto c = static_cast<std::int64_t>(index);
  if (c == last_) return 0;  // another element of the same chunk
  for (std::int64_t& f : fetched_)
    if (f == c) {
      hit = true;
      f = -1;
      break;
    }
  const bool first = last_ < 0;
  const std::int64_t stride = c - last_;
  last_ = c;
  if (first) return 0;
  if (stride == stride_) {
    ++repeats_;
  } else {
    // A new pattern: what was fetched along the old one is no longer expected.
    stride_ = stride;
    repeats_ = 1;
    frontier_ = c;
    forget_fetched();
  }
  depth = std::min(depth, max_depth);
  if (repeats_ < 2 || depth == 0) return 0;
  // How many chunks ahead of this one are already on their way.
  std::int64_t in_front = (frontier_ - c) / stride_;
  if (in_front < 0) {
    frontier_ = c;
    in_front = 0;
  }
  if (static_cast<std::size_t>(in_front) > depth / 2) return 0;
  std::size_t n = 0;
  for (std::int64_t next = frontier_ + stride_; in_front + static_cast<std::int64_t>(n) < static_cast<std::int64_t>(depth); next += stride_) {
    if (next < 0 || next >= static_cast<std::int64_t>(count)) break;
    ahead[n++] = static_cast<std::size_t>(next);
    frontier_ = next;  // named once, whether or not it can be fetched
  }
  return n;
}

void AccessPattern::fetched(std::size_t index) noexcept {
  fetched_[fetched_next_] = static_cast<std::int64_t>(index);
  fetched_next_ = (fetched_next_ + 1) % tracked;
}

void AccessPattern::forget_fetched() noexcept {
  std::fill(std::begin(fetched_), std::end(fetched_), -1);
  fetched_next_ = 0;
}

namespace {
struct Remembered {
  std::uint64_t array = 0;  // 0: unused
  AccessPattern pattern;
};
constexpr std::size_t remembered_arrays = 8;
thread_local std::array<Remembered, remembered_arrays> remembered;
thread_local std::size_t replace_next = 0;
std::atomic<std::uint64_t> array_numbers{0};
}  // namespace

AccessPattern& access_pattern(std::uint64_t array) noexcept {
  for (Remembered& r : remembered)
    if (r.array == array) return r.pattern;
  Remembered& r = remembered[replace_next];
  replace_next = (replace_next + 1) % remembered_arrays;
  r.array = array;
  r.pattern = AccessPattern{};
  return r.pattern;
}

std::uint64_t next_array_number() noexcept { return array_numbers.fetch_add(1, std::memory_order_relaxed) + 1; }

}  // namespace rdmx::far::detail
