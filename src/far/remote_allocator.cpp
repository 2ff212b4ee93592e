#include "remote_allocator.hpp"

#include <cstdio>
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
    part.units = per / min_object_bytes;
    part.unit = std::make_unique<std::atomic<std::uint16_t>[]>(part.units);  // zero: free, generation 0
    parts_.push_back(std::move(part));
  }
}

bool RemoteAllocator::take(Share& s, std::uint32_t size_class, std::uint64_t& offset, std::uint32_t& generation) {
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
  auto& unit = s.unit[(offset - s.begin) / min_object_bytes];
  const std::uint16_t was = unit.load(std::memory_order_relaxed);
  generation = was >> 8;
  unit.store(static_cast<std::uint16_t>((was & 0xff00) | (1 + size_class)), std::memory_order_release);
  return true;
}

RemoteAllocator::Block RemoteAllocator::allocate(std::uint32_t size_class) {
  for (std::size_t tried = 0; tried < parts_.size(); ++tried) {
    const std::size_t server = next_;
    next_ = (next_ + 1) % parts_.size();
    std::uint64_t offset = 0;
    std::uint32_t generation = 0;
    if (take(parts_[server], size_class, offset, generation)) {
      ++live_;
      return {static_cast<std::uint32_t>(server), offset, generation};
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
  std::uint32_t generation = 0;
  if (!take(parts_[server], size_class, offset, generation))
    throw Error(Errc::out_of_memory, "far memory exhausted on server " + std::to_string(server) + ": no room for another " +
                                         std::to_string(class_bytes(size_class)) + "-byte object (this process's share is " +
                                         std::to_string(share_bytes(server)) + " bytes; raise RDMX_FAR_REGION)");
  ++live_;
  return {server, offset, generation};
}

std::uint32_t RemoteAllocator::generation_now(std::uint64_t word) const noexcept {
  const std::atomic<std::uint16_t>* e = entry(word);
  return e == nullptr ? 0 : e->load(std::memory_order_relaxed) >> 8;
}

std::string RemoteAllocator::stale_message(const char* what, std::uint64_t word, Standing standing, std::uint32_t now_generation) {
  char name[160];
  std::snprintf(name, sizeof name, "far pointer %#llx (server %u, offset %llu, %zu-byte block, generation %u)",
                static_cast<unsigned long long>(word), state::server_of(word), static_cast<unsigned long long>(state::offset_of(word)),
                class_bytes(state::class_of(word)), state::generation_of(word));
  std::string why;
  switch (standing) {
    case Standing::freed:
      why = "its object was freed (double free or a dangling copy)";
      break;
    case Standing::reallocated:
      why = "its object was freed and the block now holds another, generation " + std::to_string(now_generation) +
            " (double free or a dangling copy)";
      break;
    default:
      why = "no object of this process starts there (a foreign pointer, or a double free or dangling copy)";
      break;
  }
  return std::string("far: ") + what + " of a stale " + name + ": " + why;
}

void RemoteAllocator::free(std::uint64_t word) {
  const Standing standing = this->standing(word);
  if (standing != Standing::live) {
    if (state::server_of(word) >= parts_.size())
      throw Error(Errc::invalid_argument, "far: free of a block on server " + std::to_string(state::server_of(word)) +
                                              ", which does not exist");
    throw Error(Errc::invalid_argument, stale_message("free", word, standing, generation_now(word)));
  }
  Share& s = parts_[state::server_of(word)];
  const std::uint64_t offset = state::offset_of(word);
  auto& unit = s.unit[(offset - s.begin) / min_object_bytes];
  const std::uint16_t was = unit.load(std::memory_order_relaxed);
  unit.store(static_cast<std::uint16_t>(((was >> 8) + 1) << 8), std::memory_order_release);  // free, next generation
  s.free[state::class_of(word)].push_back(offset);
  --live_;
}

}  // namespace rdmx::far::detail
