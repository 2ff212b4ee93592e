// RegistrationCache: registers ordinary memory on the fly for pointer chunks
// (HPX section 3.3: "pointer chunks may be registered on the fly and the
// memory keys passed in the eager header block"), and remembers the
// registrations so that sending from the same buffer again costs a lookup,
// not a kernel call.
//
// - A request is widened to whole pages (registration pins pages) and served
//   by any cached registration covering it, so a sub-range of a registered
//   buffer is a hit.
// - Pinned bytes are bounded by a budget (RDMX_REG_CACHE_BYTES, default
//   256M): when a new registration would exceed it, the least recently used
//   registrations nobody holds are released first. Registrations held by an
//   archive (in flight) are never released. A range larger than the budget,
//   or one that cannot fit beside the registrations in use, is
//   Errc::out_of_memory with a message naming the variable.
// - Memory unmapped by the program (munmap, a large free) drops the
//   registrations over it, through UCX's memory events, so a later buffer at
//   the same address is never sent from stale pinned pages. Without memory
//   events (UCX_MEM_EVENTS=no) tracks_unmaps() is false and the program must
//   call invalidate() before it unmaps memory it sent from.
//
// This is the "hidden" registration HPX warns about (fragmentation pins
// whole pages, the budget is a system-dependent knob); RmaVector and
// RmaValue avoid it by living in registered memory. Thread-safe.
#pragma once
#include <cstddef>
#include <cstdint>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <span>

namespace rdmx::transfer {
class Context;
class MemoryRegion;
}  // namespace rdmx::transfer

namespace rdmx::serial {

class OutputArchive;

struct RegistrationCacheOptions {
  static std::size_t env_budget();  // RDMX_REG_CACHE_BYTES, default 256 MiB
  std::size_t budget_bytes = env_budget();
};

class RegistrationCache {
 public:
  using Options = RegistrationCacheOptions;

  // One registered range of whole pages.
  class Registration {
   public:
    const std::byte* begin() const noexcept { return begin_; }
    std::size_t size() const noexcept { return size_; }
    std::span<const std::byte> packed_rkey() const noexcept;
    const transfer::MemoryRegion& region() const noexcept { return *region_; }

   private:
    friend class RegistrationCache;
    const std::byte* begin_ = nullptr;
    std::size_t size_ = 0;
    std::unique_ptr<transfer::MemoryRegion> region_;
  };
  // Holding one keeps the registration (and its pinned pages) alive, also
  // after the cache dropped it or was destroyed. The Context must outlive it.
  using Handle = std::shared_ptr<const Registration>;

  struct Stats {
    std::uint64_t hits = 0;
    std::uint64_t misses = 0;
    std::uint64_t evictions = 0;      // released to stay within the budget
    std::uint64_t invalidations = 0;  // dropped because their memory was unmapped
    std::size_t entries = 0;
    std::size_t pinned_bytes = 0;     // of the cached registrations
  };

  // Throws Errc::invalid_argument for a zero budget.
  explicit RegistrationCache(transfer::Context& context, Options options = {});
  ~RegistrationCache();
  RegistrationCache(const RegistrationCache&) = delete;
  RegistrationCache& operator=(const RegistrationCache&) = delete;

  // A registration covering [p, p + n), n > 0. Throws Errc::out_of_memory
  // (budget), Errc::transport (UCX refused) or Errc::invalid_argument (n == 0).
  Handle acquire(const void* p, std::size_t n);
  // Forget the registrations overlapping [p, p + n) (holders keep theirs).
  void invalidate(const void* p, std::size_t n);

  Stats stats() const;
  std::size_t budget() const noexcept { return budget_; }
  bool tracks_unmaps() const noexcept { return tracks_unmaps_; }

 private:
  struct Entry;
  struct Unmaps;
  using Lru = std::list<Entry>;  // most recently used first
  struct Entry {
    std::uintptr_t begin = 0, end = 0;
    std::shared_ptr<Registration> registration;  // in use while anyone else holds it
    std::multimap<std::uintptr_t, Lru::iterator>::iterator by_begin;
  };

  // All with mutex_ held.
  void drain_unmaps();
  void drop_overlapping(std::uintptr_t begin, std::uintptr_t end);
  void erase(Lru::iterator it);
  void make_room(std::size_t bytes);

  transfer::Context& context_;
  std::size_t budget_;
  std::size_t page_;
  mutable std::mutex mutex_;
  Lru lru_;
  std::multimap<std::uintptr_t, Lru::iterator> by_begin_;
  std::size_t longest_ = 0;  // the longest cached range: how far back a covering entry can start
  Stats stats_;
  // Unmap events arrive inside munmap on any thread, possibly while this
  // thread holds mutex_ (UCX can unmap inside a registration call), so they
  // only queue the range; acquire() applies the queue before it looks up.
  std::unique_ptr<Unmaps> unmaps_;
  bool tracks_unmaps_ = false;
};

// Register every pointer chunk of `archive` that has no rkey yet through
// `cache` and attach the packed rkeys (the archive keeps the registrations
// until it is destroyed). Call it before flatten().
void register_pointer_chunks(OutputArchive& archive, RegistrationCache& cache);

}  // namespace rdmx::serial
