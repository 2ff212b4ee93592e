// The inlined path of a plain one-sided call (MessengerGlobal::call without a
// Synchronizer). When the calling worker's messenger to `dest` writes into a
// chunk mapped here (shared memory) and has room before its next publish, it
// leaves that room open in the worker's Lane; call() then serializes the
// record there itself, with no library call, and the messenger takes the
// bytes over the next time it is entered (to publish, rotate, or for any
// other call). Everything else goes through the messenger.
//
// The record layout is the messenger chunk format's (src/invoke/wire.hpp,
// which includes this header): a checked 16-byte header, then the captures.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "rdmx/fabric/identity.hpp"
#include "rdmx/fabric/layer.hpp"

namespace rdmx::invoke::detail {

struct RecordHeader {
  std::uint64_t function;
  std::uint32_t size;  // whole record, a multiple of record_align
  std::uint16_t closure_size;
  std::uint8_t flags;
  std::uint8_t check;
};
static_assert(sizeof(RecordHeader) == 16);

inline constexpr std::size_t record_align = 8;
// Record flags: the call kind in bits 0-1, then what follows the header (the
// structures themselves are the invoke layer's wire format, src/invoke/wire.hpp).
enum : std::uint8_t {
  kind_call = 0,
  kind_buffer = 1,
  kind_returning = 2,
  kind_broadcast = 3,     // a BroadcastRoot follows the Extension
  kind_mask = 3,
  has_extension = 4,
  has_remote_buffer = 8,  // a RemoteBuffer follows the Extension (call_buffer by RDMA write or read)
  has_remote_reply = 16,  // a RemoteReply follows (after the RemoteBuffer, if any)
  has_targets = 32,       // a broadcast's destination buffers follow the RemoteBuffer: one Target per thread of the job
};

inline std::uint8_t record_check(const RecordHeader& h) noexcept {
  std::uint64_t x = h.function ^ (std::uint64_t{h.size} << 24) ^ (std::uint64_t{h.closure_size} << 8) ^ h.flags;
  x ^= x >> 32;
  x ^= x >> 16;
  x ^= x >> 8;
  return static_cast<std::uint8_t>(x ^ 0xa5);
}

// Owned by the worker's invoke state (whichever OS thread acts as it), so no
// pointer in it outlives the messenger that opened it.
struct Lane {
  std::uint64_t dest = ~std::uint64_t{0};  // (process << 32 | thread) of the open chunk's receiver
  std::uintptr_t at = 0, limit = 0;         // free bytes of that chunk before the next publish
  void* holder = nullptr;                   // the Messenger that opened it
};

// The lane of the worker the calling thread acts as, if its messengers have
// opened one: the worker's fabric::acting_word<Lane>.
inline Lane* acting_lane() noexcept {
  void** word = fabric::acting_word<Lane>();
  return word == nullptr ? nullptr : static_cast<Lane*>(*word);
}

inline std::uint64_t lane_key(ThreadId t) noexcept { return std::uint64_t{t.process} << 32 | t.thread; }

// Room for a plain call's record of `closure` bytes in the open lane to
// `dest`, its header written; nullptr: the messenger must do it.
inline std::byte* open_record(ThreadId dest, std::uint64_t function, std::size_t closure) noexcept {
  if (closure > 0xffff) return nullptr;
  const std::size_t size = sizeof(RecordHeader) + (closure + record_align - 1) / record_align * record_align;
  Lane* lane = acting_lane();
  if (lane == nullptr || lane->dest != lane_key(dest) || lane->limit - lane->at < size) return nullptr;
  RecordHeader h{function, static_cast<std::uint32_t>(size), static_cast<std::uint16_t>(closure), kind_call, 0};
  h.check = record_check(h);
  auto* at = reinterpret_cast<std::byte*>(lane->at);
  std::memcpy(at, &h, sizeof h);
  lane->at += size;
  return at + sizeof h;
}

// Writes func's record into the open lane; false: the messenger must do it.
template <class F>
inline bool write_in_lane(ThreadId dest, std::uint64_t function, const F& func) noexcept {
  if constexpr (sizeof(F) > 0xffff) {
    return false;
  } else {
    std::byte* closure = open_record(dest, function, sizeof(F));
    if (closure == nullptr) return false;
    std::memcpy(closure, &func, sizeof(F));
    return true;
  }
}

}  // namespace rdmx::invoke::detail
