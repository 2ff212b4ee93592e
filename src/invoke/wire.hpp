// The format of a messenger chunk, shared by sender and receiver.
//
// A chunk is registered memory in the receiver's process:
//   [0, 8)              the Producer word, written only by the sender (RDMA)
//   [8, header_bytes)   unused (keeps records on their own cache lines)
//   [header_bytes, end) records, back to back, each a multiple of 8 bytes
// The receiver's Consumer state (how far it has read) stays in its own
// memory: nobody else needs it except as "chunks fully consumed", which it
// pushes to the sender's feedback word.
//
// Completeness. Records are written with plain RDMA writes; then the sender
// fences and writes the Producer word, which says how far the chunk is
// complete. The receiver parses only up to that point, so a record still in
// flight is never read. The word is one aligned 8-byte store (atomic on every
// transport rdmx uses) and carries a check of its own fields, so a torn or
// corrupted header is detected instead of trusted; each record header has a
// check byte as well.
#pragma once
#include <cstdint>
#include <cstring>
#include <optional>

#include "rdmx/invoke/detail/lane.hpp"  // RecordHeader, record_check

namespace rdmx::invoke::wire {

inline constexpr std::size_t header_bytes = 64;
using detail::record_align;
inline constexpr std::uint32_t max_grow = 127;  // chunks one close may announce (7 bits)
inline constexpr std::uint64_t max_end = (std::uint64_t{1} << 28) * record_align;  // 2 GiB

// The Producer word: end (in 8-byte units, 28 bits) | seq (16) | closed (1) |
// grow (7) | check (12). seq is the chunk's activation number (mod 2^16): a
// word left from the chunk's previous use has another seq and reads as
// "nothing new yet". closed: the sender has moved on to the next chunk;
// grow: that many newly allocated chunks join the ring right after this one
// (Seriema's marker that keeps both rings symmetric).
struct Published {
  std::uint64_t end = 0;
  std::uint16_t seq = 0;
  bool closed = false;
  std::uint8_t grow = 0;
};

inline std::uint64_t mix(std::uint64_t x) noexcept {
  x ^= x >> 31;
  x *= 0x9e3779b97f4a7c15ull;
  x ^= x >> 29;
  return x;
}

// The salt of the channel from thread (sp, st) to thread (dp, dt): both ends
// compute it, so a word written into another channel's chunk fails its check.
inline std::uint64_t channel_salt(std::uint32_t sp, std::uint32_t st, std::uint32_t dp, std::uint32_t dt) noexcept {
  return mix((std::uint64_t{sp} << 32 | st) ^ mix(std::uint64_t{dp} << 32 | dt));
}

inline std::uint64_t encode(const Published& p, std::uint64_t salt) noexcept {
  const std::uint64_t fields = (p.end / record_align) | (std::uint64_t{p.seq} << 28) |
                               (std::uint64_t{p.closed} << 44) | (std::uint64_t{p.grow} << 45);
  return fields | ((mix(fields ^ salt) & 0xfff) << 52);
}

// nullopt: the check does not match (a corrupted or torn word).
inline std::optional<Published> decode(std::uint64_t word, std::uint64_t salt) noexcept {
  const std::uint64_t fields = word & ((std::uint64_t{1} << 52) - 1);
  if ((word >> 52) != (mix(fields ^ salt) & 0xfff)) return std::nullopt;
  Published p;
  p.end = (fields & ((std::uint64_t{1} << 28) - 1)) * record_align;
  p.seq = static_cast<std::uint16_t>(fields >> 28);
  p.closed = ((fields >> 44) & 1) != 0;
  p.grow = static_cast<std::uint8_t>((fields >> 45) & 0x7f);
  return p;
}

using detail::RecordHeader;
using detail::kind_call, detail::kind_buffer, detail::kind_returning, detail::kind_broadcast, detail::kind_mask,
    detail::has_extension, detail::has_remote_buffer, detail::has_remote_reply, detail::has_targets;

// Follows the header when the caller wants to hear back or sends a buffer.
struct Extension {
  std::uint64_t sync;    // the caller's Synchronizer (0: none): notified when consumed
  union {                         // by the call kind:
    std::uint64_t buffer_length;  // kind_buffer, kind_broadcast: the buffer's bytes
    std::uint64_t result_address; // kind_returning: where the result goes in the caller
  };
};
static_assert(sizeof(Extension) == 16);

// A broadcast names its root: the thread whose tree it travels down, which
// the Extension's sync (if any) belongs to.
struct BroadcastRoot {
  std::uint32_t process;
  std::uint32_t thread;
};
static_assert(sizeof(BroadcastRoot) == 8);

// call_buffer whose buffer does not travel in the record: it was
// RDMA-written into the destination's memory first (`written`), or the
// destination RDMA-reads it from the caller's memory (`read`).
struct RemoteBuffer {
  std::uint32_t region;
  std::uint32_t how;  // buffer_written, buffer_read, buffer_read_sent
  std::uint64_t offset;
  std::uint64_t length;
};
static_assert(sizeof(RemoteBuffer) == 24);
// broadcast_buffer into destination buffers: where the buffer goes in the
// thread with global index i (process i / threads), in that process's
// registered memory. Every node of the tree writes its children's.
struct Target {
  std::uint32_t region;
  std::uint32_t reserved;
  std::uint64_t offset;
};
static_assert(sizeof(Target) == 16);
// The caller's Synchronizer count (and call_return's result) in its
// registered memory: the destination answers with RDMA, not a message.
struct RemoteReply {
  std::uint32_t counter_region;
  std::uint32_t result_region;  // returning calls only
  std::uint64_t counter_offset;
  std::uint64_t result_offset;
};
static_assert(sizeof(RemoteReply) == 24);

// buffer_read_sent: the caller's when_sent counts down once the buffer is
// read (the Extension's sync), not after the call ran.
enum : std::uint32_t { buffer_written = 0, buffer_read = 1, buffer_read_sent = 2 };

using detail::record_check;

inline constexpr std::size_t align_up(std::size_t n) noexcept { return (n + record_align - 1) & ~(record_align - 1); }

}  // namespace rdmx::invoke::wire
