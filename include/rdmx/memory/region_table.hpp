// RegionTable: the process-wide, append-only list of registered memory
// regions. A region's index is its name in RemoteLocator{process, region,
// offset, length}: the fabric serves packed rkeys by index and resolves
// locators through get(). Indices are never reused, so a stale locator can
// only ever meet nullptr, never somebody else's memory; index 0 is never
// handed out, so a zero-initialised RemoteLocator names nothing.
//
// Reads (get, find) are lock-free: they sit on the path that resolves
// incoming one-sided calls. add/remove take a mutex; they happen once per
// registered segment. The table does not own the regions: whoever adds a
// region must remove() it before destroying it, and must not destroy it
// while another thread may still be using a pointer obtained from get().
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>

namespace rdmx::transfer {
class MemoryRegion;
}

namespace rdmx::memory {

class RegionTable {
 public:
  static constexpr std::uint32_t no_region = 0;
  static constexpr std::size_t default_capacity = 4096;

  struct Location {
    std::uint32_t region = no_region;
    std::uint64_t offset = 0;
    friend bool operator==(const Location&, const Location&) = default;
  };

  // The table the whole process names its memory by.
  static RegionTable& process();

  // A private table (tests, or a sub-system that keeps its own names).
  explicit RegionTable(std::size_t capacity = default_capacity);
  ~RegionTable();
  RegionTable(const RegionTable&) = delete;
  RegionTable& operator=(const RegionTable&) = delete;

  // Thread-safe. Throws Errc::out_of_memory once `capacity` indices have been used.
  std::uint32_t add(const transfer::MemoryRegion& region);
  // Lock-free. nullptr for index 0, an index never added, or one removed.
  const transfer::MemoryRegion* get(std::uint32_t index) const noexcept;
  // Lock-free. The region holding all of [p, p + n), if any.
  std::optional<Location> find(const void* p, std::size_t n) const noexcept;
  // The region is going away (unmapped); its index stays retired. Unknown indices are ignored.
  void remove(std::uint32_t index) noexcept;

  std::size_t capacity() const noexcept { return capacity_; }
  // Indices handed out so far, plus the reserved index 0.
  std::size_t used() const noexcept { return end_.load(std::memory_order_acquire); }

 private:
  std::size_t capacity_;
  std::unique_ptr<std::atomic<const transfer::MemoryRegion*>[]> slots_;
  std::atomic<std::size_t> end_{1};  // one past the highest index handed out
  std::mutex add_mutex_;
};

}  // namespace rdmx::memory
