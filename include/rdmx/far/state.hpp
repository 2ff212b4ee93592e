// The 8-byte state word of a far pointer: it says whether the object is
// local or remote, and names it either way without a lookup.
//   remote: size class, server index and 64-byte unit offset in that server's
//           region, and the block's generation when the object was made
//   local:  the 64-byte unit index of its frame in the cache arena
// plus the epoch of the far::Manager that made it (never 0, so it also tells
// a pointer from null) and flags. All zero is the null pointer.
//
//   63 present | 62 busy | 61 dirty | 60-58 epoch | 57-50 generation |
//   49-46 class | 45-36 server | 35-0 offset (local: 31-0 frame)
#pragma once
#include <cstdint>

namespace rdmx::far::state {

inline constexpr std::uint64_t present = 1ull << 63;  // local: low 32 bits are the cache frame
inline constexpr std::uint64_t busy = 1ull << 62;     // being fetched, evicted or built: wait
inline constexpr std::uint64_t dirty = 1ull << 61;    // changed since it was fetched

// The epoch of the Manager that made the word, 1 to 7 (a process counts its
// Managers): a pointer kept from an earlier Manager is refused. Nonzero in
// every non-null word, so `valid` is the field.
inline constexpr unsigned epoch_shift = 58;
inline constexpr std::uint64_t epoch_mask = 7;
inline constexpr std::uint64_t epochs = epoch_mask;  // 1 ... 7
inline constexpr std::uint64_t valid = epoch_mask << epoch_shift;  // not null

inline constexpr unsigned unit_shift = 6;  // offsets and frames count 64-byte units
inline constexpr std::uint64_t offset_units_mask = (1ull << 36) - 1;
inline constexpr unsigned server_shift = 36;
inline constexpr std::uint64_t server_mask = (1ull << 10) - 1;  // up to 1024 servers
inline constexpr unsigned class_shift = 46;
inline constexpr std::uint64_t class_mask = (1ull << 4) - 1;
// The far block's generation: its allocator counts the frees of every block,
// so a pointer kept past a free (a byte-wise copy) is refused.
inline constexpr unsigned generation_shift = 50;
inline constexpr std::uint64_t generation_mask = (1ull << 8) - 1;
inline constexpr std::uint64_t frame_mask = (1ull << 32) - 1;
inline constexpr std::uint64_t max_servers = server_mask + 1;
inline constexpr std::uint64_t max_region_bytes = (offset_units_mask + 1) << unit_shift;  // 4 TiB

inline constexpr std::uint64_t epoch_bits(std::uint32_t epoch) noexcept { return (epoch & epoch_mask) << epoch_shift; }
inline constexpr std::uint64_t remote(std::uint32_t server, std::uint64_t offset, std::uint32_t size_class,
                                      std::uint32_t generation = 0, std::uint32_t epoch = 1) noexcept {
  return epoch_bits(epoch) | ((generation & generation_mask) << generation_shift) | (std::uint64_t{size_class} << class_shift) |
         (std::uint64_t{server} << server_shift) | (offset >> unit_shift);
}
inline constexpr std::uint32_t server_of(std::uint64_t word) noexcept {
  return static_cast<std::uint32_t>((word >> server_shift) & server_mask);
}
inline constexpr std::uint64_t offset_of(std::uint64_t word) noexcept { return (word & offset_units_mask) << unit_shift; }
inline constexpr std::uint32_t class_of(std::uint64_t word) noexcept {
  return static_cast<std::uint32_t>((word >> class_shift) & class_mask);
}
inline constexpr std::uint32_t generation_of(std::uint64_t word) noexcept {
  return static_cast<std::uint32_t>((word >> generation_shift) & generation_mask);
}
inline constexpr std::uint32_t epoch_of(std::uint64_t word) noexcept {
  return static_cast<std::uint32_t>((word >> epoch_shift) & epoch_mask);
}
inline constexpr std::uint32_t frame_of(std::uint64_t word) noexcept { return static_cast<std::uint32_t>(word & frame_mask); }

}  // namespace rdmx::far::state
