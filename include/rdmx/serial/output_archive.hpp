// OutputArchive: the sending side of HPX's chunked archive (section 3.1).
// Small data is copied into the inline buffer; a contiguous run of bitwise
// data of at least the zero-copy threshold becomes a pointer chunk that
// refers to the caller's memory, or an RMA chunk when the memory is
// registered already (RmaVector, RmaValue). flatten() seals the archive
// into one contiguous message (header, inline bytes, chunk table, packed
// rkeys; see wire.hpp) for an eager send; a receiver pulls the chunks it
// describes with RDMA gets.
//
// Lifetime: a pointer chunk points at the value that was serialized. An
// lvalue must stay alive and unchanged until the message and its chunks have
// been transferred (a parcel layer keeps the arguments it serialized). A
// temporary (rvalue) would be gone by then, so the archive moves it into
// storage of its own when it produced chunks. SerializeBuffer, RmaVector
// and RmaValue need neither (holds_its_chunks): each chunk they make comes
// with a reference to its memory, which the archive holds.
// Everything the archive holds is released when it is destroyed or cleared.
//
// One archive per thread; nothing is locked.
#pragma once
#include <cassert>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <type_traits>
#include <utility>
#include <vector>

#include "rdmx/serial/access.hpp"
#include "rdmx/serial/chunk.hpp"
#include "rdmx/serial/detail/byte_buffer.hpp"
#include "rdmx/serial/options.hpp"

namespace rdmx::serial {

// A type whose serialize hands the archive an owner with every chunk it
// makes (write_bulk or write_rma with an owner) declares a member
// `using holds_its_chunks = void;`: a temporary of it is serialized where
// it is, without moving it into storage of the archive's first (one
// allocation per argument saved).
template <class T>
concept holds_its_chunks = requires { typename T::holds_its_chunks; };

class OutputArchive {
 public:
  static constexpr bool is_saving = true;
  static constexpr bool is_loading = false;

  // Throws Errc::invalid_argument for a threshold in 1..63.
  explicit OutputArchive(ArchiveOptions options = {});
  OutputArchive(OutputArchive&&) noexcept = default;
  OutputArchive& operator=(OutputArchive&&) noexcept = default;
  OutputArchive(const OutputArchive&) = delete;
  OutputArchive& operator=(const OutputArchive&) = delete;

  // Serialize values in order. serialize functions take T&, shared with
  // loading; saving never modifies the value.
  template <class... T>
  OutputArchive& operator()(T&&... values) {
    assert(!flattened() && "an OutputArchive cannot be written after flatten()");
    (save(std::forward<T>(values)), ...);
    return *this;
  }

  // ---- building blocks for serialize functions ----

  // Always inline.
  void write_bytes(const void* data, std::size_t n) { buffer_.append(data, n); }
  // Lengths, counts and tags: LEB128, one byte below 128.
  void write_varint(std::uint64_t value) {
    if (value < 0x80) {
      *buffer_.extend(1) = static_cast<std::byte>(value);
      return;
    }
    write_varint_long(value);
  }
  // n bytes of bitwise data: copied in below the threshold, else a pointer
  // chunk to `data`. With an owner, the archive keeps a reference to it for
  // as long as a chunk points into it.
  void write_bulk(const void* data, std::size_t n) {
    if (n < threshold_) {
      if (n != 0) write_bytes(data, n);  // an empty vector's data() may be null, which memcpy must not see
      return;
    }
    add_chunk(ChunkKind::pointer, data, n, {});
  }
  template <class U>
  void write_bulk(const void* data, std::size_t n, const std::shared_ptr<U>& owner) {
    write_bulk(data, n);
    // A reference only for a chunk: taking one for bytes copied in cost two
    // atomic updates of the count per small buffer.
    if (n >= threshold_ && owner) keep_alive_.push_back(owner);
  }
  // The same for registered memory: an RMA chunk carrying `key`.
  void write_rma(const void* data, std::size_t n, RmaKey key, std::shared_ptr<const void> owner);

  // One bitwise value (serialize_value's fast path). Objects smaller than the
  // smallest threshold skip the comparison altogether.
  template <class T>
  void bitwise(const T& value) {
    if constexpr (sizeof(T) < min_zero_copy_threshold)
      write_bytes(&value, sizeof(T));
    else
      write_bulk(&value, sizeof(T));
  }

  // ---- what was built ----

  // 0 when zero copy is off.
  std::size_t zero_copy_threshold() const noexcept { return threshold_ == zero_copy_off ? 0 : threshold_; }
  std::span<const std::byte> inline_bytes() const noexcept { return {buffer_.data(), inline_size()}; }
  std::span<const OutOfLineChunk> out_of_line_chunks() const noexcept { return chunks_; }
  std::size_t out_of_line_bytes() const noexcept;
  // HPX's chunk list: index chunks over the inline bytes, interleaved with
  // the pointer and RMA chunks in stream order.
  std::vector<Chunk> chunks() const;

  // A type signature the reader checks (signature.hpp); 0: none.
  void set_signature(std::uint64_t signature) noexcept { signature_ = signature; }
  std::uint64_t signature() const noexcept { return signature_; }

  // Give pointer chunk `index` the packed rkey of an on-the-fly registration
  // (register_pointer_chunks does this); `registration` is kept alive with
  // the archive. Throws Errc::invalid_argument for an RMA chunk, a chunk
  // that has a key, a key over 65535 bytes, or after flatten().
  void attach_rkey(std::size_t index, std::span<const std::byte> packed_rkey, std::shared_ptr<const void> registration);

  // Seal the archive into one contiguous message (wire.hpp) and return it.
  // The inline bytes are not copied: the header goes into room kept in
  // front of them and the chunk table after them. The span stays valid
  // while the archive lives; calling flatten() again returns it again.
  std::span<const std::byte> flatten();
  bool flattened() const noexcept { return flat_size_ != 0; }

  // Empty the archive for reuse (keeps its buffer), dropping every reference it held.
  void clear() noexcept;

 private:
  static constexpr std::size_t zero_copy_off = static_cast<std::size_t>(-1);
  std::size_t inline_size() const noexcept { return flattened() ? inline_size_ : buffer_.size(); }
  template <class T>
  void save(T&& value) {
    using U = std::remove_cvref_t<T>;
    if constexpr (std::is_lvalue_reference_v<T> || holds_its_chunks<U> ||
                  (bitwise_serializable<U> && sizeof(U) < min_zero_copy_threshold)) {
      serialize_value(*this, const_cast<U&>(static_cast<const U&>(value)));
    } else {
      // A temporary dies before its chunks are sent: keep it if it made any.
      auto kept = std::make_shared<U>(std::forward<T>(value));
      const std::size_t before = chunks_.size();
      serialize_value(*this, *kept);
      if (chunks_.size() != before) keep_alive_.push_back(std::move(kept));
    }
  }
  void write_varint_long(std::uint64_t value);
  void add_chunk(ChunkKind kind, const void* data, std::size_t n, RmaKey key);

  detail::ByteBuffer buffer_;
  std::size_t threshold_;  // zero_copy_off when off: one comparison either way
  std::vector<OutOfLineChunk> chunks_;
  std::vector<std::shared_ptr<const void>> keep_alive_;
  std::vector<std::byte> rkeys_;
  std::uint64_t signature_ = 0;
  std::size_t inline_size_ = 0;  // set by flatten(), which appends after the inline bytes
  std::size_t flat_offset_ = 0;  // where the message starts in front()
  std::size_t flat_size_ = 0;
};

}  // namespace rdmx::serial
