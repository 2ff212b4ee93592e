#include "rdmx/memory/circular_allocator.hpp"

#include <algorithm>
#include <string>
#include <thread>

#include "rdmx/core/backoff.hpp"
#include "rdmx/core/error.hpp"
#include "unit_ring.hpp"

namespace rdmx::memory {

CircularAllocator::CircularAllocator(Arena& arena, Options options)
    : ring_(std::make_unique<detail::UnitRing>(
          arena, detail::RingOptions{options.unit_size, options.initial_units, options.max_units, options.growth, 64},
          "circular allocator")),
      unit_size_(options.unit_size) {
  rebuild();
}

void CircularAllocator::rebuild() {
  // A unit's value survives in detail::Unit::first.value while slots_ is
  // rebuilt; units fresh from growth have none and are free.
  const std::size_t at = next_ != nullptr ? position() : 0;  // growth inserts at the position: it stays
  std::vector<std::uint64_t> values(ring_->size(), 0);
  for (std::size_t i = 0; i < ring_->size(); ++i) {
    const detail::Unit& u = ring_->at(i);
    if (u.first.epoch == &unbound_) values[i] = u.first.value;
  }
  slots_.clear();
  slots_.reserve(ring_->size());
  for (std::size_t i = 0; i < ring_->size(); ++i) {
    detail::Unit& u = ring_->at(i);
    slots_.push_back(Slot{u.block.data, values[i], u.block.offset, u.block.region, !u.more.empty()});
  }
  size_ = slots_.size();
  next_ = slots_.data() + at;
  end_ = slots_.data() + size_;
  last_ = nullptr;
}

CircularAllocator::~CircularAllocator() = default;
CircularAllocator::CircularAllocator(CircularAllocator&&) noexcept = default;
CircularAllocator& CircularAllocator::operator=(CircularAllocator&&) noexcept = default;

std::optional<Block> CircularAllocator::try_allocate_slow() {
  Slot* s = next_;
  detail::Unit* u = &ring_->at(position());
  const bool free = s->extra ? std::all_of(u->more.begin(), u->more.end(), [](const transfer::EpochTag& t) { return t.is_free(); })
                             : s->value <= (seen_completed_ = bound_->completed());
  if (!free) {
    // Insert fresh units here, ahead of the busy one: they are used next and
    // the busy unit is revisited after them, when it has had longest to finish.
    for (std::size_t i = 0; i < size_; ++i) ring_->at(i).first = transfer::EpochTag{&unbound_, slots_[i].value};
    if (!ring_->grow_at(position())) return std::nullopt;
    rebuild();
    s = next_;
    u = &ring_->at(position());
  }
  u->more.clear();
  s->extra = false;
  s->value = 0;
  return next_free();
}

Block CircularAllocator::allocate_slow(ProgressHook progress) {
  Backoff backoff;
  for (;;) {
    if (auto block = try_allocate()) return *block;
    // Without a hook the flush must be completed by another thread.
    backoff(progress());
  }
}

void CircularAllocator::tag_slow(const std::byte* unit, transfer::EpochTag tag) {
  std::size_t position = size_;
  if (last_ != nullptr && last_->data == unit) {
    position = static_cast<std::size_t>(last_ - slots_.data());
  } else {
    for (std::size_t i = 0; i < size_; ++i)
      if (slots_[i].data == unit) position = i;
  }
  if (position == size_)
    throw Error(Errc::invalid_argument, "circular allocator: tag() of a block that is not one of its units");
  Slot& s = slots_[position];
  auto& more = ring_->at(position).more;
  auto merge = [&more](transfer::EpochTag t) {  // within one epoch the higher tag completes last
    auto same = std::find_if(more.begin(), more.end(), [&](const transfer::EpochTag& m) { return m.epoch == t.epoch; });
    if (same != more.end())
      same->value = std::max(same->value, t.value);
    else
      more.push_back(t);
  };
  if (tag.epoch == nullptr) {  // used only locally: nothing outstanding from this use
    if (!s.extra && s.value == in_use) s.value = 0;
    return;
  }
  if (bound_ == &unbound_) {  // the first epoch seen is the one this allocator serves
    bound_ = tag.epoch;
    seen_completed_ = 0;
  }
  if (s.extra) {
    merge(tag);
    return;
  }
  if (tag.epoch == bound_) {
    s.value = s.value == in_use ? tag.value : std::max(s.value, tag.value);
    return;
  }
  // Another epoch: every tag moves to the list, checked on the slow path.
  more.clear();
  if (s.value != in_use && s.value != 0) more.push_back(transfer::EpochTag{bound_, s.value});
  merge(tag);
  s.extra = true;
  s.value = tagged_elsewhere;
}

std::size_t CircularAllocator::unit_size() const noexcept { return ring_->options().unit_size; }
std::size_t CircularAllocator::units() const noexcept { return ring_->size(); }
std::size_t CircularAllocator::max_units() const noexcept { return ring_->options().max_units; }

}  // namespace rdmx::memory
