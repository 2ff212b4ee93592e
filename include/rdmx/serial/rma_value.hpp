// RmaValue<T> (HPX section 3.4): one large bitwise object in registered
// memory, for values big enough to be worth a zero-copy transfer of their
// own. A shared handle like RmaVector (copies share the object); null when
// default-constructed. Serialized as a tag byte, then the object's bytes:
// an RMA chunk at or above the zero-copy threshold, inline below it.
#pragma once
#include <cstdint>
#include <cstring>
#include <memory>
#include <new>
#include <utility>

#include "rdmx/serial/bitwise.hpp"
#include "rdmx/serial/input_archive.hpp"
#include "rdmx/serial/output_archive.hpp"
#include "rdmx/serial/rma_memory.hpp"

namespace rdmx::serial {

template <bitwise_serializable T>
class RmaValue {
 public:
  using holds_its_chunks = void;  // each chunk comes with its storage (OutputArchive)
  RmaValue() = default;  // null
  // A T constructed from `args` in `memory`.
  template <class... Args>
  explicit RmaValue(RmaMemory& memory, Args&&... args) : storage_(memory.allocate(sizeof(T), alignment)) {
    ::new (static_cast<void*>(storage_.data.get())) T(std::forward<Args>(args)...);
  }
  // A T constructed from `args` in the default memory (RmaMemory::resolve:
  // the program's default, else the running Job's).
  template <class... Args>
  static RmaValue make(Args&&... args) {
    return RmaValue(RmaMemory::resolve(nullptr, "RmaValue::make"), std::forward<Args>(args)...);
  }

  T* get() const noexcept { return reinterpret_cast<T*>(storage_.data.get()); }
  T& operator*() const noexcept { return *get(); }
  T* operator->() const noexcept { return get(); }
  explicit operator bool() const noexcept { return storage_.data != nullptr; }
  RmaKey key() const noexcept { return storage_.key; }
  long use_count() const noexcept { return storage_.data.use_count(); }

  template <archive A>
  void serialize(A& ar) {
    if constexpr (A::is_saving) {
      const std::uint8_t tag = *this ? 1 : 0;
      ar.write_bytes(&tag, 1);
      if (*this) ar.write_rma(get(), sizeof(T), key(), storage_.data);
    } else {
      if (ar.read_tag(2, "RmaValue") == 0) {
        storage_ = {};
        return;
      }
      const Bulk bulk = ar.read_bulk(sizeof(T));
      const ReceivedChunk* chunk = bulk.chunk;
      if (chunk != nullptr && chunk->owner != nullptr && chunk->key.region != 0 &&
          reinterpret_cast<std::uintptr_t>(bulk.bytes.data()) % alignof(T) == 0) {
        storage_ = {std::shared_ptr<std::byte>(chunk->owner, const_cast<std::byte*>(bulk.bytes.data())), sizeof(T),
                    chunk->key};
      } else {
        RmaBytes fresh = RmaMemory::resolve(ar.rma_memory(), "receiving an RmaValue").allocate(sizeof(T), alignment);
        std::memcpy(fresh.data.get(), bulk.bytes.data(), sizeof(T));
        storage_ = std::move(fresh);
      }
    }
  }

 private:
  static constexpr std::size_t alignment = alignof(T) < 16 ? 16 : alignof(T);
  RmaBytes storage_;
};

}  // namespace rdmx::serial
