#include "slab_cache.hpp"

#include <algorithm>

namespace rdmx::far::detail {

SlabCache::SlabCache(std::size_t bytes) : slabs_(bytes / slab_bytes) {
  for (std::size_t s = slabs_.size(); s-- > 0;) free_slabs_.push_back(static_cast<std::uint32_t>(s));
}

std::uint32_t SlabCache::take(std::uint32_t size_class) {
  auto& partial = partial_[size_class];
  if (partial.empty()) {
    if (free_slabs_.empty()) return none;
    const std::uint32_t s = free_slabs_.back();
    free_slabs_.pop_back();
    Slab& slab = slabs_[s];
    slab.size_class = static_cast<int>(size_class);
    const std::uint32_t stride = static_cast<std::uint32_t>(class_bytes(size_class) / min_object_bytes);
    const std::uint32_t first = static_cast<std::uint32_t>(s * units_per_slab);
    for (std::uint32_t u = static_cast<std::uint32_t>(units_per_slab); u >= stride; u -= stride) slab.free.push_back(first + u - stride);
    partial.push_back(s);
  }
  const std::uint32_t s = partial.back();
  Slab& slab = slabs_[s];
  const std::uint32_t frame = slab.free.back();
  slab.free.pop_back();
  ++slab.used;
  if (slab.free.empty()) partial.pop_back();
  resident_bytes_ += class_bytes(size_class);
  return frame;
}

void SlabCache::release(std::uint32_t frame) {
  const std::uint32_t s = static_cast<std::uint32_t>(frame / units_per_slab);
  Slab& slab = slabs_.at(s);
  const auto size_class = static_cast<std::uint32_t>(slab.size_class);
  auto& partial = partial_[size_class];
  resident_bytes_ -= class_bytes(size_class);
  --slab.used;
  if (slab.used == 0) {
    // Empty: free for any class again.
    if (!slab.free.empty()) partial.erase(std::find(partial.begin(), partial.end(), s));
    slab.free.clear();
    slab.size_class = -1;
    free_slabs_.push_back(s);
    return;
  }
  if (slab.free.empty()) partial.push_back(s);
  slab.free.push_back(frame);
}

}  // namespace rdmx::far::detail
