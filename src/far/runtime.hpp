// A process's far memory (AIFM's FarMemManager), as its far::Manager makes
// it and far pointers reach it (detail::runtime()): the configuration, the
// device to the servers, the client-side allocator over their regions and
// the cache. The word-level operations of far/detail/runtime.hpp run here
// (manager.cpp); the mechanisms they use have files of their own: the
// cache and CLOCK (cache.hpp), the evacuator (evacuator.hpp), batches of
// misses in flight (batch.hpp). The Manager's collective set-up is
// setup.cpp, the scopes' pins scope.cpp, and how the fabric reaches the
// runtime (its layer: progress, quiet, failures) layer.cpp.
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "cache.hpp"
#include "rdmx/far/config.hpp"
#include "rdmx/far/detail/runtime.hpp"
#include "rdmx/far/device.hpp"
#include "rdmx/far/manager.hpp"
#include "remote_allocator.hpp"

namespace rdmx {
class Job;
}

namespace rdmx::far::detail {

class FarLayer;

class Runtime {
 public:
  // `device` is the inner one (replicated here, config.replication);
  // `cache_memory` holds config.cache_bytes; this process owns share
  // `share` of `shares` of every server's region. `job`: nullptr in-process.
  Runtime(Config config, Job* job, std::unique_ptr<Device> device, std::vector<RemoteLocator> regions, std::size_t share,
          std::size_t shares, std::byte* cache_memory, bool serving);
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  const Config& config() const noexcept { return config_; }
  Device& device() noexcept { return *device_; }
  Cache& cache() noexcept { return cache_; }
  const Cache& cache() const noexcept { return cache_; }
  const std::vector<RemoteLocator>& regions() const noexcept { return regions_; }
  bool serving() const noexcept { return serving_; }
  Stats stats() const;

  // The operations of far/detail/runtime.hpp (manager.cpp).
  void* place(StateWord& word, std::size_t bytes, const std::size_t* server);
  void allocate_remote(std::size_t server, StateWord& word, std::size_t bytes);
  void free(StateWord& word);
  void move(StateWord& from, StateWord& to) noexcept;
  void* deref(StateWord& word, std::size_t bytes, DerefScope& scope, Access access);
  InFlight deref_start(std::span<StateWord* const> words, std::size_t bytes, DerefScope& scope, Access access,
                       std::span<void*> out);
  Future<void*> deref_async(StateWord& word, std::size_t bytes, DerefScope& scope, Access access);
  std::size_t prefetch(std::span<StateWord* const> words, std::size_t bytes, DerefScope& scope, std::span<bool> started) noexcept;
  void count_prefetch_hits(std::size_t n) noexcept { prefetch_hits_.fetch_add(n, std::memory_order_relaxed); }
  // Throws Errc::invalid_argument if a claim's block no longer holds its
  // object (freed, reallocated): checked again after a read has landed.
  void check_current(std::span<const Claim> claims) const;
  // Their objects have landed: local words, pinned in `scope`.
  void publish(std::span<const Claim> claims, DerefScope& scope, Access access);

  // The job reported `process` failed (layer.cpp).
  void process_failed(std::uint32_t process) noexcept;
  // The job's far layer it is attached to (layer.cpp); nullptr in a process
  // without a Job, or once the job's layers are gone.
  std::atomic<FarLayer*> layer{nullptr};

 private:
  // The hit path: pins a local object in `scope` and returns it; for a
  // remote one, claims its fetch (the word turns busy), sets `claimed` to
  // its remote word and returns nullptr. Waits while another thread
  // fetches or evicts the object.
  void* pin_or_claim(StateWord& word, std::size_t bytes, DerefScope& scope, Access access, std::uint64_t& claimed);
  // Errc::invalid_argument naming the refused pointer: null or from an
  // earlier Manager; a far block that no longer holds its object; a frame
  // that is not its object's.
  [[noreturn]] void refuse_tag(std::uint64_t s, const char* what) const;
  [[noreturn]] void refuse_remote(std::uint64_t remote, RemoteAllocator::Standing standing, const char* what) const;
  [[noreturn]] void refuse_frame(std::uint64_t s, std::uint32_t frame, const char* why) const;

  Config config_;
  Job* job_;
  std::unique_ptr<Device> device_;
  std::vector<RemoteLocator> regions_;  // job-backed: the published ones, in server order
  bool serving_;
  // This Manager's epoch in the word's field (state::epoch_bits): every
  // word it makes carries it, and a dereference compares it.
  std::uint64_t epoch_;
  bool check_ = config_.check;  // RDMX_FAR_CHECK: hits check the block's generation too
  RemoteAllocator remote_;  // under the cache's lock (its generations are read without it)
  std::unique_ptr<std::atomic<bool>[]> lost_;  // per server in config_.servers: its process failed
  std::atomic<std::uint64_t> prefetched_{0};
  std::atomic<std::uint64_t> prefetch_hits_{0};
  Cache cache_;  // last: its evacuator stops before the rest goes
};

}  // namespace rdmx::far::detail
