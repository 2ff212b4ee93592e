// RemoteLocator: Seriema's RemoteMemoryLocator, the network-wide name of a
// piece of registered memory: {process, region, offset, length}. It is plain
// data and can travel inside calls; the fabric resolves it to an address.
#pragma once
#include <cstdint>

namespace rdmx {

struct RemoteLocator {
  std::uint32_t process = 0;  // rank in the job
  std::uint32_t region = 0;   // index of a registered region in that process
  std::uint64_t offset = 0;   // byte offset inside the region
  std::uint64_t length = 0;   // bytes

  // The sub-range [offset + delta, offset + delta + n) of this locator.
  RemoteLocator slice(std::uint64_t delta, std::uint64_t n) const noexcept { return {process, region, offset + delta, n}; }
  friend bool operator==(const RemoteLocator&, const RemoteLocator&) = default;
};

}  // namespace rdmx
