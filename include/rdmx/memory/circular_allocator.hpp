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
  std::optional<Block> try_allocate();
  // Like try_allocate, but calls `progress` (e.g. the worker's progress, which
  // completes flushes) until a unit frees up.
  Block allocate(ProgressHook progress);
  // Record the epoch of the last operation that used `unit` (pass the tag read
  // just after issuing it). A unit used with several FlushEpochs may be tagged
  // once per epoch; it is free when all of them are. Tagging with a default
  // EpochTag{} frees it at once (it was only used locally).
  void tag(const Block& unit, transfer::EpochTag tag);

  std::size_t unit_size() const noexcept;
  std::size_t units() const noexcept;  // current ring size
  std::size_t max_units() const noexcept;

 private:
  std::unique_ptr<detail::UnitRing> ring_;
  std::size_t next_ = 0;  // ring position handed out next
};

}  // namespace rdmx::memory
