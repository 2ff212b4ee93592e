// The 8-byte state word of a far pointer: it says whether the object is
// local or remote, and names it either way without a lookup.
//   remote: server index, size class and 64-byte unit offset in that server's region
//   local:  the 64-byte unit index of its frame in the cache arena
// plus flags. All zero is the null pointer.
#pragma once
#include <cstdint>

namespace rdmx::far::state {

inline constexpr std::uint64_t present = 1ull << 63;  // local: low 32 bits are the cache frame
inline constexpr std::uint64_t busy = 1ull << 62;     // being fetched, evicted or built: wait
inline constexpr std::uint64_t dirty = 1ull << 61;    // changed since it was fetched
inline constexpr std::uint64_t valid = 1ull << 59;    // not null

inline constexpr unsigned unit_shift = 6;  // offsets and frames count 64-byte units
inline constexpr std::uint64_t offset_units_mask = (1ull << 40) - 1;
inline constexpr unsigned server_shift = 40;
inline constexpr std::uint64_t server_mask = (1ull << 12) - 1;  // up to 4096 servers
inline constexpr unsigned class_shift = 52;
inline constexpr std::uint64_t class_mask = (1ull << 4) - 1;
inline constexpr std::uint64_t frame_mask = (1ull << 32) - 1;
inline constexpr std::uint64_t max_servers = server_mask + 1;
inline constexpr std::uint64_t max_region_bytes = (offset_units_mask + 1) << unit_shift;

inline constexpr std::uint64_t remote(std::uint32_t server, std::uint64_t offset, std::uint32_t size_class) noexcept {
  return valid | (std::uint64_t{size_class} << class_shift) | (std::uint64_t{server} << server_shift) | (offset >> unit_shift);
}
inline constexpr std::uint32_t server_of(std::uint64_t word) noexcept {
  return static_cast<std::uint32_t>((word >> server_shift) & server_mask);
}
inline constexpr std::uint64_t offset_of(std::uint64_t word) noexcept { return (word & offset_units_mask) << unit_shift; }
inline constexpr std::uint32_t class_of(std::uint64_t word) noexcept {
  return static_cast<std::uint32_t>((word >> class_shift) & class_mask);
}
inline constexpr std::uint32_t frame_of(std::uint64_t word) noexcept { return static_cast<std::uint32_t>(word & frame_mask); }

}  // namespace rdmx::far::state
