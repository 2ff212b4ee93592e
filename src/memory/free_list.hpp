// FreeList: offset-based bookkeeping of one contiguous range, shared by the
// Arena (its segments) and the GeneralAllocator (its chunks). Holes are kept
// both by offset (for first-fit and for coalescing neighbours on release) and
// by size (for best-fit). Alignment is computed on real addresses (base +
// offset) so that an aligned offset is an aligned pointer. Not thread-safe:
// its owners lock.
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <utility>

namespace rdmx::memory::detail {

enum class Fit { first, best };

class FreeList {
 public:
  // A place a request would go: the hole it comes from and where it starts.
  struct Candidate {
    std::uint64_t hole_offset;
    std::uint64_t hole_size;
    std::uint64_t offset;  // aligned start inside the hole
  };

  FreeList(std::uintptr_t base, std::uint64_t capacity);

  // Where `bytes` aligned to `align` would go under `fit` (nothing changes).
  std::optional<Candidate> find(std::uint64_t bytes, std::uint64_t align, Fit fit) const;
  // Take a candidate returned by find() (with no change in between); returns its offset.
  std::uint64_t take(const Candidate& c, std::uint64_t bytes);
  std::optional<std::uint64_t> allocate(std::uint64_t bytes, std::uint64_t align, Fit fit) {
    auto c = find(bytes, align, fit);
    if (!c) return std::nullopt;
    return take(*c, bytes);
  }
  // Size recorded for an allocation starting at `offset`, if there is one.
  std::optional<std::uint64_t> allocated_size(std::uint64_t offset) const;
  // Give back the allocation at `offset`, merging it with free neighbours.
  // Returns false (and changes nothing) if nothing is allocated there.
  bool release(std::uint64_t offset);

  std::uint64_t capacity() const noexcept { return capacity_; }
  std::uint64_t used_bytes() const noexcept { return used_bytes_; }
  std::size_t hole_count() const noexcept { return holes_.size(); }
  bool empty() const noexcept { return used_.empty(); }

 private:
  void add_hole(std::uint64_t offset, std::uint64_t size);
  void erase_hole(std::map<std::uint64_t, std::uint64_t>::iterator it);
  std::optional<std::uint64_t> fit_in(std::uint64_t hole_offset, std::uint64_t hole_size, std::uint64_t bytes,
                                      std::uint64_t align) const;

  std::uintptr_t base_;
  std::uint64_t capacity_;
  std::uint64_t used_bytes_ = 0;
  std::map<std::uint64_t, std::uint64_t> holes_;                  // offset -> size
  std::set<std::pair<std::uint64_t, std::uint64_t>> by_size_;     // (size, offset)
  std::map<std::uint64_t, std::uint64_t> used_;                   // offset -> size
};

}  // namespace rdmx::memory::detail
