#include "rdmx/memory/linear_circular_allocator.hpp"

#include <string>
#include <thread>

#include "rdmx/core/backoff.hpp"
#include "rdmx/core/error.hpp"
#include "unit_ring.hpp"

namespace rdmx::memory {

LinearCircularAllocator::LinearCircularAllocator(Arena& arena, Options options)
    : ring_(std::make_unique<detail::UnitRing>(arena,
                                               detail::RingOptions{options.unit_size, options.initial_units,
                                                                   options.max_units, options.growth, options.alignment},
                                               "linear-circular allocator")),
      alignment_(options.alignment) {}

LinearCircularAllocator::~LinearCircularAllocator() = default;
LinearCircularAllocator::LinearCircularAllocator(LinearCircularAllocator&&) noexcept = default;
LinearCircularAllocator& LinearCircularAllocator::operator=(LinearCircularAllocator&&) noexcept = default;

std::optional<Block> LinearCircularAllocator::try_allocate(std::size_t n) {
  const std::size_t unit_size = ring_->options().unit_size;
  if (n == 0 || n > unit_size)
    throw Error(Errc::invalid_argument, "linear-circular allocator: a segment of " + std::to_string(n) +
                                            " bytes does not fit a unit of " + std::to_string(unit_size) +
                                            " bytes (configure a larger unit_size)");
  detail::Unit* unit = &ring_->at(current_);
  std::size_t offset = (unit->used + alignment_ - 1) & ~(alignment_ - 1);
  if (offset + n > unit_size) {
    std::size_t next = current_ + 1 == ring_->size() ? 0 : current_ + 1;
    if (!ring_->at(next).free()) {
      if (!ring_->grow_at(current_ + 1)) return std::nullopt;
      next = current_ + 1;
    }
    current_ = next;
    unit = &ring_->at(current_);
    unit->reset();
    offset = 0;
  }
  unit->used = offset + n;
  ++unit->untagged;
  return unit->block.slice(offset, n);
}

Block LinearCircularAllocator::allocate(std::size_t n, ProgressHook progress) {
  Backoff backoff;
  for (;;) {
    if (auto block = try_allocate(n)) return *block;
    backoff(progress());
  }
}

void LinearCircularAllocator::tag(const Block& segment, transfer::EpochTag tag) {
  detail::Unit* u = ring_->unit_containing(segment.data);
  if (u == nullptr || segment.data + segment.size > u->block.data + u->used)
    throw Error(Errc::invalid_argument, "linear-circular allocator: tag() of a block that is not one of its segments");
  if (u->untagged == 0)
    throw Error(Errc::invalid_argument,
                "linear-circular allocator: tag() of a segment whose unit has no untagged segment left (tagged twice?)");
  --u->untagged;
  u->add_tag(tag);
}

std::size_t LinearCircularAllocator::unit_size() const noexcept { return ring_->options().unit_size; }
std::size_t LinearCircularAllocator::units() const noexcept { return ring_->size(); }
std::size_t LinearCircularAllocator::max_units() const noexcept { return ring_->options().max_units; }

}  // namespace rdmx::memory
