#include "rdmx/memory/region_table.hpp"

#include <string>

#include "rdmx/core/error.hpp"
#include "rdmx/transfer/memory_region.hpp"

namespace rdmx::memory {

RegionTable& RegionTable::process() {
  // Never destroyed: arenas living in other statics remove their regions
  // during exit, possibly after this function's statics would have gone.
  union NeverDestroyed {
    RegionTable table;
    NeverDestroyed() : table(default_capacity) {}
    ~NeverDestroyed() {}
  };
  static NeverDestroyed holder;
  return holder.table;
}

RegionTable::RegionTable(std::size_t capacity)
    : capacity_(capacity < 2 ? 2 : capacity),
      slots_(std::make_unique<std::atomic<const transfer::MemoryRegion*>[]>(capacity_)) {
  for (std::size_t i = 0; i < capacity_; ++i) slots_[i].store(nullptr, std::memory_order_relaxed);
}

RegionTable::~RegionTable() = default;

std::uint32_t RegionTable::add(const transfer::MemoryRegion& region) {
  std::lock_guard lock(add_mutex_);
  const std::size_t index = end_.load(std::memory_order_relaxed);
  if (index >= capacity_)
    throw Error(Errc::out_of_memory,
                "region table full: " + std::to_string(capacity_ - 1) +
                    " regions registered in this process. Regions are meant to be large arena segments; "
                    "raise RDMX_ARENA_SEGMENT so fewer are needed, or reuse arenas instead of creating new ones");
  // Publish the slot before the end marker so a reader that sees the new end
  // also sees the region.
  slots_[index].store(&region, std::memory_order_release);
  end_.store(index + 1, std::memory_order_release);
  return static_cast<std::uint32_t>(index);
}

const transfer::MemoryRegion* RegionTable::get(std::uint32_t index) const noexcept {
  if (index == no_region || index >= capacity_) return nullptr;
  return slots_[index].load(std::memory_order_acquire);
}

std::optional<RegionTable::Location> RegionTable::find(const void* p, std::size_t n) const noexcept {
  // A linear scan: the table holds a few large segments per arena, and this
  // is used when naming memory (once per buffer), not per transfer.
  const std::size_t end = end_.load(std::memory_order_acquire);
  for (std::size_t i = 1; i < end; ++i) {
    const transfer::MemoryRegion* region = slots_[i].load(std::memory_order_acquire);
    if (region != nullptr && region->contains(p, n))
      return Location{static_cast<std::uint32_t>(i),
                      static_cast<std::uint64_t>(static_cast<const std::byte*>(p) - region->data())};
  }
  return std::nullopt;
}

void RegionTable::remove(std::uint32_t index) noexcept {
  if (index == no_region || index >= capacity_) return;
  slots_[index].store(nullptr, std::memory_order_release);
}

}  // namespace rdmx::memory
