#include "evacuator.hpp"

#include <algorithm>
#include <chrono>
#include <exception>

#include "cache.hpp"
#include "rdmx/core/error.hpp"
#include "rdmx/core/log.hpp"
#include "rdmx/fabric/job.hpp"
#include "rdmx/fabric/rma.hpp"

namespace rdmx::far::detail {
namespace {

// The pause after a round that could not free enough: every object pinned,
// busy or on its way out (the next misses would otherwise wake it at once
// into another fruitless sweep of the whole cache), or a write-back failed
// (a lost server). It doubles while rounds keep ending so, up to the
// longest: the evacuator neither spins nor gives up for good.
constexpr auto pause_after_shortfall = std::chrono::milliseconds(1);
constexpr auto pause_after_failure = std::chrono::milliseconds(10);
constexpr auto longest_pause = std::chrono::seconds(1);
// After a round that reached its goal, the evacuator watches for the next
// request this long before it sleeps in the kernel. Waking a sleeping thread
// is a system call and, in a VM, an interrupt to another core, which the
// miss that wakes it pays for (docs/results/far.md). A stream of misses
// keeps it awake; a program that stops missing leaves it asleep after this
// long. By default (Watch::automatic) it watches only where the machine has
// a core to spare for each process's service thread and evacuator
// (Job::spare_cores): where cores are short its watch takes the core from
// the computation.
constexpr auto watch_time = std::chrono::microseconds(200);
// Waking the sleeping evacuator costs the miss that wakes it more than a few
// inline evictions (a system call, and the other process's threads or the
// miss's own losing the core to it on a machine short of cores). It is woken
// only for a round that frees at least this many objects of the size the
// miss needs: with 4 KiB objects in a 128 KiB cache the marks are two
// objects apart, and every other miss would wake it (docs/results/far.md).
// A watching one costs a store.
constexpr std::size_t objects_worth_a_wake = 8;
// Nor while the victims are clean: evicting a clean object inline is a few
// stores, and a wake-up costs more than that saves. Only while at least a
// quarter of the recent evictions wrote a dirty victim back.
constexpr int dirty_share_worth_a_wake = Evacuator::dirty_share_scale / 4;

}  // namespace

Evacuator::Evacuator(Cache& cache, const Config& config, Job* job, const std::vector<RemoteLocator>& regions)
    : cache_(cache), config_(config), job_(job), regions_(regions) {
  if (config.evacuator == far::Evacuator::off) return;
  const double budget = static_cast<double>(cache.units() * min_object_bytes);
  free_low_ = static_cast<std::size_t>(budget * config.free_low);
  free_high_ = std::max(free_low_, static_cast<std::size_t>(budget * config.free_high));
}

Evacuator::~Evacuator() { stop(); }

// Started on first need, so a process that never fills its cache, a
// server's, runs no thread.
void Evacuator::want(std::uint32_t size_class) {
  if (wanted_.load(std::memory_order_relaxed) || stopping_.load(std::memory_order_relaxed)) return;
  if (config_.evacuator == far::Evacuator::automatic && !watches() &&
      (free_high_ - free_low_ < objects_worth_a_wake * class_bytes(size_class) ||
       cache_.recent_dirty_share_ < dirty_share_worth_a_wake))
    return;
  if (!thread_.joinable()) {
    if (!fits()) {
      free_low_ = 0;  // for good: every eviction inline
      return;
    }
    try {
      thread_ = std::thread([this] { run(); });
    } catch (const std::exception& e) {
      // No thread to be had: misses keep evicting inline, as with the evacuator off.
      rdmx::log(rdmx::LogLevel::warn, "far: cannot start the evacuator thread, evicting on demand only: %s", e.what());
      free_low_ = 0;
      return;
    }
  }
  {
    std::lock_guard w(wake_mutex_);
    wanted_.store(true, std::memory_order_relaxed);
  }
  wake_.notify_one();
}

bool Evacuator::watches() const {
  return config_.evacuator_watch == Watch::on ||
         (config_.evacuator_watch == Watch::automatic && job_ != nullptr &&
          job_->spare_cores() >= 2 * job_->layout().processes_per_machine);
}

// Over emulated RMA (TCP) or the two-sided path the shared worker it sends
// through needs the service thread's progress, and on a machine short of
// cores the waits for it made misses far slower than inline write-backs
// (docs/results/far.md).
bool Evacuator::fits() const {
  if (config_.evacuator == far::Evacuator::on || job_ == nullptr) return true;
  if (config_.path != Path::one_sided) return false;
  try {
    for (const RemoteLocator& region : regions_)
      if (rma_emulated(region.process)) return false;
  } catch (const Error&) {
    return false;  // a server already lost: not the moment to start a thread
  }
  return true;
}

void Evacuator::lock_as_evacuator(std::unique_lock<std::mutex>& lock) {
  knocking_.store(true, std::memory_order_relaxed);
  lock.lock();
  knocking_.store(false, std::memory_order_relaxed);
}

// Its write-backs are the cache's, as inline ones: the victim is busy while
// it travels, so a dereference of it waits, and the lock is released
// meanwhile. Not a worker thread of the job, it sends through the process's
// shared service worker (fabric::Runtime's calling_context for threads of
// the program's own), whose progress the service thread drives.
void Evacuator::run() {
  auto pause = std::chrono::milliseconds(0);  // after a round that fell short; 0: the last one did not
  const bool watching = watches();
  bool failing = false;
  std::unique_lock lock(cache_.mutex(), std::defer_lock);
  for (;;) {
    if (watching) {
      const auto until = std::chrono::steady_clock::now() + watch_time;
      while (!wanted_.load(std::memory_order_acquire) && !stopping_.load(std::memory_order_relaxed) &&
             std::chrono::steady_clock::now() < until) {
      }
    }
    {
      std::unique_lock w(wake_mutex_);
      wake_.wait(w, [&] { return wanted_.load() || stopping_.load(); });
    }
    if (stopping_.load()) return;
    lock_as_evacuator(lock);
    bool evicted = false, failed = false;
    // A round frees up to the high mark, and at least the gap between the
    // marks: woken by a miss that found no frame of its class while the
    // free bytes lay in other classes' slabs, it still makes room.
    const std::size_t released_before = cache_.released_bytes_;
    const auto short_of_goal = [&] {
      return cache_.free_bytes() < free_high_ || cache_.released_bytes_ - released_before < free_high_ - free_low_;
    };
    while (!stopping_.load(std::memory_order_relaxed) && short_of_goal()) {
      Cache::Sweep sweep = Cache::Sweep::none;
      try {
        sweep = cache_.evict_one(lock);
      } catch (const std::exception& e) {
        // The victim stays local and dirty (try_evict); a program that
        // needs its server learns of the loss from its own operations.
        ++failures_;
        if (!failing) rdmx::log(rdmx::LogLevel::warn, "far: the evacuator's write-back failed, retrying with back-off: %s", e.what());
        failed = failing = true;
        break;
      }
      if (sweep != Cache::Sweep::evicted) break;
      ++evictions_;
      evicted = true;
      failing = false;
      // Misses waiting for the lock get their turn between victims.
      lock.unlock();
      lock_as_evacuator(lock);
    }
    const bool enough = !short_of_goal();
    lock.unlock();
    {
      std::lock_guard w(wake_mutex_);
      wanted_.store(false, std::memory_order_relaxed);
    }
    if (enough || stopping_.load()) {
      pause = {};
      continue;
    }
    if (failed)
      pause = pause.count() == 0 || evicted ? std::chrono::duration_cast<std::chrono::milliseconds>(pause_after_failure)
                                            : std::min<std::chrono::milliseconds>(pause * 2, longest_pause);
    else
      pause = pause.count() == 0 || evicted ? pause_after_shortfall : std::min<std::chrono::milliseconds>(pause * 2, longest_pause);
    {
      std::unique_lock w(wake_mutex_);
      if (wake_.wait_for(w, pause, [&] { return stopping_.load(); })) return;
    }
    // Still short of free space: go again without waiting for a miss.
    lock_as_evacuator(lock);
    const bool short_of_space = cache_.free_bytes() < free_low_;
    lock.unlock();
    if (short_of_space) {
      std::lock_guard w(wake_mutex_);
      wanted_.store(true, std::memory_order_relaxed);
    }
  }
}

void Evacuator::stop() noexcept {
  {
    std::lock_guard w(wake_mutex_);
    stopping_.store(true);
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

}  // namespace rdmx::far::detail
