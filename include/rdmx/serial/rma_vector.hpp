// RmaVector<T> (HPX section 3.4): a vector of bitwise elements in
// registered memory (RmaMemory), so serializing it at or above the zero-copy
// threshold emits an RMA chunk that already carries its memory key: nothing
// is registered during the transfer.
//
// Mostly a drop-in for std::vector<T>, with one difference taken from HPX:
// copies share the elements (a copy is another handle to the same vector;
// clone() makes an independent one), so an RmaVector can be passed by value
// into an asynchronous call without wrapping it in a SerializeBuffer.
// Growing moves the elements to a new piece of registered memory for every
// handle; an archive that serialized the old piece keeps that piece alive.
//
// On the receiving side an RmaVector above the threshold takes over the
// landing memory when the receiver got the chunk into registered memory
// (ReceivedChunk with an owner and a key); otherwise it allocates from
// InputOptions::rma_memory (or the process default) and copies.
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <memory>
#include <stdexcept>
#include <string>

#include "rdmx/core/checked_size.hpp"
#include "rdmx/serial/bitwise.hpp"
#include "rdmx/serial/input_archive.hpp"
#include "rdmx/serial/output_archive.hpp"
#include "rdmx/serial/rma_memory.hpp"

namespace rdmx::serial {

template <bitwise_serializable T>
class RmaVector {
 public:
  using value_type = T;
  using holds_its_chunks = void;  // each chunk comes with its storage (OutputArchive)
  using size_type = std::size_t;
  using reference = T&;
  using const_reference = const T&;
  using iterator = T*;
  using const_iterator = const T*;

  // `memory`: where the elements live; nullptr: RmaMemory::process_default()
  // when memory is first needed.
  RmaVector() : RmaVector(nullptr) {}  // implicit: `RmaVector<T> v = {};` and vector<RmaVector<T>>(n)
  explicit RmaVector(RmaMemory* memory) : state_(std::make_shared<State>(memory)) {}
  explicit RmaVector(std::size_t n, RmaMemory* memory = nullptr) : RmaVector(memory) { resize(n); }
  RmaVector(std::size_t n, const T& value, RmaMemory* memory = nullptr) : RmaVector(memory) { resize(n, value); }
  RmaVector(std::initializer_list<T> values, RmaMemory* memory = nullptr) : RmaVector(memory) {
    reserve(values.size());
    for (const T& v : values) push_back(v);
  }

  // An independent copy in new registered memory (copying the handle shares).
  RmaVector clone() const {
    RmaVector copy(state_->memory);
    copy.reserve(size());
    if (!empty()) std::memcpy(static_cast<void*>(copy.data()), data(), size() * sizeof(T));
    copy.state_->size = size();
    return copy;
  }

  T* data() const noexcept { return reinterpret_cast<T*>(state_->storage.data.get()); }
  std::size_t size() const noexcept { return state_->size; }
  std::size_t capacity() const noexcept { return state_->storage.size / sizeof(T); }
  bool empty() const noexcept { return size() == 0; }
  T* begin() const noexcept { return data(); }
  T* end() const noexcept { return data() + size(); }
  T& operator[](std::size_t i) const noexcept { return data()[i]; }
  T& at(std::size_t i) const {
    if (i >= size()) throw std::out_of_range("RmaVector::at: index " + std::to_string(i) + " of " + std::to_string(size()));
    return data()[i];
  }
  T& front() const noexcept { return data()[0]; }
  T& back() const noexcept { return data()[size() - 1]; }
  // Where the elements are in this process's registered memory.
  RmaKey key() const noexcept { return state_->storage.key; }
  // Handles sharing these elements.
  long use_count() const noexcept { return state_.use_count(); }

  void reserve(std::size_t n) {
    if (n > capacity()) reallocate(n);
  }
  void resize(std::size_t n, const T& value = T{}) {
    if (n > capacity()) reallocate(std::max(n, 2 * capacity()));
    std::fill(data() + size(), data() + std::max(n, size()), value);
    state_->size = n;
  }
  void push_back(const T& value) {
    if (size() == capacity()) {
      const T copy = value;  // `value` may live in the storage that moves
      reallocate(std::max<std::size_t>(2 * capacity(), 64 / sizeof(T) + 1));
      data()[state_->size++] = copy;
      return;
    }
    data()[state_->size++] = value;
  }
  void pop_back() noexcept { --state_->size; }
  void clear() noexcept { state_->size = 0; }

  friend bool operator==(const RmaVector& a, const RmaVector& b) { return std::equal(a.begin(), a.end(), b.begin(), b.end()); }

  template <archive A>
  void serialize(A& ar) {
    if constexpr (A::is_saving) {
      ar.write_varint(size());
      ar.write_rma(data(), size() * sizeof(T), key(), state_->storage.data);
    } else {
      const std::size_t n = ar.read_varint();
      const Bulk bulk = ar.read_bulk(n, sizeof(T));
      const ReceivedChunk* chunk = bulk.chunk;
      auto state = std::make_shared<State>(ar.rma_memory());
      if (chunk != nullptr && chunk->owner != nullptr && chunk->key.region != 0 &&
          reinterpret_cast<std::uintptr_t>(bulk.bytes.data()) % alignof(T) == 0) {
        // The landing memory is registered: keep it, with its key.
        state->storage = {std::shared_ptr<std::byte>(chunk->owner, const_cast<std::byte*>(bulk.bytes.data())),
                          bulk.bytes.size(), chunk->key};
      } else if (n != 0) {
        state->storage = RmaMemory::resolve(state->memory, "receiving an RmaVector").allocate(bulk.bytes.size(), alignment);
        std::memcpy(state->storage.data.get(), bulk.bytes.data(), bulk.bytes.size());
      }
      state->size = n;
      state_ = std::move(state);
    }
  }

 private:
  struct State {
    explicit State(RmaMemory* m) : memory(m) {}
    RmaMemory* memory;
    RmaBytes storage;
    std::size_t size = 0;
  };

  static constexpr std::size_t alignment = std::max<std::size_t>(alignof(T), 16);

  void reallocate(std::size_t n) {
    const std::size_t bytes = checked_mul(n, sizeof(T), "RmaVector");
    RmaBytes bigger = RmaMemory::resolve(state_->memory, "RmaVector").allocate(bytes, alignment);
    if (!empty()) std::memcpy(bigger.data.get(), data(), size() * sizeof(T));
    state_->storage = std::move(bigger);
  }

  std::shared_ptr<State> state_;
};

}  // namespace rdmx::serial
