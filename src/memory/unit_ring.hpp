// UnitRing: the ring of equal registered units behind CircularAllocator and
// LinearCircularAllocator: where units come from (Arena chunks), how the ring
// grows, how a unit is found from a pointer, and when a unit is free again.
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <vector>

#include "rdmx/memory/block.hpp"
#include "rdmx/memory/circular_allocator.hpp"
#include "rdmx/transfer/flush_epoch.hpp"

namespace rdmx::memory::detail {

struct Unit {
  Block block;
  // At most one tag per FlushEpoch, the highest seen: within one epoch a
  // higher tag completes after every lower one.
  // The first kept inline (a unit is nearly always used with one endpoint),
  // the others on the heap.
  transfer::EpochTag first;
  std::vector<transfer::EpochTag> more;
  std::uint32_t untagged = 0;  // handed out and not tagged yet: in use
  std::size_t used = 0;        // bump pointer (linear-circular)

  void add_tag(transfer::EpochTag tag);
  // Free: nothing untagged and every tag completed. Drops completed tags so
  // later checks are cheaper.
  bool free();
  void reset() {
    first = {};
    more.clear();  // keeps capacity: no allocation when the unit comes round again
    untagged = 0;
    used = 0;
  }
};


struct RingOptions {
  std::size_t unit_size;
  std::size_t initial_units;
  std::size_t max_units;
  Growth growth;
  std::size_t alignment;  // of every unit's start
};

class UnitRing {
 public:
  UnitRing(Arena& arena, const RingOptions& options, const char* owner);
  ~UnitRing();
  UnitRing(const UnitRing&) = delete;
  UnitRing& operator=(const UnitRing&) = delete;

  std::size_t size() const noexcept { return order_.size(); }
  Unit& at(std::size_t position) noexcept { return units_[order_[position]]; }
  // Insert one growth step of fresh units at ring `position` (0..size());
  // false when the ring already holds max_units.
  bool grow_at(std::size_t position);
  // The unit whose memory holds p, or nullptr.
  Unit* unit_containing(const std::byte* p) noexcept;

  const RingOptions& options() const noexcept { return options_; }
  const char* owner() const noexcept { return owner_; }

 private:
  struct Chunk {
    Block block;
    std::uint32_t first_unit;
    std::uint32_t count;
  };

  Arena& arena_;
  RingOptions options_;
  const char* owner_;
  std::size_t stride_;
  std::vector<Unit> units_;             // by unit id; ids never change
  std::vector<std::uint32_t> order_;    // ring order of unit ids
  std::map<const std::byte*, Chunk> chunks_;  // by start address
};

}  // namespace rdmx::memory::detail
