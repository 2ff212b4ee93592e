#include "large_landing.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>

#include "rdmx/core/error.hpp"

namespace rdmx::parcel {

namespace {
std::size_t page_size() {
  static const std::size_t page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  return page;
}
}  // namespace

struct LargeLanding::Spare {
  explicit Spare(std::size_t limit) : limit(limit) {}
  const std::size_t limit;
  mutable std::mutex mutex;
  void* address = nullptr;
  std::size_t bytes = 0;
  std::size_t mapped = 0;  // in use and spare

  // A mapping nobody holds any more: keep the larger of it and the spare.
  void give_back(void* p, std::size_t n) {
    void* drop = p;
    std::size_t drop_bytes = n;
    {
      std::lock_guard lock(mutex);
      if (n > bytes) {
        std::swap(drop, address);
        std::swap(drop_bytes, bytes);
      }
      if (drop != nullptr) mapped -= drop_bytes;
    }
    if (drop != nullptr) munmap(drop, drop_bytes);
  }
  ~Spare() {
    if (address != nullptr) munmap(address, bytes);
  }
};

LargeLanding::LargeLanding(std::size_t limit) : spare_(std::make_shared<Spare>(limit)) {
  if (limit == 0) throw Error(Errc::invalid_argument, "large landing: a limit of 0 bytes");
}
LargeLanding::~LargeLanding() = default;

std::shared_ptr<std::byte> LargeLanding::allocate(std::size_t n) {
  if (n == 0 || n > ~std::size_t{0} - page_size())
    throw Error(Errc::invalid_argument, "large landing: a size of " + std::to_string(n) + " bytes");
  const std::size_t bytes = (n + page_size() - 1) / page_size() * page_size();
  void* p = nullptr;
  std::size_t mapped = bytes;
  void* dropped = nullptr;  // the spare, given up to stay within the limit
  std::size_t dropped_bytes = 0;
  {
    std::lock_guard lock(spare_->mutex);
    if (spare_->address != nullptr && spare_->bytes >= bytes) {
      // The spare serves any chunk it can hold: its pages are faulted already.
      p = spare_->address;
      mapped = spare_->bytes;
      spare_->address = nullptr;
      spare_->bytes = 0;
    } else {
      const std::size_t in_use = spare_->mapped - spare_->bytes;
      if (bytes > spare_->limit - std::min(in_use, spare_->limit))
        throw Error(Errc::out_of_memory, "no landing memory for a chunk of " + std::to_string(n) + " bytes: " +
                                             std::to_string(in_use) + " bytes hold landed chunks still in use, and " +
                                             std::to_string(bytes) + " more would exceed the limit of " +
                                             std::to_string(spare_->limit) + " bytes (RDMX_ARENA_MAX)");
      if (spare_->mapped + bytes > spare_->limit) {  // only with the spare: give it up
        dropped = spare_->address;
        dropped_bytes = spare_->bytes;
        spare_->mapped = in_use;
        spare_->address = nullptr;
        spare_->bytes = 0;
      }
      spare_->mapped += bytes;  // reserved before mapping, so that concurrent pulls see it
    }
  }
  if (dropped != nullptr) munmap(dropped, dropped_bytes);
  if (p == nullptr) {
    p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
      const int error = errno;
      {
        std::lock_guard lock(spare_->mutex);
        spare_->mapped -= bytes;
      }
      throw Error(Errc::out_of_memory, "no landing memory for a chunk of " + std::to_string(n) + " bytes: mmap: " +
                                           std::strerror(error));
    }
  }
  return std::shared_ptr<std::byte>(static_cast<std::byte*>(p),
                                    [spare = spare_, mapped](std::byte* q) { spare->give_back(q, mapped); });
}

std::size_t LargeLanding::spare_bytes() const {
  std::lock_guard lock(spare_->mutex);
  return spare_->bytes;
}

std::size_t LargeLanding::mapped_bytes() const {
  std::lock_guard lock(spare_->mutex);
  return spare_->mapped;
}

}  // namespace rdmx::parcel
