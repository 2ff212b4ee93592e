// The background evacuator (AIFM's evacuator, without its stop-the-world
// phase): a thread that keeps the free part of the cache between two marks
// (Config::free_low and free_high), evicting with the cache's own CLOCK and
// write-backs (cache.hpp) ahead of the misses, so that a miss usually finds
// a free frame instead of paying for a write-back inline. It starts with
// the first miss that needs it (a process that never fills its cache, a
// server's, runs no thread), is woken by later ones and is stopped and
// joined by its destructor, after its write-back in flight has ended.
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

#include "rdmx/far/config.hpp"
#include "rdmx/transfer/remote_locator.hpp"

namespace rdmx {
class Job;
}

namespace rdmx::far::detail {

class Cache;

class Evacuator {
 public:
  // How the share of recent evictions that wrote a dirty victim back is
  // counted (Cache's moving average): this is all of them.
  static constexpr int dirty_share_scale = 256;

  // `cache` is under construction: only its size is read here.
  Evacuator(Cache& cache, const Config& config, Job* job, const std::vector<RemoteLocator>& regions);
  ~Evacuator();
  Evacuator(const Evacuator&) = delete;
  Evacuator& operator=(const Evacuator&) = delete;

  // Under the cache's lock. Whether it evicts at all (its marks are set).
  bool enabled() const noexcept { return free_low_ != 0; }
  // Whether `free` bytes are below the low mark, where a miss wakes it.
  bool below_low(std::size_t free) const noexcept { return free_low_ != 0 && free < free_low_; }
  // A miss of `size_class` wants a round.
  void want(std::uint32_t size_class);
  // It waits for the cache's lock: threads about to evict inline let it in.
  bool knocking() const noexcept { return knocking_.load(std::memory_order_relaxed); }
  std::uint64_t evictions() const noexcept { return evictions_; }
  std::uint64_t failures() const noexcept { return failures_; }

  // Teardown: a write-back in flight ends (landed or failed) before the
  // thread does, so nothing it touches is freed under it.
  void stop() noexcept;

 private:
  // Whether it watches for work between rounds (evacuator_watch_time).
  bool watches() const;
  // Evacuator::automatic: only where its write-backs complete without this
  // process's service thread.
  bool fits() const;
  void lock_as_evacuator(std::unique_lock<std::mutex>& lock);
  void run();

  Cache& cache_;
  const Config& config_;
  Job* job_;
  const std::vector<RemoteLocator>& regions_;
  std::size_t free_low_ = 0;  // bytes; 0: no evacuator
  std::size_t free_high_ = 0;
  std::uint64_t evictions_ = 0;  // under the cache's lock
  std::uint64_t failures_ = 0;
  std::thread thread_;  // started under the cache's lock
  // It sleeps on a mutex of its own, so that waking it never waits for the
  // cache's lock.
  std::mutex wake_mutex_;
  std::condition_variable wake_;
  // A line of their own: the watching evacuator polls them while misses
  // update the fields around.
  alignas(64) std::atomic<bool> wanted_{false};  // set and cleared under wake_mutex_
  std::atomic<bool> stopping_{false};
  // The evacuator waits for the cache's lock. Threads that hold it in turn,
  // evicting inline, would otherwise keep it from ever getting in (a mutex
  // is not fair): they step aside instead.
  alignas(64) std::atomic<bool> knocking_{false};
};

}  // namespace rdmx::far::detail
