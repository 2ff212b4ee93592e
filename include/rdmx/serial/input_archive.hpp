// InputArchive: the receiving side. It decodes a flattened message's inline
// bytes and, for each pointer or RMA chunk, the bytes the receiver obtained
// for it (by an RDMA get into a landing buffer; in-process, the sender's
// memory or a copy), passed as ReceivedChunk in chunk order.
//
// Large data is copied once, from the chunk straight into the destination's
// storage (a std::vector's elements, a string's characters). When the
// receiver owns the landing buffer (ReceivedChunk::owner), SerializeBuffer
// takes it over without a copy, and so do RmaVector / RmaValue when the
// buffer is registered memory (a key).
//
// Bad input throws rdmx::Error with Errc::bad_archive: truncated or
// corrupted bytes, chunks out of place, lengths larger than what is left,
// invalid tags, a type signature of other types. No length is trusted before
// it is checked against the bytes that remain. decode() (codec.hpp) builds
// fresh values and hands them over only when the whole archive was read.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <string>

#include "rdmx/serial/access.hpp"
#include "rdmx/serial/chunk.hpp"
#include "rdmx/serial/options.hpp"
#include "rdmx/serial/wire.hpp"

namespace rdmx::serial {

struct ReceivedChunk {
  std::span<const std::byte> bytes;
  // Set when the receiver owns `bytes` and lets a decoded value keep them
  // (and write to them) instead of copying.
  std::shared_ptr<void> owner;
  RmaKey key;  // where `bytes` lie in this process's registered memory; region 0: not registered
};

struct InputOptions {
  // Registered memory for RmaVector / RmaValue that must be allocated
  // here; nullptr: RmaMemory::process_default().
  RmaMemory* rma_memory = nullptr;
};

// What a bulk read returned: inline bytes (chunk == nullptr) or a chunk's.
struct Bulk {
  std::span<const std::byte> bytes;
  const ReceivedChunk* chunk = nullptr;
};

class InputArchive {
 public:
  static constexpr bool is_saving = false;
  static constexpr bool is_loading = true;
  static constexpr unsigned max_depth = 256;  // nested containers/pointers; deeper input is rejected

  // `chunks` must hold one entry per chunk of the message, each of the
  // chunk's size (else Errc::invalid_argument). Message and chunks must
  // outlive the archive.
  explicit InputArchive(std::span<const std::byte> message, std::span<const ReceivedChunk> chunks = {},
                        InputOptions options = {});
  InputArchive(const MessageView& message, std::span<const ReceivedChunk> chunks = {}, InputOptions options = {});

  template <class... T>
  InputArchive& operator()(T&... values) {
    (serialize_value(*this, values), ...);
    return *this;
  }

  // ---- building blocks for serialize functions ----

  void read_bytes(void* out, std::size_t n) {
    if (static_cast<std::size_t>(end_ - cur_) < n) throw_truncated(n);
    std::memcpy(out, cur_, n);
    cur_ += n;
  }
  std::uint64_t read_varint() {
    if (cur_ != end_ && static_cast<unsigned char>(*cur_) < 0x80) return static_cast<unsigned char>(*cur_++);
    return read_varint_long();
  }
  // A tag byte that must be below `limit` (optional's 0/1, a bool).
  unsigned read_tag(unsigned limit, const char* what) {
    std::uint8_t tag;
    read_bytes(&tag, 1);
    if (tag >= limit) throw_bad_tag(tag, what);
    return tag;
  }
  // An element count for a container whose elements each take at least one
  // inline byte (or a chunk): larger than what is left means corrupt input,
  // so nothing is allocated for it.
  std::size_t read_count();
  // n bytes of bulk data: the chunk that sits here, or n inline bytes.
  Bulk read_bulk(std::size_t n) {
    const auto position = static_cast<std::size_t>(cur_ - begin_);
    if (n != 0 && position == next_chunk_position_) return take_chunk(n);
    if (position > next_chunk_position_) throw_skipped_chunk();
    if (static_cast<std::size_t>(end_ - cur_) < n) throw_truncated(n);
    Bulk b{{cur_, n}, nullptr};
    cur_ += n;
    return b;
  }
  // Bulk data of `count` objects of `size` bytes: the byte count overflow-checked first.
  Bulk read_bulk(std::size_t count, std::size_t size) {
    if (size != 0 && count > static_cast<std::size_t>(-1) / size) throw_oversized(count, size);
    return read_bulk(count * size);
  }

  template <class T>
  void bitwise(T& value) {
    if constexpr (sizeof(T) < min_zero_copy_threshold)
      read_bytes(&value, sizeof(T));
    else
      std::memcpy(&value, read_bulk(sizeof(T)).bytes.data(), sizeof(T));
  }

  // Containers and pointers hold one while they load their contents, so a
  // hostile message cannot nest deeper than max_depth and blow the stack.
  class Nesting {
   public:
    explicit Nesting(InputArchive& ar) : ar_(ar) {
      if (ar_.depth_ == max_depth) ar_.throw_too_deep();
      ++ar_.depth_;
    }
    ~Nesting() { --ar_.depth_; }
    Nesting(const Nesting&) = delete;
    Nesting& operator=(const Nesting&) = delete;

   private:
    InputArchive& ar_;
  };

  // ---- checks ----

  std::uint64_t signature() const noexcept { return view_.signature(); }
  // An archive without a signature matches anything.
  bool signature_matches(std::uint64_t expected) const noexcept {
    return signature() == 0 || signature() == expected;
  }
  // Throws Errc::bad_archive unless every inline byte and every chunk was read.
  void finish() const;

  RmaMemory* rma_memory() const noexcept { return options_.rma_memory; }
  std::size_t inline_remaining() const noexcept { return static_cast<std::size_t>(end_ - cur_); }

  // Errc::bad_archive with "rdmx::serial: <what> (at inline offset N)".
  [[noreturn]] void fail(const std::string& what) const;

 private:
  Bulk take_chunk(std::size_t n);
  void load_next_chunk() noexcept;
  std::uint64_t read_varint_long();
  [[noreturn]] void throw_truncated(std::size_t needed) const;
  [[noreturn]] void throw_bad_tag(unsigned tag, const char* what) const;
  [[noreturn]] void throw_skipped_chunk() const;
  [[noreturn]] void throw_oversized(std::size_t count, std::size_t size) const;
  [[noreturn]] void throw_too_deep() const;

  MessageView view_;
  std::span<const ReceivedChunk> received_;
  InputOptions options_;
  const std::byte* begin_;
  const std::byte* cur_;
  const std::byte* end_;
  // Where the next chunk sits in the inline bytes; no_chunk when none is left.
  static constexpr std::size_t no_chunk = static_cast<std::size_t>(-1);
  std::size_t next_chunk_position_ = no_chunk;
  std::size_t next_chunk_ = 0;
  std::uint64_t next_chunk_size_ = 0;
  unsigned depth_ = 0;
};

}  // namespace rdmx::serial
