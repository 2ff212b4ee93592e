// Landing memory for pulled pointer chunks too large for an arena segment
// (a SerializeBuffer or std::vector argument above RDMX_ARENA_SEGMENT).
//
// The arena cannot hold such a chunk at all (its chunks never span
// segments), and growing it for one would pre-fault and pin a whole segment
// for the rest of the job. Instead the chunk lands in an anonymous mapping
// of its own: its pages are faulted by the pull that writes them, once, and
// the decoded value owns the mapping (SerializeBuffer takes it over with no
// copy; RmaVector, which needs registered memory, copies).
//
// When the last holder lets go, the mapping is kept as the worker's one
// spare, so that sending large arguments again lands in memory that is
// already faulted; a larger one replaces a smaller spare. So a worker keeps
// at most one such mapping beyond those in use, no larger than the largest
// chunk it received. Thread-safe (a holder may drop it on any thread).
//
// The bytes mapped (in use and spare) are bounded, as the arena's are
// (RDMX_ARENA_MAX), so that parcels arriving at once cannot map without
// limit: past the bound the spare is dropped first, and then the pull fails
// with Errc::out_of_memory naming the bound.
#pragma once
#include <cstddef>
#include <memory>
#include <mutex>

namespace rdmx::parcel {

class LargeLanding {
 public:
  // `limit`: the most bytes mapped at once (> 0).
  explicit LargeLanding(std::size_t limit);
  ~LargeLanding();
  LargeLanding(const LargeLanding&) = delete;
  LargeLanding& operator=(const LargeLanding&) = delete;

  // n > 0 writable bytes, page-aligned. Throws Errc::out_of_memory past the
  // limit or when no mapping can be made.
  std::shared_ptr<std::byte> allocate(std::size_t n);

  // Bytes of the spare mapping (0: none), and of all mappings, for tests.
  std::size_t spare_bytes() const;
  std::size_t mapped_bytes() const;

 private:
  struct Spare;
  std::shared_ptr<Spare> spare_;  // shared with the holders' deleters, which may outlive this
};

}  // namespace rdmx::parcel
