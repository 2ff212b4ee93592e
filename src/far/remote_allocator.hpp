// The client-side allocator over the servers' regions: each process owns an
// equal share of every server's region and places objects in it by size
// class, with no server round trip. Objects spread round-robin over the
// servers; a freed block goes back on its class's free list. Every block
// handed out is remembered, so a double free or a foreign offset is an error
// rather than a corrupted free list.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "rdmx/far/config.hpp"
#include "rdmx/far/device.hpp"

namespace rdmx::far::detail {

class RemoteAllocator {
 public:
  struct Block {
    std::uint32_t server = 0;
    std::uint64_t offset = 0;  // in the server's region
  };

  // Share `share` of `shares` of each of the device's regions.
  RemoteAllocator(const Device& device, std::size_t share, std::size_t shares);

  // Throws Errc::out_of_memory when no server's share has room.
  Block allocate(std::uint32_t size_class);
  // On `server` only (a far vector keeps its chunks on one server, so work
  // offloaded there finds all of them); out_of_memory when its share is full.
  Block allocate_on(std::uint32_t server, std::uint32_t size_class);
  // Throws Errc::invalid_argument for a block not allocated (or already freed) with this class.
  void free(const Block& block, std::uint32_t size_class);
  std::size_t live() const noexcept { return live_; }
  std::uint64_t share_bytes(std::uint32_t server) const { return parts_.at(server).end - parts_.at(server).begin; }

 private:
  struct Share {
    std::uint64_t begin = 0, end = 0, bump = 0;
    std::array<std::vector<std::uint64_t>, size_classes> free;
    std::vector<std::uint8_t> owner;  // per 64-byte unit: 0 free, else 1 + size class of the block starting there
  };
  bool take(Share& s, std::uint32_t size_class, std::uint64_t& offset);

  std::vector<Share> parts_;
  std::size_t next_ = 0;
  std::size_t live_ = 0;
};

}  // namespace rdmx::far::detail
