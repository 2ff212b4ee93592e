// LinearCircularAllocator: Seriema 4.2's linear-circular allocator. It is a
// CircularAllocator whose units are filled with variable-size segments by a
// bump pointer, so small buffers of mixed sizes waste no unit space. When
// the current unit is full it moves to the next unit in ring order, which it
// may reuse only once every segment handed out from it has been tagged and
// the highest tag per FlushEpoch has completed (tags from one FlushEpoch grow
// monotonically, so the highest one covers all earlier segments). Growth and
// the max_units limit work as in CircularAllocator.
//
// Not thread-safe: one per thread. Tags may be completed from any thread.
#pragma once
#include <cstddef>
#include <memory>
#include <optional>

#include "rdmx/core/future.hpp"
#include "rdmx/memory/block.hpp"
#include "rdmx/memory/circular_allocator.hpp"
#include "rdmx/transfer/flush_epoch.hpp"

namespace rdmx::memory {

struct LinearCircularOptions {
  std::size_t unit_size = 64 * 1024;
  std::size_t initial_units = 16;
  std::size_t max_units = 1024;
  Growth growth = Growth::exponential;
  std::size_t alignment = 16;  // every segment starts on this boundary (power of two)
};

class LinearCircularAllocator {
 public:
  using Options = LinearCircularOptions;

  LinearCircularAllocator(Arena& arena, Options options);
  ~LinearCircularAllocator();
  LinearCircularAllocator(LinearCircularAllocator&&) noexcept;
  LinearCircularAllocator& operator=(LinearCircularAllocator&&) noexcept;

  // A segment of n bytes (0 < n <= unit size, else Errc::invalid_argument),
  // or nullopt when the ring is at max_units and the next unit is busy.
  std::optional<Block> try_allocate(std::size_t n);
  // Calls `progress` until a segment can be had.
  Block allocate(std::size_t n, ProgressHook progress);
  // Every segment must be tagged exactly once, after its last operation (a
  // default EpochTag{} means "done, nothing outstanding"). Tagging a segment
  // twice, or one not from this allocator, is Errc::invalid_argument where
  // detectable.
  void tag(const Block& segment, transfer::EpochTag tag);

  std::size_t unit_size() const noexcept;
  std::size_t units() const noexcept;
  std::size_t max_units() const noexcept;

 private:
  std::unique_ptr<detail::UnitRing> ring_;
  std::size_t current_ = 0;  // ring position of the unit being filled
  std::size_t alignment_ = 16;
};

}  // namespace rdmx::memory
