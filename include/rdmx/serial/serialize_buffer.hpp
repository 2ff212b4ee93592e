// SerializeBuffer<T> (HPX section 3.2): a shared, reference-counted view of
// contiguous bitwise data, passed by reference into asynchronous calls.
// Copies share the memory. Serializing one at or above the zero-copy
// threshold emits a pointer chunk to the memory itself and the archive keeps
// a reference, so the memory lives until the archive (and so the transfer)
// is done even if every user copy is gone.
//
// Three ways to make one over existing memory:
//   copy(p, n)          copies the elements into memory the buffer owns
//   reference(p, n)     the caller keeps ownership and must keep the memory
//                       alive and unchanged until the last copy and every
//                       archive holding it are gone (e.g. until the call's future is ready)
//   take(p, n, deleter) the buffer owns the memory and calls deleter(p) when the last reference goes
// and SerializeBuffer(std::vector<T>&&) takes a vector's elements over.
//
// On the receiving side a buffer above the threshold takes over the landing
// memory the receiver obtained for the chunk (ReceivedChunk::owner) instead
// of copying it; otherwise it copies into memory of its own.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <utility>
#include <vector>

#include "rdmx/core/recycled_blocks.hpp"
#include "rdmx/serial/bitwise.hpp"
#include "rdmx/serial/input_archive.hpp"
#include "rdmx/serial/output_archive.hpp"

namespace rdmx::serial {

template <bitwise_serializable T>
class SerializeBuffer {
 public:
  using value_type = T;
  using iterator = T*;
  using const_iterator = const T*;
  using holds_its_chunks = void;  // each chunk comes with data_ (OutputArchive)

  SerializeBuffer() = default;
  // n value-initialised elements the buffer owns.
  explicit SerializeBuffer(std::size_t n) : data_(own(n)), size_(n) {
    if (n != 0) std::memset(static_cast<void*>(data_.get()), 0, n * sizeof(T));
  }
  explicit SerializeBuffer(std::vector<T>&& elements) {
    auto vector = std::make_shared<std::vector<T>>(std::move(elements));
    size_ = vector->size();
    T* const data = vector->data();
    data_ = std::shared_ptr<T>(std::move(vector), data);
  }

  static SerializeBuffer copy(const T* data, std::size_t n) { return from_bytes(data, n); }
  static SerializeBuffer reference(T* data, std::size_t n) {
    SerializeBuffer b;
    // Counts references, frees nothing; the count's block is recycled (one
    // per call that references its argument: malloc and free were a tenth
    // of a small async round trip).
    b.data_ = std::shared_ptr<T>(data, [](T*) {}, rdmx::detail::RecyclingAllocator<T>());
    b.size_ = n;
    return b;
  }
  template <class Deleter>
  static SerializeBuffer take(T* data, std::size_t n, Deleter deleter) {
    SerializeBuffer b;
    b.data_ = std::shared_ptr<T>(data, std::move(deleter));
    b.size_ = n;
    return b;
  }

  T* data() const noexcept { return data_.get(); }
  std::size_t size() const noexcept { return size_; }
  bool empty() const noexcept { return size_ == 0; }
  T& operator[](std::size_t i) const noexcept { return data_.get()[i]; }
  T* begin() const noexcept { return data_.get(); }
  T* end() const noexcept { return data_.get() + size_; }
  std::span<T> span() const noexcept { return {data_.get(), size_}; }
  // References to the memory: user copies plus archives holding it.
  long use_count() const noexcept { return data_.use_count(); }

  template <archive A>
  void serialize(A& ar) {
    if constexpr (A::is_saving) {
      ar.write_varint(size_);
      ar.write_bulk(data_.get(), size_ * sizeof(T), data_);
    } else {
      const std::size_t n = ar.read_varint();
      const Bulk bulk = ar.read_bulk(n, sizeof(T));
      const ReceivedChunk* chunk = bulk.chunk;
      if (chunk != nullptr && chunk->owner != nullptr &&
          reinterpret_cast<std::uintptr_t>(bulk.bytes.data()) % alignof(T) == 0) {
        // The receiver's landing memory becomes this buffer's: no copy.
        data_ = std::shared_ptr<T>(chunk->owner, reinterpret_cast<T*>(const_cast<std::byte*>(bulk.bytes.data())));
        size_ = n;
      } else {
        *this = from_bytes(bulk.bytes.data(), n);
      }
    }
  }

 private:
  // n elements copied from `source`, which need not be aligned for T.
  static SerializeBuffer from_bytes(const void* source, std::size_t n) {
    SerializeBuffer b;
    b.data_ = own(n);
    b.size_ = n;
    if (n != 0) std::memcpy(static_cast<void*>(b.data_.get()), source, n * sizeof(T));
    return b;
  }
  static std::shared_ptr<T> own(std::size_t n) {
    if (n == 0) return {};
    // A small buffer lands once per call that carries it (and once more in
    // its reply): from the thread's recycled blocks rather than malloc, in
    // sizes that at most double it.
    if constexpr (alignof(T) <= alignof(std::max_align_t)) {
      const std::size_t bytes = n * sizeof(T);
      if (bytes <= 64) return recycled<64>();
      if (bytes <= 128) return recycled<128>();
      if (bytes <= 256) return recycled<256>();
      if (bytes <= 512) return recycled<512>();
      if (bytes <= 1024) return recycled<1024>();
    }
    std::shared_ptr<T[]> array = std::make_shared_for_overwrite<T[]>(n);
    T* const data = array.get();
    // Moved, not copied, into the alias: a copy and the original's end are
    // two atomic updates of the count, on every buffer a parcel lands.
    return std::shared_ptr<T>(std::move(array), data);
  }

  template <std::size_t Bytes>
  static std::shared_ptr<T> recycled() {
    struct Storage {
      alignas(std::max_align_t) std::byte bytes[Bytes];
    };
    auto block = std::allocate_shared_for_overwrite<Storage>(rdmx::detail::RecyclingAllocator<Storage>());
    T* const data = reinterpret_cast<T*>(block->bytes);
    return std::shared_ptr<T>(std::move(block), data);
  }

  std::shared_ptr<T> data_;
  std::size_t size_ = 0;
};

}  // namespace rdmx::serial
