// Frame bookkeeping for the cache arena: the arena is cut into slabs as
// large as the largest size class, each slab holds frames of one class, and
// a slab whose last object left is free for any class again. Frames are
// named by their 64-byte unit index in the arena. Not thread-safe: the
// Manager calls it under its lock.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "rdmx/far/config.hpp"

namespace rdmx::far::detail {

class SlabCache {
 public:
  explicit SlabCache(std::size_t bytes);

  // A free frame of `size_class`, taking a free slab when its class has
  // none; `none` when there is neither. Not an std::optional: GCC returned
  // that through the stack in two stores and one load, a stall on every miss.
  static constexpr std::uint32_t none = ~std::uint32_t{0};
  std::uint32_t take(std::uint32_t size_class);
  void release(std::uint32_t frame);

  std::size_t units() const noexcept { return slabs_.size() * units_per_slab; }
  std::size_t resident_bytes() const noexcept { return resident_bytes_; }

  static constexpr std::size_t units_per_slab = slab_bytes / min_object_bytes;

 private:
  struct Slab {
    int size_class = -1;  // -1: free
    std::uint32_t used = 0;
    std::vector<std::uint32_t> free;  // frames of this slab not in use
  };
  std::vector<Slab> slabs_;
  std::vector<std::uint32_t> free_slabs_;
  // Per class: the slabs of that class with a free frame.
  std::array<std::vector<std::uint32_t>, size_classes> partial_;
  std::size_t resident_bytes_ = 0;
};

}  // namespace rdmx::far::detail
