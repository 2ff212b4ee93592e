// The flattened archive: what OutputArchive::flatten() produces and
// MessageView reads. One contiguous message, little-endian (rdmx's targets
// all are; checked at compile time):
//
//   header       byte 0     magic 0xD7
//                byte 1     version (high nibble, 1) | flags: 1 signature, 2 chunks
//                varint     inline size
//                varint x2  chunk count, packed-rkey bytes        (flag 2 only)
//                8 bytes    type signature                        (flag 1 only)
//   inline bytes
//   chunk table  32 bytes per pointer/RMA chunk, in stream order:
//                u8 kind (1 pointer, 2 rma), u8 0, u16 rkey length,
//                u32 region (rma) or the rkey's offset in the rkeys (pointer),
//                u64 position, u64 size,
//                u64 address (pointer: the sender's address; rma: offset in the region)
//   rkeys        the pointer chunks' packed rkeys, back to back in chunk order
//
// A small archive costs 4 bytes of header. The reader needs no threshold: a
// bulk read meets a chunk exactly where the chunk's position says, so the
// sender's threshold can differ from the receiver's. MessageView checks the
// whole layout up front (sizes, kinds, positions, rkey lengths) and throws
// Errc::bad_archive naming what is wrong.
#pragma once
#include <bit>
#include <cstddef>
#include <cstdint>
#include <span>

#include "rdmx/serial/chunk.hpp"

namespace rdmx::serial {

static_assert(std::endian::native == std::endian::little, "rdmx's wire format is little-endian");

namespace wire {
inline constexpr std::byte magic{0xD7};
inline constexpr unsigned version = 1;
inline constexpr unsigned flag_signature = 1;
inline constexpr unsigned flag_chunks = 2;
inline constexpr std::size_t descriptor_size = 32;
inline constexpr std::size_t max_header_size = 2 + 10 + 5 + 5 + 8;
}  // namespace wire

// A pointer or RMA chunk as the receiver sees it: what to get, from where.
struct ChunkDescriptor {
  ChunkKind kind = ChunkKind::pointer;
  std::uint64_t position = 0;  // offset in the inline bytes where the reader meets it
  std::uint64_t size = 0;
  std::uint64_t address = 0;   // pointer: the sender's virtual address; rma: offset inside key.region
  RmaKey key;                  // RMA chunks: {region, address}
  std::span<const std::byte> packed_rkey;  // pointer chunks registered by the sender; empty otherwise
};

class MessageView {
 public:
  // Validates the layout; throws Errc::bad_archive. The bytes must outlive the view.
  explicit MessageView(std::span<const std::byte> message);

  std::uint64_t signature() const noexcept { return signature_; }  // 0: none
  std::span<const std::byte> inline_bytes() const noexcept { return inline_; }
  std::size_t chunk_count() const noexcept { return chunk_count_; }
  // Descriptor i < chunk_count(), decoded from the table (checked at construction).
  ChunkDescriptor chunk(std::size_t i) const noexcept;

 private:
  std::span<const std::byte> inline_;
  const std::byte* table_ = nullptr;
  const std::byte* rkeys_ = nullptr;
  std::size_t chunk_count_ = 0;
  std::uint64_t signature_ = 0;
};

}  // namespace rdmx::serial
