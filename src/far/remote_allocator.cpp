#include "remote_allocator.hpp"

#include <string>

#include "rdmx/core/error.hpp"
#include "rdmx/far/state.hpp"

namespace rdmx::far::detail {

RemoteAllocator::RemoteAllocator(const Device& device, std::size_t share, std::size_t shares) {
  if (shares == 0 || share >= shares) throw Error(Errc::invalid_argument, "far: bad share of the servers' regions");
  for (std::size_t s = 0; s < device.servers(); ++s) {
    // Shares start on 64-byte units so every block offset fits the pointer's unit field.
    const std::uint64_t per = device.region_bytes(s) / shares / min_object_bytes * min_object_bytes;
    Share part;
    part.begin = part.bump = per * share;
    part.end = part.begin + per;
    part.owner.assign(per / min_object_bytes, 0);
    parts_.push_back(std::move(part));
  }
}

bool RemoteAllocator::take(Share& s, std::uint32_t size_class, std::uint64_t& offset) {
  auto& list = s.free[size_class];
  if (!list.empty()) {
    offset = list.back();
    list.pop_back();
  } else if (s.end - s.bump >= class_bytes(size_class)) {
    offset = s.bump;
    s.bump += class_bytes(size_class);
  } else {
    return false;
  }
  s.owner[(offset - s.begin) / min_object_bytes] = static_cast<std::uint8_t>(1 + size_class);
  return true;
}

RemoteAllocator::Block RemoteAllocator::allocate(std::uint32_t size_class) {
  for (std::size_t tried = 0; tried < parts_.size(); ++tried) {
    const std::size_t server = next_;
    next_ = (next_ + 1) % parts_.size();
    std::uint64_t offset = 0;
    if (take(parts_[server], size_class, offset)) {
      ++live_;
      return {static_cast<std::uint32_t>(server), offset};
    }
  }
  throw Error(Errc::out_of_memory, "far memory exhausted: no server has room for another " +
                                       std::to_string(class_bytes(size_class)) + "-byte object (this process's share is " +
                                       std::to_string(parts_.empty() ? 0 : share_bytes(0)) + " bytes per server, " +
                                       std::to_string(live_) + " objects live; raise RDMX_FAR_REGION or add servers)");
}

RemoteAllocator::Block RemoteAllocator::allocate_on(std::uint32_t server, std::uint32_t size_class) {
  if (server >= parts_.size())
    throw Error(Errc::invalid_argument, "far: allocation on server " + std::to_string(server) + ", but there are " +
                                            std::to_string(parts_.size()) + " servers");
  std::uint64_t offset = 0;
  if (!take(parts_[server], size_class, offset))
    throw Error(Errc::out_of_memory, "far memory exhausted on server " + std::to_string(server) + ": no room for another " +
                                         std::to_string(class_bytes(size_class)) + "-byte object (this process's share is " +
                                         std::to_string(share_bytes(server)) + " bytes; raise RDMX_FAR_REGION)");
  ++live_;
  return {server, offset};
}

void RemoteAllocator::free(const Block& block, std::uint32_t size_class) {
  if (block.server >= parts_.size())
    throw Error(Errc::invalid_argument, "far: free of a block on server " + std::to_string(block.server) + ", which does not exist");
  Share& s = parts_[block.server];
  const bool inside = block.offset >= s.begin && block.offset < s.end && (block.offset - s.begin) % min_object_bytes == 0;
  std::uint8_t* owner = inside ? &s.owner[(block.offset - s.begin) / min_object_bytes] : nullptr;
  if (owner == nullptr || *owner != 1 + size_class)
    throw Error(Errc::invalid_argument, "far: double free or dangling far pointer: no live " +
                                            std::to_string(class_bytes(size_class)) + "-byte object at offset " +
                                            std::to_string(block.offset) + " of server " + std::to_string(block.server));
  *owner = 0;
  s.free[size_class].push_back(block.offset);
  --live_;
}

}  // namespace rdmx::far::detail
