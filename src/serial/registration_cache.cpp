#include "rdmx/serial/registration_cache.hpp"

#include <ucm/api/ucm.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <string>
#include <utility>

#include "settings.hpp"
#include "rdmx/core/error.hpp"
#include "rdmx/serial/output_archive.hpp"
#include "rdmx/transfer/memory_region.hpp"

namespace rdmx::serial {

namespace {

std::string mib(std::size_t bytes) {
  return std::to_string(bytes >> 20) + "." + std::to_string(((bytes & ((1u << 20) - 1)) * 10) >> 20) + " MiB";
}
}  // namespace

// Unmapped ranges queued by the UCX memory event handler. The handler runs
// inside munmap, so it takes no mutex a registration call might hold and
// allocates nothing; a full queue degrades to "drop every unheld entry".
struct RegistrationCache::Unmaps {
  std::atomic_flag busy = ATOMIC_FLAG_INIT;
  std::array<std::pair<std::uintptr_t, std::uintptr_t>, 64> ranges{};
  std::size_t count = 0;
  bool overflowed = false;
  // Addresses the cache has ever covered: unmaps elsewhere are ignored at once.
  std::atomic<std::uintptr_t> low{~std::uintptr_t{0}};
  std::atomic<std::uintptr_t> high{0};

  void lock() noexcept {
    while (busy.test_and_set(std::memory_order_acquire)) {
    }
  }
  void unlock() noexcept { busy.clear(std::memory_order_release); }

