// Registered memory. MemoryRegion is local memory mapped with ucp_mem_map
// (registered once, never per transfer) and its packed rkey; RemoteKey is a
// peer's rkey unpacked on one endpoint; RemoteAddress is where a one-sided
// operation lands.
#pragma once
#include <ucp/api/ucp.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace rdmx::transfer {

class Context;
class Endpoint;

class MemoryRegion {
 public:
  // Allocate `length` bytes through UCX (shared memory when shm transports
  // are on, so peers on the node write it with plain stores).
  MemoryRegion(Context& context, std::size_t length);
  // Register memory the caller owns (and keeps alive longer than this).
  MemoryRegion(Context& context, void* address, std::size_t length);
  ~MemoryRegion();
  MemoryRegion(const MemoryRegion&) = delete;
  MemoryRegion& operator=(const MemoryRegion&) = delete;

  std::byte* data() const noexcept { return base_; }
  std::size_t size() const noexcept { return length_; }
  bool contains(const void* p, std::size_t n) const noexcept {
    auto* b = static_cast<const std::byte*>(p);
    return b >= base_ && n <= length_ && b - base_ <= static_cast<std::ptrdiff_t>(length_ - n);
  }
  ucp_mem_h handle() const noexcept { return handle_; }
  const std::vector<std::byte>& packed_rkey() const noexcept { return packed_rkey_; }
  bool allocated_by_ucx() const noexcept { return allocated_; }

 private:
  void init(Context& context, void* address, std::size_t length, bool allocate);
  ucp_context_h context_ = nullptr;
  ucp_mem_h handle_ = nullptr;
  std::byte* base_ = nullptr;
  std::size_t length_ = 0;
  bool allocated_ = false;
  std::vector<std::byte> packed_rkey_;
};

class RemoteKey {
 public:
  RemoteKey() = default;
  RemoteKey(const Endpoint& endpoint, std::span<const std::byte> packed);
  ~RemoteKey();
  RemoteKey(RemoteKey&& other) noexcept : handle_(other.handle_) { other.handle_ = nullptr; }
  RemoteKey& operator=(RemoteKey&& other) noexcept;
  RemoteKey(const RemoteKey&) = delete;
  RemoteKey& operator=(const RemoteKey&) = delete;

  ucp_rkey_h get() const noexcept { return handle_; }
  explicit operator bool() const noexcept { return handle_ != nullptr; }

 private:
  ucp_rkey_h handle_ = nullptr;
};

// A resolved remote address: raw virtual address in the peer plus its rkey.
struct RemoteAddress {
  std::uint64_t address = 0;
  ucp_rkey_h rkey = nullptr;
};

}  // namespace rdmx::transfer
