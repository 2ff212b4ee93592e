#include "large_landing.hpp"

#include <sys/mman.h>
#include <unistd.h>

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
  std::mutex mutex;
  void* address = nullptr;
  std::size_t bytes = 0;

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
    }
    if (drop != nullptr) munmap(drop, drop_bytes);
  }
  ~Spare() {
    if (address != nullptr) munmap(address, bytes);
  }
};

LargeLanding::LargeLanding() : spare_(std::make_shared<Spare>()) {}
LargeLanding::~LargeLanding() = default;

std::shared_ptr<std::byte> LargeLanding::allocate(std::size_t n) {
  if (n == 0 || n > ~std::size_t{0} - page_size())
    throw Error(Errc::invalid_argument, "large landing: a size of " + std::to_string(n) + " bytes");
  const std::size_t bytes = (n + page_size() - 1) / page_size() * page_size();
  void* p = nullptr;
  std::size_t mapped = bytes;
  {
    // The spare serves any chunk it can hold: its pages are faulted already.
    std::lock_guard lock(spare_->mutex);
    if (spare_->address != nullptr && spare_->bytes >= bytes) {
      p = spare_->address;
      mapped = spare_->bytes;
      spare_->address = nullptr;
      spare_->bytes = 0;
    }
  }
  if (p == nullptr) {
    p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
      throw Error(Errc::out_of_memory, "no landing memory for a chunk of " + std::to_string(n) + " bytes: mmap: " +
                                           std::strerror(errno));
  }
  return std::shared_ptr<std::byte>(static_cast<std::byte*>(p),
                                    [spare = spare_, mapped](std::byte* q) { spare->give_back(q, mapped); });
}

std::size_t LargeLanding::spare_bytes() const {
  std::lock_guard lock(spare_->mutex);
  return spare_->bytes;
}

}  // namespace rdmx::parcel
