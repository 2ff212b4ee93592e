// Chunks (HPX section 3.1, 3.4). An output archive is a byte buffer plus a
// chunk list:
//   index chunk    a byte range of the archive's own buffer (small data, copied in)
//   pointer chunk  {pointer, size} of large contiguous data left where it is
//   RMA chunk      {pointer, size, key} of data already in registered memory
// rdmx stores only the pointer and RMA chunks (OutOfLineChunk), each with the
// inline position where it sits in the stream: the index chunks are exactly
// the buffer ranges between them, so keeping them would only repeat that.
// OutputArchive::chunks() lays the full HPX list out when a caller wants it.
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>

#include "rdmx/transfer/remote_locator.hpp"

namespace rdmx::serial {

enum class ChunkKind : std::uint8_t {
  index = 0,    // inline bytes of the archive buffer
  pointer = 1,  // ordinary memory: registered on the fly before a peer can get it
  rma = 2,      // registered memory: carries its key already
};
const char* to_string(ChunkKind kind) noexcept;

// The memory key of an RMA chunk. In rdmx a region index of the owning
// process's RegionTable plus an offset names registered memory completely:
// with the sender's rank it becomes a RemoteLocator, which the fabric
// resolves to an address and an rkey it exchanged once per region.
struct RmaKey {
  std::uint32_t region = 0;  // 0 names nothing
  std::uint64_t offset = 0;
  RemoteLocator locator(std::uint32_t process, std::uint64_t length) const noexcept {
    return {process, region, offset, length};
  }
  friend bool operator==(const RmaKey&, const RmaKey&) = default;
};

// A pointer or RMA chunk as the sender's archive holds it.
struct OutOfLineChunk {
  ChunkKind kind = ChunkKind::pointer;
  const std::byte* data = nullptr;
  std::size_t size = 0;
  std::size_t position = 0;  // offset in the inline bytes where the reader meets this chunk
  RmaKey key;                // RMA chunks only
  // Pointer chunks registered on the fly (register_pointer_chunks): the
  // packed rkey's place in the archive's key bytes. Length 0: not registered.
  std::uint32_t rkey_offset = 0;
  std::uint32_t rkey_length = 0;
};

// One entry of HPX's chunk list (OutputArchive::chunks()).
struct Chunk {
  ChunkKind kind = ChunkKind::index;
  std::span<const std::byte> bytes;  // index: inside the archive buffer; otherwise the user's data
  RmaKey key;                        // RMA chunks only
};

}  // namespace rdmx::serial
