// CircularAllocator: Seriema 4.2's circular buffer of registered units. It
// subdivides chunks taken from an Arena into equal units and hands them out
// in ring order. A unit comes round again only when the operations that last
// used it have completed: the user tags each unit with the FlushEpoch tag of
// its last operation (Seriema 4.1), and the unit is free once that epoch has
// been flushed; an allocated unit not yet tagged is in use. When the next
// unit is still busy, the ring grows (linearly or by doubling) up to
// max_units, inserting the new units right after the current position so
// that ring order (and so reuse distance) stays FIFO.
//
// Not thread-safe: make one per thread (Seriema makes one per thread, or one
// per thread and endpoint so a slow endpoint cannot hold back units used
// with a fast one). Tags may be completed from any thread.
#pragma once
#include <cstddef>
#include <memory>
#include <optional>
#include <vector>

#include "rdmx/core/future.hpp"
#include "rdmx/memory/block.hpp"
#include "rdmx/transfer/flush_epoch.hpp"

namespace rdmx::memory {

class Arena;
namespace detail {
class UnitRing;
}

enum class Growth {
  linear,       // each growth adds initial_units units
  exponential,  // each growth doubles the ring
};

struct CircularOptions {
  std::size_t unit_size = 64 * 1024;
  std::size_t initial_units = 16;
  std::size_t max_units = 1024;
  Growth growth = Growth::exponential;
};

class CircularAllocator {
 public:
  using Options = CircularOptions;

  // Takes the first initial_units units from `arena` now. The arena must
  // outlive the allocator. Throws Errc::invalid_argument for a zero unit size,
  // zero initial units, max_units < initial_units or a unit larger than a segment.
  CircularAllocator(Arena& arena, Options options);
  ~CircularAllocator();
  CircularAllocator(CircularAllocator&&) noexcept;
  CircularAllocator& operator=(CircularAllocator&&) noexcept;

  // The next unit if it is free, growing the ring if it is not; nullopt once
  // the ring holds max_units and the next unit is still busy.
  std::optional<Block> try_allocate() {
    Block b = next_free();
    if (b) [[likely]]
      return b;
    return try_allocate_slow();
  }
  // Like try_allocate, but calls `progress` (e.g. the worker's progress, which
  // completes flushes) until a unit frees up.
  Block allocate(ProgressHook progress) {
    Block b = next_free();
    if (b) [[likely]]
      return b;
    return allocate_slow(progress);
  }
  // Record the epoch of the last operation that used `unit` (pass the tag read
  // just after issuing it). A unit used with several FlushEpochs may be tagged
  // once per epoch; it is free when all of them are. Tagging with a default
  // EpochTag{} frees it at once (it was only used locally).
  void tag(const Block& unit, transfer::EpochTag tag) {
    // Fast path: the unit just handed out, tagged once, in the bound epoch.
    if (last_ != nullptr && last_->data == unit.data && last_->value == in_use && tag.epoch == bound_) [[likely]] {
      last_->value = tag.value;
      return;
    }
    tag_slow(unit.data, tag);  // only the pointer: the Block can stay in registers
  }

  std::size_t unit_size() const noexcept;
  std::size_t units() const noexcept;  // current ring size
  std::size_t max_units() const noexcept;

 private:
  // What the hot path touches, in ring order. An allocator serves one
  // transmitter (Seriema: one per transmitter and thread), so it binds to the
  // first FlushEpoch it is tagged with, and a slot holds only a tag value in
  // that epoch: free is `value <= bound_->completed()`. A handed-out, untagged
  // unit holds `in_use`, a free one 0. A unit also tagged in another epoch
  // keeps every tag on the ring (slow path), is marked `extra` and holds
  // `tagged_elsewhere`: never free on the fast path, checked on the slow one.
  struct Slot {
    std::byte* data;
    std::uint64_t value;
    std::uint64_t offset;
    std::uint32_t region;
    bool extra;
  };
  static constexpr std::uint64_t in_use = ~std::uint64_t{0};
  static constexpr std::uint64_t tagged_elsewhere = in_use - 1;

  Block next_free() {
    Slot& s = *next_;
    // completed() only grows, so a cached value is conservative: re-read the
    // epoch only when a unit looks busy (keeps a dependent load off the path).
    if (s.value > seen_completed_) [[unlikely]] {
      seen_completed_ = bound_->completed();
      if (s.value > seen_completed_) return {};
    }
    s.value = in_use;
    last_ = &s;
    if (++next_ == end_) next_ = slots_.data();
    return Block{s.data, unit_size_, s.region, s.offset};
  }
  std::optional<Block> try_allocate_slow();
  Block allocate_slow(ProgressHook progress);
  void tag_slow(const std::byte* unit, transfer::EpochTag tag);
  void rebuild();  // slots_ from the ring, after construction or growth
  std::size_t position() const noexcept { return static_cast<std::size_t>(next_ - slots_.data()); }

  std::unique_ptr<detail::UnitRing> ring_;
  std::vector<Slot> slots_;
  // The slot handed out next, a pointer rather than an index: the unit's
  // address is then one load away, which the put that uses it waits for.
  Slot* next_ = nullptr;
  Slot* end_ = nullptr;  // slots_.data() + size_
  std::size_t size_ = 0;
  std::size_t unit_size_ = 0;
  Slot* last_ = nullptr;       // the unit handed out last: what tag() is almost always given
  // Completes nothing: the bound epoch until a real one is seen (then only
  // free units, value 0, can be handed out).
  static inline const transfer::FlushEpoch unbound_{};
  const transfer::FlushEpoch* bound_ = &unbound_;
  std::uint64_t seen_completed_ = 0;  // bound_->completed() as last read
};

}  // namespace rdmx::memory
