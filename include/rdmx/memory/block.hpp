// Block: a piece of registered memory together with its name inside this
// process, {region, offset}, where region is a RegionTable index. Every
// allocator in rdmx::memory hands out Blocks so that any of them can be
// turned into a RemoteLocator (Seriema's RemoteMemoryLocator) for a peer
// without looking anything up.
#pragma once
#include <cstddef>
#include <cstdint>

#include "rdmx/transfer/remote_locator.hpp"

namespace rdmx::memory {

struct Block {
  std::byte* data = nullptr;
  std::size_t size = 0;
  std::uint32_t region = 0;  // index in RegionTable::process() (0 never names a region)
  std::uint64_t offset = 0;  // byte offset of `data` inside that region

  explicit operator bool() const noexcept { return data != nullptr; }
  // The sub-range [delta, delta + n) of this block (no bounds check: callers slice what they own).
  Block slice(std::size_t delta, std::size_t n) const noexcept { return {data + delta, n, region, offset + delta}; }
  // The network-wide name of this block as seen from process `process`.
  RemoteLocator locator(std::uint32_t process) const noexcept { return {process, region, offset, size}; }
  friend bool operator==(const Block&, const Block&) = default;
};

}  // namespace rdmx::memory
