// The output archive's inline buffer: raw bytes with amortised growth and no
// zero-filling (std::vector<std::byte> would value-initialise every byte it
// grows by, which is pure cost when the next thing written overwrites it).
// It keeps `front_room` bytes ahead of the data so that flattening can put
// the message header in front of the inline bytes without moving them.
#pragma once
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <utility>

namespace rdmx::serial::detail {

class ByteBuffer {
 public:
  static constexpr std::size_t front_room = 32;

  explicit ByteBuffer(std::size_t capacity);
  ~ByteBuffer() { std::free(base_); }
  ByteBuffer(ByteBuffer&& other) noexcept
      : base_(std::exchange(other.base_, nullptr)), size_(std::exchange(other.size_, 0)),
        capacity_(std::exchange(other.capacity_, 0)) {}
  ByteBuffer& operator=(ByteBuffer&& other) noexcept {
    std::swap(base_, other.base_);
    std::swap(size_, other.size_);
    std::swap(capacity_, other.capacity_);
    return *this;
  }
  ByteBuffer(const ByteBuffer&) = delete;
  ByteBuffer& operator=(const ByteBuffer&) = delete;

  std::byte* data() const noexcept { return base_ + front_room; }
  std::size_t size() const noexcept { return size_; }
  // The room in front of data() (front_room bytes).
  std::byte* front() const noexcept { return base_; }

  void append(const void* p, std::size_t n) { std::memcpy(extend(n), p, n); }
  // n more bytes at the end, uninitialised; returns where they start.
  std::byte* extend(std::size_t n) {
    if (n > capacity_ - size_) grow(n);
    std::byte* at = data() + size_;
    size_ += n;
    return at;
  }
  void clear() noexcept { size_ = 0; }

 private:
  void grow(std::size_t n);  // make room for n more bytes (out of line: the cold path)

  std::byte* base_ = nullptr;  // malloc'd: front_room + capacity_ bytes
  std::size_t size_ = 0;
  std::size_t capacity_ = 0;
};

}  // namespace rdmx::serial::detail
