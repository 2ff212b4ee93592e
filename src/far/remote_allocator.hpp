// The client-side allocator over the servers' regions: each process owns an
// equal share of every server's region and places objects in it by size
// class, with no server round trip. Objects spread round-robin over the
// servers; a freed block goes back on its class's free list. Every block
// handed out is remembered, so a double free or a foreign offset is an error
// rather than a corrupted free list, and so is its generation, the count of
// its frees (mod 256), which far pointers carry: a pointer kept past a free
// is refused, never given the object that reuses its block. The table is
// written under the cache's lock and read without it (a miss checks there).
#pragma once
#include <array>
#include <cstddef>
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "rdmx/far/config.hpp"
#include "rdmx/far/device.hpp"
#include "rdmx/far/state.hpp"

namespace rdmx::far::detail {

class RemoteAllocator {
 public:
  struct Block {
    std::uint32_t server = 0;
    std::uint64_t offset = 0;  // in the server's region
    std::uint32_t generation = 0;
  };
  // What a remote state word's block is now, for the word.
  enum class Standing { live, outside, freed, reallocated };

  // Share `share` of `shares` of each of the device's regions.
  RemoteAllocator(const Device& device, std::size_t share, std::size_t shares);

  // Throws Errc::out_of_memory when no server's share has room.
  Block allocate(std::uint32_t size_class);
  // On `server` only (a far vector keeps its chunks on one server, so work
  // offloaded there finds all of them); out_of_memory when its share is full.
  Block allocate_on(std::uint32_t server, std::uint32_t size_class);
  // Frees the block a remote state word names. Throws Errc::invalid_argument
  // for a block not allocated with this class and generation (a double
  // free, a stale or foreign pointer).
  void free(std::uint64_t word);
  // Whether the word's block still holds the object it was made for:
  // allocated, with the word's class and generation. Without the lock.
  Standing standing(std::uint64_t word) const noexcept {
    const std::atomic<std::uint16_t>* e = entry(word);
    if (e == nullptr) return Standing::outside;
    const std::uint16_t now = e->load(std::memory_order_acquire);
    if ((now >> 8) != state::generation_of(word)) return (now & 0xff) == 0 ? Standing::freed : Standing::reallocated;
    if ((now & 0xff) != 1 + state::class_of(word)) return (now & 0xff) == 0 ? Standing::freed : Standing::outside;
    return Standing::live;
  }
  // Brings the word's table entry towards the cache: a miss checks it once
  // its read has landed, and the read hides the load.
  void prefetch(std::uint64_t word) const noexcept {
    if (const auto* e = entry(word)) __builtin_prefetch(e);
  }
  // Why `word` is refused, for an error message: `what` is refused.
  static std::string stale_message(const char* what, std::uint64_t word, Standing standing, std::uint32_t now_generation);
  std::uint32_t generation_now(std::uint64_t word) const noexcept;
  std::size_t live() const noexcept { return live_; }
  std::uint64_t share_bytes(std::uint32_t server) const { return parts_.at(server).end - parts_.at(server).begin; }

 private:
  struct Share {
    std::uint64_t begin = 0, end = 0, bump = 0;
    std::array<std::vector<std::uint64_t>, size_classes> free;
    // Per 64-byte unit: low byte 0 free, else 1 + size class of the block
    // starting there; high byte the block's generation, counting its frees.
    std::unique_ptr<std::atomic<std::uint16_t>[]> unit;
    std::uint64_t units = 0;
  };
  bool take(Share& s, std::uint32_t size_class, std::uint64_t& offset, std::uint32_t& generation);
  // The word's table entry; nullptr outside this process's shares.
  const std::atomic<std::uint16_t>* entry(std::uint64_t word) const noexcept {
    const std::uint32_t server = state::server_of(word);
    if (server >= parts_.size()) return nullptr;
    const Share& s = parts_[server];
    const std::uint64_t offset = state::offset_of(word);
    if (offset < s.begin || offset >= s.end) return nullptr;  // a unit offset: aligned
    return &s.unit[(offset - s.begin) / min_object_bytes];
  }

  std::vector<Share> parts_;
  std::size_t next_ = 0;
  std::size_t live_ = 0;
};

}  // namespace rdmx::far::detail
