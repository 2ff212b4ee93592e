#include "free_list.hpp"

#include <iterator>

namespace rdmx::memory::detail {

FreeList::FreeList(std::uintptr_t base, std::uint64_t capacity) : base_(base), capacity_(capacity) {
  if (capacity > 0) add_hole(0, capacity);
}

void FreeList::add_hole(std::uint64_t offset, std::uint64_t size) {
  holes_.emplace(offset, size);
  by_size_.emplace(size, offset);
}

void FreeList::erase_hole(std::map<std::uint64_t, std::uint64_t>::iterator it) {
  by_size_.erase({it->second, it->first});
  holes_.erase(it);
}

std::optional<std::uint64_t> FreeList::fit_in(std::uint64_t hole_offset, std::uint64_t hole_size,
                                              std::uint64_t bytes, std::uint64_t align) const {
  const std::uint64_t address = base_ + hole_offset;
  const std::uint64_t aligned = (address + align - 1) & ~(align - 1);
  const std::uint64_t pad = aligned - address;
  if (pad > hole_size || hole_size - pad < bytes) return std::nullopt;
  return hole_offset + pad;
}

std::optional<FreeList::Candidate> FreeList::find(std::uint64_t bytes, std::uint64_t align, Fit fit) const {
  if (fit == Fit::first) {
    for (const auto& [offset, size] : holes_) {
      if (auto at = fit_in(offset, size, bytes, align)) return Candidate{offset, size, *at};
    }
    return std::nullopt;
  }
  // Smallest hole first; alignment padding may disqualify a hole that is just
  // big enough, so keep walking up until one fits.
  for (auto it = by_size_.lower_bound({bytes, 0}); it != by_size_.end(); ++it) {
    if (auto at = fit_in(it->second, it->first, bytes, align)) return Candidate{it->second, it->first, *at};
  }
  return std::nullopt;
}

std::uint64_t FreeList::take(const Candidate& c, std::uint64_t bytes) {
  erase_hole(holes_.find(c.hole_offset));
  if (c.offset > c.hole_offset) add_hole(c.hole_offset, c.offset - c.hole_offset);
  const std::uint64_t end = c.offset + bytes;
  const std::uint64_t hole_end = c.hole_offset + c.hole_size;
  if (end < hole_end) add_hole(end, hole_end - end);
  used_.emplace(c.offset, bytes);
  used_bytes_ += bytes;
  return c.offset;
}

std::optional<std::uint64_t> FreeList::allocated_size(std::uint64_t offset) const {
  auto it = used_.find(offset);
  if (it == used_.end()) return std::nullopt;
  return it->second;
}

bool FreeList::release(std::uint64_t offset) {
  auto used = used_.find(offset);
  if (used == used_.end()) return false;
  const std::uint64_t end = offset + used->second;
  used_bytes_ -= used->second;
  used_.erase(used);

  std::uint64_t start = offset;
  std::uint64_t size = end - offset;
  auto next = holes_.lower_bound(offset);
  if (next != holes_.end() && next->first == end) {
    size += next->second;
    auto after = std::next(next);
    erase_hole(next);
    next = after;
  }
  if (next != holes_.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second == start) {
      start = prev->first;
      size += prev->second;
      erase_hole(prev);
    }
  }
  add_hole(start, size);
  return true;
}

}  // namespace rdmx::memory::detail
