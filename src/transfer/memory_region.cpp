#include "rdmx/transfer/memory_region.hpp"

#include <cstring>

#include "rdmx/transfer/context.hpp"
#include "rdmx/transfer/endpoint.hpp"
#include "rdmx/transfer/status.hpp"

namespace rdmx::transfer {

MemoryRegion::MemoryRegion(Context& context, std::size_t length) { init(context, nullptr, length, true); }

MemoryRegion::MemoryRegion(Context& context, void* address, std::size_t length) {
  init(context, address, length, false);
}

void MemoryRegion::init(Context& context, void* address, std::size_t length, bool allocate) {
  if (length == 0) throw Error(Errc::invalid_argument, "cannot register an empty memory region");
  context_ = context.get();
  ucp_mem_map_params_t params{};
  params.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH | UCP_MEM_MAP_PARAM_FIELD_FLAGS;
  params.address = address;
  params.length = length;
  params.flags = allocate ? UCP_MEM_MAP_ALLOCATE : 0;
  check(ucp_mem_map(context_, &params, &handle_), allocate ? "ucp_mem_map (allocate)" : "ucp_mem_map (register)");
  ucp_mem_attr_t attr{};
  attr.field_mask = UCP_MEM_ATTR_FIELD_ADDRESS | UCP_MEM_ATTR_FIELD_LENGTH;
  check(ucp_mem_query(handle_, &attr), "ucp_mem_query");
  base_ = static_cast<std::byte*>(attr.address);
  length_ = length;
  allocated_ = allocate;
  void* packed = nullptr;
  std::size_t packed_length = 0;
  check(ucp_rkey_pack(context_, handle_, &packed, &packed_length), "ucp_rkey_pack");
  packed_rkey_.resize(packed_length);
  std::memcpy(packed_rkey_.data(), packed, packed_length);
  ucp_rkey_buffer_release(packed);
}

MemoryRegion::~MemoryRegion() {
  if (handle_ != nullptr) ucp_mem_unmap(context_, handle_);
}

RemoteKey::RemoteKey(const Endpoint& endpoint, std::span<const std::byte> packed) {
  endpoint.check_alive();
  check(ucp_ep_rkey_unpack(endpoint.get(), packed.data(), &handle_), "ucp_ep_rkey_unpack from " + endpoint.peer_name());
}

RemoteKey::~RemoteKey() {
  if (handle_ != nullptr) ucp_rkey_destroy(handle_);
}

RemoteKey& RemoteKey::operator=(RemoteKey&& other) noexcept {
  if (this != &other) {
    if (handle_ != nullptr) ucp_rkey_destroy(handle_);
    handle_ = other.handle_;
    other.handle_ = nullptr;
  }
  return *this;
}

}  // namespace rdmx::transfer
