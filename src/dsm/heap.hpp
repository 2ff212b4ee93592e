// The heap's views (docs/dsm.md, "The heap"), all of one memfd but the
// twin area:
//   app   at the address every process agreed on; its protection is the
//         block's state (none: invalid, read: clean, read+write: dirty);
//   rw    the runtime view, anywhere, always writable: the runtime installs
//         fetched data through it, never through the app view;
//   twin  anonymous and private: a dirty block's copy from before its first
//         write.
// Protection changes are mprotect calls, never remaps (UCX hooks mmap).
#pragma once
#include <cstddef>
#include <cstdint>

#include "rdmx/dsm/config.hpp"

namespace rdmx {
class Job;
}

namespace rdmx::dsm {

class Heap {
 public:
  // Collective: maps the views, the app view at one address in every
  // process (Config::address, or one process 0 proposes). `local`: a job of
  // one process, whose app view is read-write from the start.
  Heap(Job& job, const Config& config, bool local);
  ~Heap();
  Heap(const Heap&) = delete;
  Heap& operator=(const Heap&) = delete;

  std::byte* base() const noexcept { return app_; }
  std::size_t bytes() const noexcept { return bytes_; }
  bool contains(const void* p) const noexcept {
    auto* b = static_cast<const std::byte*>(p);
    return b >= app_ && b < app_ + bytes_;
  }
  std::uint32_t block_of(const void* p) const noexcept {
    return static_cast<std::uint32_t>((static_cast<const std::byte*>(p) - app_) / block_bytes_);
  }
  std::size_t offset(std::uint32_t block) const noexcept { return std::size_t{block} * block_bytes_; }
  std::byte* rw(std::uint32_t block) const noexcept { return rw_ + offset(block); }
  std::byte* twin(std::uint32_t block) const noexcept { return twin_ + offset(block); }
  // Sets the app view's protection of blocks first .. first+count-1.
  void protect(std::uint32_t first, std::uint32_t count, int protection) const;

 private:
  void map_app(Job& job, const Config& config, bool local);
  void unmap() noexcept;

  std::size_t bytes_, block_bytes_;
  int memfd_ = -1;
  std::byte* app_ = nullptr;
  std::byte* rw_ = nullptr;
  std::byte* twin_ = nullptr;
};

}  // namespace rdmx::dsm
