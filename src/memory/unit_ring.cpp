#include "unit_ring.hpp"

#include <algorithm>
#include <iterator>
#include <string>

#include "rdmx/core/checked_size.hpp"
#include "rdmx/core/error.hpp"
#include "rdmx/memory/arena.hpp"
#include "size_text.hpp"

namespace rdmx::memory::detail {

void Unit::add_tag(transfer::EpochTag tag) {
  if (tag.epoch == nullptr) return;  // nothing outstanding
  if (first.epoch == tag.epoch) {
    first.value = std::max(first.value, tag.value);
    return;
  }
  for (auto& t : more) {
    if (t.epoch == tag.epoch) {
      t.value = std::max(t.value, tag.value);
      return;
    }
  }
  if (first.epoch == nullptr)
    first = tag;
  else
    more.push_back(tag);
}

bool Unit::free() {
  if (untagged != 0) return false;
  if (first.epoch != nullptr) {
    if (!first.is_free()) return false;
    first = {};
  }
  if (more.empty()) return true;
  std::erase_if(more, [](const transfer::EpochTag& t) { return t.is_free(); });
  return more.empty();
}

UnitRing::UnitRing(Arena& arena, const RingOptions& options, const char* owner)
    : arena_(arena), options_(options), owner_(owner) {
  const std::size_t align = options.alignment;
  if (options.unit_size == 0) throw Error(Errc::invalid_argument, std::string(owner) + ": unit size 0");
  if (options.initial_units == 0) throw Error(Errc::invalid_argument, std::string(owner) + ": initial_units 0");
  if (options.max_units < options.initial_units)
    throw Error(Errc::invalid_argument, std::string(owner) + ": max_units " + std::to_string(options.max_units) +
                                            " is below initial_units " + std::to_string(options.initial_units));
  if (align == 0 || (align & (align - 1)) != 0)
    throw Error(Errc::invalid_argument, std::string(owner) + ": alignment " + std::to_string(align) + " is not a power of two");
  options_.alignment = std::max<std::size_t>(align, 64);  // units start on cache lines
  stride_ = checked_round_up(options.unit_size, options_.alignment, owner, Errc::invalid_argument);
  if (stride_ > arena.segment_size())
    throw Error(Errc::invalid_argument, std::string(owner) + ": unit size " + size_text(options.unit_size) +
                                            " exceeds the arena's segment of " + size_text(arena.segment_size()) +
                                            " (raise RDMX_ARENA_SEGMENT)");
  order_.reserve(options.initial_units);
  grow_at(0);
}

UnitRing::~UnitRing() {
  for (auto& [address, chunk] : chunks_) {
    try {
      arena_.release_chunk(chunk.block);
    } catch (...) {
      // A destructor cannot report; the arena keeps the chunk until it dies.
    }
  }
}

bool UnitRing::grow_at(std::size_t position) {
  const std::size_t have = order_.size();
  if (have >= options_.max_units) return false;
  std::size_t add = have == 0 || options_.growth == Growth::linear ? options_.initial_units : have;
  add = std::min(add, options_.max_units - have);
  // A growth step may need several chunks: a chunk cannot span arena segments.
  const std::size_t per_chunk = arena_.segment_size() / stride_;
  while (add > 0) {
    const std::size_t count = std::min(add, per_chunk);
    Block chunk = arena_.allocate_chunk(count * stride_, options_.alignment);
    const auto first = static_cast<std::uint32_t>(units_.size());
    chunks_.emplace(chunk.data, Chunk{chunk, first, static_cast<std::uint32_t>(count)});
    std::vector<std::uint32_t> ids;
    ids.reserve(count);
    for (std::size_t i = 0; i < count; ++i) {
      Unit unit;
      unit.block = chunk.slice(i * stride_, options_.unit_size);
      units_.push_back(std::move(unit));
      ids.push_back(static_cast<std::uint32_t>(first + i));
    }
    order_.insert(order_.begin() + static_cast<std::ptrdiff_t>(position), ids.begin(), ids.end());
    position += count;
    add -= count;
  }
  return true;
}

Unit* UnitRing::unit_containing(const std::byte* p) noexcept {
  auto it = chunks_.upper_bound(p);
  if (it == chunks_.begin()) return nullptr;
  const Chunk& chunk = std::prev(it)->second;
  const auto delta = static_cast<std::size_t>(p - chunk.block.data);
  const std::size_t index = delta / stride_;
  if (index >= chunk.count || delta - index * stride_ >= options_.unit_size) return nullptr;
  return &units_[chunk.first_unit + index];
}

}  // namespace rdmx::memory::detail
