#include "rdmx/serial/detail/byte_buffer.hpp"

#include <algorithm>
#include <new>

namespace rdmx::serial::detail {

ByteBuffer::ByteBuffer(std::size_t capacity) : capacity_(std::max<std::size_t>(capacity, 64)) {
  base_ = static_cast<std::byte*>(std::malloc(front_room + capacity_));
  if (base_ == nullptr) throw std::bad_alloc();
}

void ByteBuffer::grow(std::size_t n) {
  // Doubling keeps appends amortised O(1); realloc can often extend in place.
  const std::size_t needed = size_ + n;
  if (needed < size_) throw std::bad_alloc();  // wrapped around
  const std::size_t capacity = std::max(needed, 2 * capacity_);
  auto* grown = static_cast<std::byte*>(std::realloc(base_, front_room + capacity));
  if (grown == nullptr) throw std::bad_alloc();
  base_ = grown;
  capacity_ = capacity;
}

}  // namespace rdmx::serial::detail
