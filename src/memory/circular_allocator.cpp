#include "rdmx/memory/circular_allocator.hpp"

#include <string>
#include <thread>

#include "rdmx/core/error.hpp"
#include "unit_ring.hpp"

namespace rdmx::memory {

CircularAllocator::CircularAllocator(Arena& arena, Options options)
    : ring_(std::make_unique<detail::UnitRing>(
          arena, detail::RingOptions{options.unit_size, options.initial_units, options.max_units, options.growth, 64},
          "circular allocator")) {}

CircularAllocator::~CircularAllocator() = default;
CircularAllocator::CircularAllocator(CircularAllocator&&) noexcept = default;
CircularAllocator& CircularAllocator::operator=(CircularAllocator&&) noexcept = default;

std::optional<Block> CircularAllocator::try_allocate() {
  detail::Unit* unit = &ring_->at(next_);
  if (!unit->free()) {
    // Insert fresh units here, ahead of the busy one: they are used next and
    // the busy unit is revisited after them, when it has had longest to finish.
    if (!ring_->grow_at(next_)) return std::nullopt;
    unit = &ring_->at(next_);
  }
  unit->reset();
  unit->untagged = 1;
  next_ = next_ + 1 == ring_->size() ? 0 : next_ + 1;
  return unit->block;
}

Block CircularAllocator::allocate(ProgressHook progress) {
  for (;;) {
    if (auto block = try_allocate()) return *block;
    // Without a hook the flush must be completed by another thread.
    if (!progress()) std::this_thread::yield();
  }
}

void CircularAllocator::tag(const Block& unit, transfer::EpochTag tag) {
  detail::Unit* u = ring_->unit_containing(unit.data);
  if (u == nullptr || u->block.data != unit.data)
    throw Error(Errc::invalid_argument, "circular allocator: tag() of a block that is not one of its units");
  u->untagged = 0;
  u->add_tag(tag);
}

std::size_t CircularAllocator::unit_size() const noexcept { return ring_->options().unit_size; }
std::size_t CircularAllocator::units() const noexcept { return ring_->size(); }
std::size_t CircularAllocator::max_units() const noexcept { return ring_->options().max_units; }

}  // namespace rdmx::memory