  static void on_event(ucm_event_type_t, ucm_event_t* event, void* arg) {
    auto* self = static_cast<Unmaps*>(arg);
    const auto begin = reinterpret_cast<std::uintptr_t>(event->vm_unmapped.address);
    const std::uintptr_t end = begin + event->vm_unmapped.size;
    if (end <= self->low.load(std::memory_order_relaxed) || begin >= self->high.load(std::memory_order_relaxed)) return;
    self->lock();
    if (self->count < self->ranges.size())
      self->ranges[self->count++] = {begin, end};
    else
      self->overflowed = true;
    self->unlock();
  }
};

std::size_t RegistrationCacheOptions::env_budget() { return rdmx_serial_settings.number("RDMX_REG_CACHE_BYTES"); }

std::span<const std::byte> RegistrationCache::Registration::packed_rkey() const noexcept {
  return region_->packed_rkey();
}

RegistrationCache::RegistrationCache(transfer::Context& context, Options options)
    : context_(context),
      budget_(options.budget_bytes),
      page_(static_cast<std::size_t>(sysconf(_SC_PAGESIZE))),
      unmaps_(std::make_unique<Unmaps>()) {
  if (budget_ == 0) throw Error(Errc::invalid_argument, "RDMX_REG_CACHE_BYTES: the registration cache needs a budget above 0");
  tracks_unmaps_ = ucm_set_event_handler(UCM_EVENT_VM_UNMAPPED, 0, &Unmaps::on_event, unmaps_.get()) == UCS_OK;
}

RegistrationCache::~RegistrationCache() {
  // Returns once no handler call is running.
  if (tracks_unmaps_) ucm_unset_event_handler(UCM_EVENT_VM_UNMAPPED, &Unmaps::on_event, unmaps_.get());
}

RegistrationCache::Handle RegistrationCache::acquire(const void* p, std::size_t n) {
  if (n == 0) throw Error(Errc::invalid_argument, "RegistrationCache::acquire: an empty range");
  const auto address = reinterpret_cast<std::uintptr_t>(p);
  if (n > ~std::uintptr_t{0} - address - page_) throw Error(Errc::invalid_argument, "RegistrationCache::acquire: range wraps around");
  const std::uintptr_t begin = address / page_ * page_;
  const std::uintptr_t end = (address + n + page_ - 1) / page_ * page_;
  const std::size_t bytes = end - begin;
  if (bytes > budget_)
    throw Error(Errc::out_of_memory, "registration cache: a range of " + std::to_string(n) + " bytes (" + mib(bytes) +
                                         " in whole pages) exceeds the budget of " + mib(budget_) +
                                         "; raise RDMX_REG_CACHE_BYTES or keep the data in registered memory (RmaVector)");

  std::lock_guard lock(mutex_);
  drain_unmaps();
  // A covering entry starts at most `longest_` bytes before `begin`.
  for (auto it = by_begin_.upper_bound(begin); it != by_begin_.begin();) {
    --it;
    if (it->first + longest_ < begin) break;
    Entry& entry = *it->second;
    if (entry.end >= end) {
      lru_.splice(lru_.begin(), lru_, it->second);
      ++stats_.hits;
      return entry.registration;
    }
  }
  ++stats_.misses;
  make_room(bytes);
  auto registration = std::make_shared<Registration>();
  registration->region_ =
      std::make_unique<transfer::MemoryRegion>(context_, reinterpret_cast<void*>(begin), bytes);
  registration->begin_ = reinterpret_cast<const std::byte*>(begin);
  registration->size_ = bytes;

  lru_.push_front(Entry{begin, end, registration, {}});
  lru_.front().by_begin = by_begin_.emplace(begin, lru_.begin());
  longest_ = std::max(longest_, bytes);
  stats_.pinned_bytes += bytes;
  ++stats_.entries;
  // Widen the range the unmap handler looks at (it only ever grows).
  if (begin < unmaps_->low.load(std::memory_order_relaxed)) unmaps_->low.store(begin, std::memory_order_relaxed);
  if (end > unmaps_->high.load(std::memory_order_relaxed)) unmaps_->high.store(end, std::memory_order_relaxed);
  return registration;
}

void RegistrationCache::make_room(std::size_t bytes) {
  for (auto it = lru_.end(); stats_.pinned_bytes + bytes > budget_ && it != lru_.begin();) {
    --it;
    if (it->registration.use_count() > 1) continue;  // an archive holds it: in flight
    auto older = it;
    ++it;  // erase invalidates only `older`
    erase(older);
    ++stats_.evictions;
  }
  if (stats_.pinned_bytes + bytes > budget_)
    throw Error(Errc::out_of_memory, "registration cache: " + mib(stats_.pinned_bytes) +
                                         " are pinned by registrations in use; " + mib(bytes) +
                                         " more would exceed the budget of " + mib(budget_) +
                                         " (RDMX_REG_CACHE_BYTES): wait for transfers to finish or raise it");
}

void RegistrationCache::erase(Lru::iterator it) {
  stats_.pinned_bytes -= it->end - it->begin;
  --stats_.entries;
  by_begin_.erase(it->by_begin);
  lru_.erase(it);  // the last reference unmaps it; a holder's reference keeps it until released
}

void RegistrationCache::invalidate(const void* p, std::size_t n) {
  const auto begin = reinterpret_cast<std::uintptr_t>(p);
  std::lock_guard lock(mutex_);
  drain_unmaps();
  drop_overlapping(begin, begin + n);
}

void RegistrationCache::drop_overlapping(std::uintptr_t begin, std::uintptr_t end) {
  for (auto it = lru_.begin(); it != lru_.end();) {
    auto next = std::next(it);
    if (it->begin < end && begin < it->end) {
      erase(it);
      ++stats_.invalidations;
    }
    it = next;
  }
}

void RegistrationCache::drain_unmaps() {
  std::array<std::pair<std::uintptr_t, std::uintptr_t>, 64> ranges;
  unmaps_->lock();
  const std::size_t count = unmaps_->count;
  const bool overflowed = unmaps_->overflowed;
  std::copy_n(unmaps_->ranges.begin(), count, ranges.begin());
  unmaps_->count = 0;
  unmaps_->overflowed = false;
  unmaps_->unlock();
  if (overflowed) {
    drop_overlapping(0, ~std::uintptr_t{0});
    return;
  }
  for (std::size_t i = 0; i < count; ++i) drop_overlapping(ranges[i].first, ranges[i].second);
}

RegistrationCache::Stats RegistrationCache::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

void register_pointer_chunks(OutputArchive& archive, RegistrationCache& cache) {
  const auto chunks = archive.out_of_line_chunks();
  for (std::size_t i = 0; i < chunks.size(); ++i) {
    if (chunks[i].kind != ChunkKind::pointer || chunks[i].rkey_length != 0) continue;
    RegistrationCache::Handle registration = cache.acquire(chunks[i].data, chunks[i].size);
    archive.attach_rkey(i, registration->packed_rkey(), registration);
  }
}

}  // namespace rdmx::serial
