#include "rdmx/core/log.hpp"
#include "rdmx/far/manager.hpp"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "rdmx/core/error.hpp"
#include "rdmx/fabric/job.hpp"
#include "rdmx/fabric/rma.hpp"
#include "rdmx/far/scope.hpp"
#include "rdmx/far/state.hpp"
#include "rdmx/memory/arena.hpp"
#include "remote_allocator.hpp"
#include "served_region.hpp"
#include "slab_cache.hpp"

namespace rdmx::far {
namespace {

std::atomic<Manager*> current_manager{nullptr};

// How long a thread that needs a cache frame waits for other threads' scopes
// to unpin something before the budget counts as exhausted.
constexpr auto pinned_patience = std::chrono::seconds(2);
// The evacuator's pause after a round that could not free enough: every
// object pinned, busy or on its way out (the next misses would otherwise
// wake it at once into another fruitless sweep of the whole cache), or a
// write-back failed (a lost server). It doubles while rounds keep ending
// so, up to the longest: the evacuator neither spins nor gives up for good.
constexpr auto evacuator_pause = std::chrono::milliseconds(1);
constexpr auto evacuator_pause_after_failure = std::chrono::milliseconds(10);
constexpr auto evacuator_longest_pause = std::chrono::seconds(1);
// After a round that reached its goal, the evacuator watches for the next
// request this long before it sleeps in the kernel. Waking a sleeping thread
// is a system call and, in a VM, an interrupt to another core: the miss that
// paid for it took 8-10 us instead of 0.5-2 (the p90 of a stream of 4 KiB
// misses, docs/results/far.md). A stream of misses keeps it awake; a program
// that stops missing leaves it asleep after this long. By default
// (Watch::automatic) it watches only where the machine has a core to spare
// for each process's service thread and evacuator (Job::spare_cores): on 2
// cores shared by 2 processes its watch took the core from the computation
// (snappy over far memory: 0.93x of local without it, 0.69x with it).
constexpr auto evacuator_watch_time = std::chrono::microseconds(200);
// Waking the sleeping evacuator costs the miss that wakes it more than a few
// inline evictions (a system call, and the other process's threads or the
// miss's own losing the core to it on a machine short of cores). It is woken
// only for a round that frees at least this many objects of the size the
// miss needs: with 4 KiB objects in a 128 KiB cache the marks are two
// objects apart, and every other miss woke it (reads 2.5-3x slower than
// with no evacuator, docs/results/far.md). A watching one costs a store.
constexpr std::size_t objects_worth_a_wake = 8;
// Nor while the victims are clean: evicting a clean object inline is a few
// stores, and a wake-up costs more than that saves (64 B reads: 15-25 %
// fewer per second with the evacuator woken). Only while at least a
// quarter of the recent evictions wrote a dirty victim back.
constexpr int dirty_share_scale = 256;  // recent_dirty_share: this is all of them
constexpr int dirty_share_worth_a_wake = dirty_share_scale / 4;

// What a process publishes at Manager construction (every process, server or not).
struct Published {
  std::uint32_t ok = 0;
  std::uint32_t serves = 0;
  RemoteLocator region{};
  char error[200] = {};
};

void check_config(const Config& c) {
  if (c.cache_bytes < 4 * slab_bytes)
    throw Error(Errc::invalid_argument, "far: a cache of " + std::to_string(c.cache_bytes) + " bytes is too small (at least " +
                                            std::to_string(4 * slab_bytes) + ", four slabs of the largest size class)");
  if (c.cache_bytes / min_object_bytes > state::frame_mask)
    throw Error(Errc::invalid_argument, "far: a cache of " + std::to_string(c.cache_bytes) + " bytes exceeds what a far pointer can name");
  if (c.evacuator != Evacuator::off && !(c.free_low > 0 && c.free_low <= c.free_high && c.free_high <= 0.5))
    throw Error(Errc::invalid_argument, "far: the evacuator's free-space marks " + std::to_string(c.free_low) + " and " +
                                            std::to_string(c.free_high) +
                                            " need 0 < low <= high <= 0.5 (RDMX_FAR_FREE_LOW, RDMX_FAR_FREE_HIGH)");
  if (c.region_bytes < slab_bytes || c.region_bytes > state::max_region_bytes)
    throw Error(Errc::invalid_argument, "far: a region of " + std::to_string(c.region_bytes) + " bytes is outside 16 KiB to 64 TiB");
}

}  // namespace

// A cache frame in use: who owns it and where the object lives remotely.
struct Frame {
  // The far pointer's word; nullptr: not the start of an object. Atomic: a
  // dereference reads it unlocked to catch a byte-wise copied pointer.
  std::atomic<std::atomic<std::uint64_t>*> owner{nullptr};
  std::uint64_t remote = 0;                     // the owner's word once the object is remote again
  std::uint32_t bytes = 0;                      // the object's size: what travels
  // Under the lock: its write-back is on the network, the lock released.
  // The frame is neither evicted again nor freed until it has landed, so two
  // write-backs of one object never race and none reads a reused frame.
  bool evicting = false;
};

namespace {
// The write-backs this thread waits on, innermost first. A call handler
// that the thread runs while it waits (progress runs them inline) and that
// dereferences the very object on its way out cannot wait for it: it
// cancels that eviction instead (Manager::Impl::cancel_own_eviction).
struct Evicting {
  std::uint32_t frame;
  bool cancelled = false;
  Evicting* outer = nullptr;
};
thread_local Evicting* evicting_here = nullptr;

bool evicting_on_this_thread(std::uint32_t frame) noexcept {
  for (Evicting* e = evicting_here; e != nullptr; e = e->outer)
    if (e->frame == frame) return true;
  return false;
}

// The scopes open on this thread, innermost first.
thread_local DerefScope* scopes_here = nullptr;

// How long a free or an explicit eviction waits for a pin held by another
// thread. A pin may be transient: a thread dereferencing an object that
// used to be in the frame holds it until it re-reads that object's word,
// which on a loaded machine can take a whole scheduling round. A pin that
// outlasts this is another thread's scope using the object.
constexpr std::chrono::seconds pin_patience{5};
}  // namespace

bool pinned_on_this_thread(std::uint32_t frame) noexcept {
  for (const DerefScope* scope = scopes_here; scope != nullptr; scope = scope->outer_)
    if (scope->pins(frame)) return true;
  return false;
}

struct Manager::Impl {
  Config config;
  Job* job = nullptr;
  memory::Block server_chunk{};
  memory::Block cache_chunk{};
  std::unique_ptr<std::byte, decltype(&std::free)> own_cache{nullptr, &std::free};
  std::byte* cache = nullptr;
  std::unique_ptr<Device> device;
  std::vector<RemoteLocator> regions;
  std::unique_ptr<detail::RemoteAllocator> remote;
  std::unique_ptr<detail::SlabCache> slabs;
  std::unique_ptr<Frame[]> frames;  // per 64-byte unit of the cache
  std::size_t units = 0;
  std::unique_ptr<std::atomic<std::uint32_t>[]> pins;
  // CLOCK's reference bits, per 64-byte unit (an object's is its first
  // unit's): set by a dereference, cleared by the hand. Beside the state
  // word rather than in it, so that neither side needs an atomic
  // read-modify-write, a full barrier that cost a miss about 10 ns: a mark
  // lost to a race only makes CLOCK keep or drop one object wrongly.
  std::unique_ptr<std::atomic<std::uint8_t>[]> referenced;
  std::size_t hand = 0;  // CLOCK
  mutable std::mutex mutex;
  std::size_t peak_resident = 0;
  std::uint64_t misses = 0;  // fetches into the cache that succeeded; under the lock
  std::uint64_t evictions = 0;
  std::uint64_t inline_evictions = 0;
  std::uint64_t background_evictions = 0;
  std::uint64_t background_failures = 0;
  std::uint64_t write_backs = 0;
  std::atomic<std::uint64_t> prefetched{0};
  std::atomic<std::uint64_t> prefetch_hits{0};

  // The evacuator: started by the first miss that leaves less than
  // `free_low` bytes free, woken by later ones, stopped by ~Manager. It
  // sleeps on a mutex of its own, so that waking it never waits for the
  // manager's lock.
  std::size_t free_low = 0;   // bytes; 0: no evacuator
  std::size_t free_high = 0;
  std::size_t released_bytes = 0;  // ever: how much a round of the evacuator freed
  // Of the last evictions (a moving average over about 16), the share that
  // wrote a dirty victim back, out of dirty_share_scale; under the lock.
  int recent_dirty_share = dirty_share_scale;
  std::thread evacuator;      // started under the lock
  std::mutex wake_mutex;
  std::condition_variable wake;
  // A line of their own: the watching evacuator polls them while misses
  // update the fields around.
  alignas(64) std::atomic<bool> evacuation_wanted{false};  // set and cleared under wake_mutex
  std::atomic<bool> evacuator_stopping{false};
  // The evacuator waits for the manager's lock. Threads that hold it in
  // turn, evicting inline, would otherwise keep it from ever getting in
  // (a mutex is not fair): they step aside instead.
  alignas(64) std::atomic<bool> evacuator_knocking{false};

  void init_cache(std::byte* base) {
    cache = base;
    slabs = std::make_unique<detail::SlabCache>(config.cache_bytes);
    units = slabs->units();
    frames = std::make_unique<Frame[]>(units);
    pins = std::make_unique<std::atomic<std::uint32_t>[]>(units);
    referenced = std::make_unique<std::atomic<std::uint8_t>[]>(units);
    if (config.evacuator != Evacuator::off) {
      const double budget = static_cast<double>(units * min_object_bytes);
      free_low = static_cast<std::size_t>(budget * config.free_low);
      free_high = std::max(free_low, static_cast<std::size_t>(budget * config.free_high));
    }
  }
  std::byte* address(std::uint32_t frame) const noexcept { return cache + std::size_t{frame} * min_object_bytes; }

  // in_flight: passed over because another eviction's write-back is on the network.
  enum class Outcome { evicted, cooled, skipped, in_flight, cleaned };

  // Called with the lock held, returns with it held; releases it while a
  // dirty victim travels. CLOCK: a hot object gets a second chance; a
  // pinned or busy one is passed over. `keep`: only written back, it stays local.
  Outcome try_evict(std::unique_lock<std::mutex>& lock, std::uint32_t frame, bool second_chance, bool patient = false,
                    bool keep = false) {
    Frame& m = frames[frame];
    if (m.evicting) return Outcome::in_flight;
    std::atomic<std::uint64_t>* word = m.owner.load(std::memory_order_relaxed);
    std::uint64_t s = word->load(std::memory_order_acquire);
    if ((s & state::present) == 0 || (s & state::busy) != 0 || state::frame_of(s) != frame) return Outcome::skipped;
    if (second_chance && referenced[frame].load(std::memory_order_relaxed) != 0) {
      referenced[frame].store(0, std::memory_order_relaxed);
      return Outcome::cooled;
    }
    // Claim it, then look for pins: a reader pins before it re-reads the
    // word, so either it sees busy and backs off or this sees its pin.
    if (!word->compare_exchange_strong(s, s | state::busy, std::memory_order_seq_cst)) return Outcome::skipped;
    // Patient (an explicit eviction): a pin that is not this thread's may
    // be held for an instant on the way to a different object that used
    // this frame. The lock is let go meanwhile; the object is busy, so
    // nobody else evicts, frees or pins it.
    std::chrono::steady_clock::time_point deadline{};
    while (pins[frame].load(std::memory_order_seq_cst) != 0) {
      if (patient && deadline == std::chrono::steady_clock::time_point{})
        deadline = pinned_on_this_thread(frame) ? std::chrono::steady_clock::now()
                                               : std::chrono::steady_clock::now() + pin_patience;
      if (!patient || std::chrono::steady_clock::now() > deadline) {
        word->fetch_and(~state::busy, std::memory_order_release);
        return Outcome::skipped;
      }
      lock.unlock();
      std::this_thread::yield();
      lock.lock();
    }
    s = word->load(std::memory_order_acquire);
    const bool dirty = (s & state::dirty) != 0;
    if (dirty) {
      // The write-back travels without the lock: other threads keep
      // hitting, missing and evicting meanwhile, and a call handler that
      // dereferences far memory can take the lock. The object stays busy,
      // so nobody changes it under the transfer (dereferences of it wait),
      // and its frame stays `evicting` until the transfer has ended.
      m.evicting = true;
      Evicting mine{frame, false, evicting_here};
      evicting_here = &mine;
      const std::uint64_t remote = m.remote;
      const std::uint32_t bytes = m.bytes;
      lock.unlock();
      std::exception_ptr failure;
      try {
        device->write(state::server_of(remote), state::offset_of(remote), address(frame), bytes);
      } catch (...) {
        failure = std::current_exception();
      }
      evicting_here = mine.outer;
      lock.lock();
      m.evicting = false;
      // A move() may have handed the object to another pointer meanwhile.
      word = m.owner.load(std::memory_order_relaxed);
      if (!mine.cancelled && failure) word->fetch_and(~state::busy, std::memory_order_release);
      if (failure) std::rethrow_exception(failure);
      ++write_backs;
      // Cancelled by a handler of this thread that needed the object: it is
      // local, unclaimed and still dirty (what travelled may predate it).
      if (mine.cancelled) return Outcome::skipped;
      s = word->load(std::memory_order_acquire);
    }
    if (keep) {
      word->store(s & ~(state::busy | state::dirty), std::memory_order_release);
      return Outcome::cleaned;
    }
    word->store(m.remote, std::memory_order_release);
    release(frame);
    ++evictions;
    recent_dirty_share += ((dirty ? dirty_share_scale : 0) - recent_dirty_share) / 16;
    return Outcome::evicted;
  }

  // A dereference on a thread whose own write-back of `word`'s object is
  // in flight (from a handler run while it waits): waiting would never end,
  // so the eviction is called off and the object stays local and dirty.
  bool cancel_own_eviction(std::atomic<std::uint64_t>& word, std::uint64_t s) noexcept {
    if ((s & state::present) == 0) return false;
    const std::uint32_t frame = state::frame_of(s);
    for (Evicting* e = evicting_here; e != nullptr; e = e->outer) {
      if (e->frame != frame || e->cancelled || frames[frame].owner.load(std::memory_order_acquire) != &word) continue;
      e->cancelled = true;
      word.store((s & ~state::busy) | state::dirty, std::memory_order_release);
      return true;
    }
    return false;
  }

  // An explicit eviction, or only a write-back (`keep`): false when pinned.
  bool make_current(std::atomic<std::uint64_t>& word, bool keep) {
    std::unique_lock lock(mutex);
    for (;;) {
      const std::uint64_t s = word.load(std::memory_order_acquire);
      if ((s & state::valid) == 0) throw Error(Errc::invalid_argument, "far: eviction or write-back of a null far pointer");
      if ((s & state::present) == 0) return true;
      const Outcome done = try_evict(lock, state::frame_of(s), false, true, keep);
      if (done == Outcome::in_flight && !evicting_on_this_thread(state::frame_of(s))) {
        // Another thread's write-back of it is on the network: wait for it.
        lock.unlock();
        std::this_thread::yield();
        lock.lock();
        continue;
      }
      return done == (keep ? Outcome::cleaned : Outcome::evicted);
    }
  }

  void occupy(std::uint32_t frame, std::atomic<std::uint64_t>& word, std::uint64_t remote, std::size_t bytes) {
    frames[frame].remote = remote;
    frames[frame].bytes = static_cast<std::uint32_t>(bytes);
    frames[frame].owner.store(&word, std::memory_order_release);
  }
  void release(std::uint32_t frame) {
    frames[frame].owner.store(nullptr, std::memory_order_relaxed);
    const std::size_t before = slabs->resident_bytes();
    slabs->release(frame);
    released_bytes += before - slabs->resident_bytes();
  }

  enum class Sweep { evicted, in_flight, none };
  // Under the lock (released during a write-back): evicts one object.
  // in_flight: none now, but other threads' write-backs will free frames;
  // none: three sweeps found only pinned or busy objects.
  Sweep evict_one(std::unique_lock<std::mutex>& lock) {
    bool others_in_flight = false;
    // Steps count 64-byte units; an object is passed over whole.
    for (std::size_t step = 0; step < 3 * units;) {
      const auto frame = static_cast<std::uint32_t>(hand);
      if (frames[frame].owner.load(std::memory_order_relaxed) == nullptr) {
        hand = (hand + 1) % units;
        ++step;
        continue;
      }
      const std::size_t stride = (std::size_t{frames[frame].bytes} + min_object_bytes - 1) / min_object_bytes;
      hand = (hand + std::max<std::size_t>(stride, 1)) % units;
      const bool second_chance = step < 2 * units;
      step += std::max<std::size_t>(stride, 1);
      const Outcome done = try_evict(lock, frame, second_chance);
      if (done == Outcome::evicted) return Sweep::evicted;
      if (done == Outcome::in_flight && !evicting_on_this_thread(frame)) others_in_flight = true;
    }
    return others_in_flight ? Sweep::in_flight : Sweep::none;
  }

  // A remote object whose fetch this thread has claimed (its word is busy).
  struct Claim {
    std::atomic<std::uint64_t>* word;
    std::uint64_t remote;  // the word before it was claimed
    std::uint32_t frame = 0;
    std::size_t index;  // in the caller's batch
  };
  void* pin_or_claim(std::atomic<std::uint64_t>& word, std::size_t bytes, DerefScope& scope, Access access, std::uint64_t& claimed);
  // Frames for every claim (pinned for the scope to come); on failure every claim is given back.
  void take_frames(std::span<Claim> claims, std::size_t bytes);
  // Releases the claims' frames and makes their words remote again.
  void give_back(std::span<const Claim> claims);
  // Their objects have landed: local words, pinned in `scope`.
  void publish(std::span<const Claim> claims, DerefScope& scope, Access access);
  void finish(InFlight::State& batch);
  // Issues the transfers of a batch whose claims have their frames, and
  // records it as this thread's; on failure every claim is given back.
  void start(InFlight::State& batch);
  void finish_quietly(InFlight::State& batch) noexcept;  // a failure stays in batch.failure
  // Completes a future's batch (deref_async) once it is finished.
  static void settle(InFlight::State& batch) noexcept;

  // A free frame of `size_class`, if there is one.
  std::optional<std::uint32_t> take_free(std::uint32_t size_class) {
    const std::uint32_t frame = slabs->take(size_class);
    if (frame == detail::SlabCache::none) return std::nullopt;
    peak_resident = std::max(peak_resident, slabs->resident_bytes());
    if (free_low != 0 && free_bytes() < free_low) wake_evacuator(size_class);
    return frame;
  }

  // A frame for a prefetch: a free one, or one a few evictions of cold
  // objects make; none when that does not do (everything pinned, busy or
  // on its way out): a prefetch never waits.
  std::optional<std::uint32_t> take_frame_now(std::unique_lock<std::mutex>& lock, std::uint32_t size_class) {
    for (int evicted = 0;; ++evicted) {
      if (auto frame = take_free(size_class)) return frame;
      if (free_low != 0) wake_evacuator(size_class);
      if (evicted == 8 || evict_one(lock) != Sweep::evicted) return std::nullopt;
      ++inline_evictions;
    }
  }

  // A frame of `size_class`, evicting cold objects while the budget is spent.
  std::uint32_t take_frame(std::unique_lock<std::mutex>& lock, std::uint32_t size_class) {
    std::chrono::steady_clock::time_point deadline{};  // read the clock only once everything is pinned
    for (;;) {
      if (auto frame = take_free(size_class)) return *frame;
      // No frame of this class and no free slab, although free bytes may be
      // above the low mark (the free frames are in slabs of other classes):
      // the reserve did not serve this miss, so the evacuator runs a round.
      if (free_low != 0) wake_evacuator(size_class);
      if (evacuator_knocking.load(std::memory_order_relaxed)) {
        // The evacuator is about to free frames ahead of time: let it in.
        lock.unlock();
        std::this_thread::yield();
        lock.lock();
        continue;
      }
      const Sweep sweep = evict_one(lock);
      if (sweep == Sweep::evicted) {
        ++inline_evictions;
        continue;
      }
      // Everything is pinned (other threads' scopes may end soon), or is on
      // its way out (write-backs end in bounded time, a lost server's with
      // an error): only pins count towards the patience.
      const auto now = std::chrono::steady_clock::now();
      if (sweep == Sweep::in_flight) deadline = {};
      else if (deadline == std::chrono::steady_clock::time_point{}) deadline = now + pinned_patience;
      else if (now > deadline)
        throw Error(Errc::out_of_memory, "far: the local budget of " + std::to_string(config.cache_bytes) +
                                             " bytes is exhausted: every cached object is pinned by a DerefScope "
                                             "(end scopes sooner or raise RDMX_FAR_CACHE)");
      lock.unlock();
      std::this_thread::sleep_for(std::chrono::microseconds(100));
      lock.lock();
    }
  }

  std::size_t free_bytes() const noexcept { return units * min_object_bytes - slabs->resident_bytes(); }

  // Under the lock: the evacuator should run a round (started on first need,
  // so a process that never fills its cache, a server's, runs no thread).
  void wake_evacuator(std::uint32_t size_class) {
    if (evacuation_wanted.load(std::memory_order_relaxed) || evacuator_stopping.load(std::memory_order_relaxed)) return;
    if (config.evacuator == Evacuator::automatic && !evacuator_watches() &&
        (free_high - free_low < objects_worth_a_wake * class_bytes(size_class) || recent_dirty_share < dirty_share_worth_a_wake))
      return;
    if (!evacuator.joinable()) {
      if (!evacuator_fits()) {
        free_low = 0;  // for good: every eviction inline
        return;
      }
      try {
        evacuator = std::thread([this] { evacuate(); });
      } catch (const std::exception& e) {
        // No thread to be had: misses keep evicting inline, as with the evacuator off.
        rdmx::log(rdmx::LogLevel::warn, "far: cannot start the evacuator thread, evicting on demand only: %s", e.what());
        free_low = 0;
        return;
      }
    }
    {
      std::lock_guard w(wake_mutex);
      evacuation_wanted.store(true, std::memory_order_relaxed);
    }
    wake.notify_one();
  }

  // Whether the evacuator watches for work between rounds (evacuator_watch_time).
  bool evacuator_watches() const {
    return config.evacuator_watch == Watch::on ||
           (config.evacuator_watch == Watch::automatic && job != nullptr && job->spare_cores() >= 2 * job->layout().processes_per_machine);
  }

  // Evacuator::automatic: only where its write-backs complete without this
  // process's service thread. Over emulated RMA (TCP) or the two-sided path
  // the shared worker it sends through needs that thread's progress, and on
  // a machine short of cores the waits for it made misses far slower than
  // inline write-backs (docs/results/far.md).
  bool evacuator_fits() const {
    if (config.evacuator == Evacuator::on || job == nullptr) return true;
    if (config.path != Path::one_sided) return false;
    try {
      for (const RemoteLocator& region : regions)
        if (rma_emulated(region.process)) return false;
    } catch (const Error&) {
      return false;  // a server already lost: not the moment to start a thread
    }
    return true;
  }

  void lock_as_evacuator(std::unique_lock<std::mutex>& lock) {
    evacuator_knocking.store(true, std::memory_order_relaxed);
    lock.lock();
    evacuator_knocking.store(false, std::memory_order_relaxed);
  }

  // The evacuator's thread. Its write-backs are try_evict's, as inline ones:
  // the victim is busy while it travels, so a dereference of it waits, and
  // the lock is released meanwhile. Not a worker thread of the job, it sends
  // through the process's shared service worker (fabric::Runtime's
  // calling_context for threads of the program's own), whose progress the
  // service thread drives.
  void evacuate() {
    auto pause = std::chrono::milliseconds(0);  // after a round that fell short; 0: the last one did not
    const bool watches = evacuator_watches();
    bool failing = false;
    std::unique_lock lock(mutex, std::defer_lock);
    for (;;) {
      if (watches) {
        const auto until = std::chrono::steady_clock::now() + evacuator_watch_time;
        while (!evacuation_wanted.load(std::memory_order_acquire) && !evacuator_stopping.load(std::memory_order_relaxed) &&
               std::chrono::steady_clock::now() < until) {
        }
      }
      {
        std::unique_lock w(wake_mutex);
        wake.wait(w, [&] { return evacuation_wanted.load() || evacuator_stopping.load(); });
      }
      if (evacuator_stopping.load()) return;
      lock_as_evacuator(lock);
      bool evicted = false, failed = false;
      // A round frees up to the high mark, and at least the gap between the
      // marks: woken by a miss that found no frame of its class while the
      // free bytes lay in other classes' slabs, it still makes room.
      const std::size_t released_before = released_bytes;
      const auto short_of_goal = [&] {
        return free_bytes() < free_high || released_bytes - released_before < free_high - free_low;
      };
      while (!evacuator_stopping.load(std::memory_order_relaxed) && short_of_goal()) {
        Sweep sweep = Sweep::none;
        try {
          sweep = evict_one(lock);
        } catch (const std::exception& e) {
          // The victim stays local and dirty (try_evict); a program that
          // needs its server learns of the loss from its own operations.
          ++background_failures;
          if (!failing)
            rdmx::log(rdmx::LogLevel::warn, "far: the evacuator's write-back failed, retrying with back-off: %s", e.what());
          failed = failing = true;
          break;
        }
        if (sweep != Sweep::evicted) break;
        ++background_evictions;
        evicted = true;
        failing = false;
        // Misses waiting for the lock get their turn between victims.
        lock.unlock();
        lock_as_evacuator(lock);
      }
      const bool enough = !short_of_goal();
      lock.unlock();
      {
        std::lock_guard w(wake_mutex);
        evacuation_wanted.store(false, std::memory_order_relaxed);
      }
      if (enough || evacuator_stopping.load()) {
        pause = {};
        continue;
      }
      if (failed)
        pause = pause.count() == 0 || evicted ? std::chrono::duration_cast<std::chrono::milliseconds>(evacuator_pause_after_failure)
                                              : std::min<std::chrono::milliseconds>(pause * 2, evacuator_longest_pause);
      else
        pause = pause.count() == 0 || evicted ? evacuator_pause : std::min<std::chrono::milliseconds>(pause * 2, evacuator_longest_pause);
      {
        std::unique_lock w(wake_mutex);
        if (wake.wait_for(w, pause, [&] { return evacuator_stopping.load(); })) return;
      }
      // Still short of free space: go again without waiting for a miss.
      lock_as_evacuator(lock);
      const bool short_of_space = free_bytes() < free_low;
      lock.unlock();
      if (short_of_space) {
        std::lock_guard w(wake_mutex);
        evacuation_wanted.store(true, std::memory_order_relaxed);
      }
    }
  }

  // Teardown: a write-back in flight ends (landed or failed) before the
  // thread does, so nothing it touches is freed under it.
  void stop_evacuator() noexcept {
    {
      std::lock_guard w(wake_mutex);
      evacuator_stopping.store(true);
    }
    wake.notify_all();
    if (evacuator.joinable()) evacuator.join();
  }
};


// A batch whose transfers are under way.
struct InFlight::State {
  State(Manager* owner, Manager::Impl* m, DerefScope* into, Access how, std::size_t size) noexcept
      : manager(owner), impl(m), scope(into), access(how), bytes(size) {}
  Manager* manager = nullptr;
  Manager::Impl* impl = nullptr;
  DerefScope* scope = nullptr;
  Access access = Access::read;
  std::size_t bytes = 0;
  std::span<std::atomic<std::uint64_t>* const> words;
  std::span<void*> out;
  std::vector<Manager::Impl::Claim> claims;
  std::vector<std::size_t> repeated;  // pointers named twice: done once the first is local
  std::unique_ptr<Device::Reads> reads;
  bool done = false;
  std::exception_ptr failure;  // how finishing it failed (every object as it was)
  // Batches nobody holds (a prefetch, a future's) keep their words and
  // outputs here; `words` and `out` view them.
  std::vector<std::atomic<std::uint64_t>*> own_words;
  std::vector<void*> own_out;
  // A future's batch: completed by settle() with out[0], or its failure.
  std::shared_ptr<rdmx::detail::FutureState<void*>> promise;
  bool scope_ended = false;  // finished because its scope ended: the future fails
};

namespace {
// The calling thread's unfinished batches: a dereference of one of their
// objects finishes the batch instead of waiting for itself.
thread_local std::vector<InFlight::State*> started_here;
// The calling thread's batches that no InFlight holds (prefetches, futures'),
// finished by a wait for a far future (poll_here) or when their scope ends.
thread_local std::vector<std::unique_ptr<InFlight::State>> detached_here;

void make_room_for_one_detached() {
  if (detached_here.size() == detached_here.capacity()) detached_here.reserve(2 * detached_here.size() + 8);
}

// A far future's progress hook: finishes every batch the waiting thread has
// under way (one flush per server completes all of a path's gets), then
// completes the futures among them. Another thread's wait finds its own
// batches, not the starter's: it waits until the starting thread finishes.
bool poll_here(void*) {
  if (detached_here.empty()) return false;
  std::vector<std::unique_ptr<InFlight::State>> batches = std::move(detached_here);
  detached_here.clear();
  // A failure stays in the batch: the future reports it; a prefetch is dropped.
  for (auto& b : batches) b->impl->finish_quietly(*b);
  // Continuations run now and may start new batches (into detached_here).
  for (auto& b : batches) Manager::Impl::settle(*b);
  return true;
}

InFlight::State* batch_fetching(const std::atomic<std::uint64_t>& word) noexcept {
  for (InFlight::State* b : started_here)
    for (const auto& c : b->claims)
      if (c.word == &word) return b;
  return nullptr;
}
}  // namespace

// The hit path: pins a local object in `scope` and returns it; for a remote
// one, claims its fetch (the word turns busy), fills `claim` and returns
// nullptr. Waits while another thread fetches or evicts the object.
void* Manager::Impl::pin_or_claim(std::atomic<std::uint64_t>& word, std::size_t bytes, DerefScope& scope, Access access,
                                   std::uint64_t& claimed) {
  Impl& m = *this;
  constexpr std::uint64_t identity = state::present | state::busy | state::frame_mask;
  for (;;) {
    std::uint64_t s = word.load(std::memory_order_acquire);
    if ((s & state::valid) == 0) throw Error(Errc::invalid_argument, "far: dereference of a null or moved-from far pointer");
    if ((s & state::busy) != 0) {
      if (InFlight::State* b = batch_fetching(word)) {
        finish(*b);  // this thread's own batch is fetching it
        continue;
      }
      if (cancel_own_eviction(word, s)) continue;
      // Another thread fetches or evicts it. Waiting for an eviction rather
      // than calling it off: its write-back is already on the network, and
      // the object must not change while the transfer reads it.
      std::this_thread::yield();
      continue;
    }
    if ((s & state::present) != 0) {
      const std::uint32_t frame = state::frame_of(s);
      m.pins[frame].fetch_add(1, std::memory_order_seq_cst);
      const std::uint64_t again = word.load(std::memory_order_seq_cst);
      if ((again & identity) != (s & identity)) {
        m.pins[frame].fetch_sub(1, std::memory_order_release);
        continue;
      }
      if (m.frames[frame].owner.load(std::memory_order_acquire) != &word) {
        m.pins[frame].fetch_sub(1, std::memory_order_release);
        throw Error(Errc::invalid_argument, "far: dangling far pointer: its cache frame belongs to another object (was it copied byte-wise?)");
      }
      Manager::pin_in(scope, frame);
      if (access != Access::non_temporal && m.referenced[frame].load(std::memory_order_relaxed) == 0)
        m.referenced[frame].store(1, std::memory_order_relaxed);
      if (access == Access::write && (again & state::dirty) == 0) word.fetch_or(state::dirty, std::memory_order_relaxed);
      return m.address(frame);
    }
    if (bytes > class_bytes(state::class_of(s)))
      throw Error(Errc::invalid_argument, "far: dereference as a " + std::to_string(bytes) + "-byte object of a " +
                                              std::to_string(class_bytes(state::class_of(s))) + "-byte far block");
    if (!word.compare_exchange_weak(s, s | state::busy, std::memory_order_acq_rel)) continue;
    claimed = s;
    return nullptr;
  }
}

void Manager::Impl::take_frames(std::span<Claim> claims, std::size_t bytes) {
  std::size_t placed = 0;
  try {
    std::unique_lock lock(mutex);
    for (Claim& c : claims) {
      c.frame = take_frame(lock, state::class_of(c.remote));
      occupy(c.frame, *c.word, c.remote, bytes);
      // For the scope, before the word turns local. An increment, not a
      // store: a reader that raced with this frame's eviction may hold a
      // transient pin here that it is about to take back.
      pins[c.frame].fetch_add(1, std::memory_order_relaxed);
      ++placed;
      ++misses;  // under the lock: one atomic add fewer per miss
    }
  } catch (...) {
    give_back(claims.first(placed));
    for (const Claim& c : claims.subspan(placed)) c.word->store(c.remote, std::memory_order_release);
    throw;
  }
}

void Manager::Impl::give_back(std::span<const Claim> claims) {
  {
    std::lock_guard lock(mutex);
    for (const Claim& c : claims) {
      pins[c.frame].fetch_sub(1, std::memory_order_relaxed);
      release(c.frame);
    }
    misses -= claims.size();  // a fetch that failed is no miss served
  }
  for (const Claim& c : claims) c.word->store(c.remote, std::memory_order_release);
}

void Manager::Impl::publish(std::span<const Claim> claims, DerefScope& scope, Access access) {
  std::uint64_t flags = state::valid | state::present;
  if (access == Access::write) flags |= state::dirty;
  for (const Claim& c : claims) {
    Manager::pin_in(scope, c.frame);
    referenced[c.frame].store(access != Access::non_temporal ? 1 : 0, std::memory_order_relaxed);
    c.word->store(flags | c.frame, std::memory_order_release);
  }
}

void Manager::Impl::finish(InFlight::State& b) {
  if (b.done) {
    if (b.failure) std::rethrow_exception(b.failure);
    return;
  }
  b.done = true;
  std::erase(started_here, &b);
  try {
    b.reads->finish();
  } catch (...) {
    give_back(b.claims);
    b.failure = std::current_exception();
    throw;
  }
  publish(b.claims, *b.scope, b.access);
  for (const Claim& c : b.claims) b.out[c.index] = address(c.frame);
  for (std::size_t i : b.repeated) b.out[i] = b.manager->deref(*b.words[i], b.bytes, *b.scope, b.access);
}

void Manager::Impl::start(InFlight::State& b) {
  std::vector<Device::Transfer> transfers;
  try {
    transfers.reserve(b.claims.size());
    for (const Claim& c : b.claims) transfers.push_back({state::server_of(c.remote), state::offset_of(c.remote), address(c.frame), b.bytes});
    b.reads = device->start_reads(std::move(transfers));
    started_here.push_back(&b);
  } catch (...) {
    if (b.reads != nullptr) {
      finish_quietly(b);
    } else {
      give_back(b.claims);
      b.done = true;
    }
    throw;
  }
}

void Manager::Impl::finish_quietly(InFlight::State& b) noexcept {
  try {
    finish(b);
  } catch (...) {
  }
}

void Manager::Impl::settle(InFlight::State& b) noexcept {
  if (b.promise == nullptr) return;
  auto promise = std::exchange(b.promise, nullptr);
  if (b.failure)
    promise->set_exception(b.failure);
  else if (b.scope_ended)
    promise->set_error(Errc::invalid_argument, "far: the DerefScope of a dereference future ended before the future was waited for");
  else
    promise->set_value(b.out[0]);
}

InFlight::InFlight(std::unique_ptr<State> state) noexcept : state_(std::move(state)) {}
InFlight::~InFlight() {
  if (state_ == nullptr || state_->done) return;
  try {
    finish();
  } catch (const std::exception& e) {
    rdmx::log(rdmx::LogLevel::error, "far: a batch of dereferences nobody finished failed: %s", e.what());
  }
}
void InFlight::finish() {
  if (state_ != nullptr) state_->impl->finish(*state_);
}

Manager::Manager(Job& job, Config config) : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  m.config = std::move(config);
  m.job = &job;
  auto& servers = m.config.servers;
  if (servers.empty()) servers.push_back(job.size() - 1);
  std::sort(servers.begin(), servers.end());
  servers.erase(std::unique(servers.begin(), servers.end()), servers.end());

  // Everything that can fail locally happens before the allgather, and its
  // outcome travels with it: either every process goes on or every one throws.
  Published mine{};
  try {
    if (current_manager.load() != nullptr) throw Error(Errc::invalid_argument, "far: this process already has a far::Manager");
    check_config(m.config);
    if (servers.back() >= job.size())
      throw Error(Errc::invalid_argument, "far: server rank " + std::to_string(servers.back()) + " is not in the job of " +
                                              std::to_string(job.size()) + " processes (RDMX_FAR_SERVERS)");
    if (servers.size() > state::max_servers)
      throw Error(Errc::invalid_argument, "far: " + std::to_string(servers.size()) + " servers, but a far pointer names at most " +
                                              std::to_string(state::max_servers));
    if (m.config.replication == 0 || servers.size() % m.config.replication != 0)
      throw Error(Errc::invalid_argument, "far: replication " + std::to_string(m.config.replication) + " needs a number of servers that divides by it (" +
                                              std::to_string(servers.size()) + " servers; RDMX_FAR_SERVERS, RDMX_FAR_REPLICATION)");
    m.cache_chunk = job.arena().allocate_chunk(m.config.cache_bytes, min_object_bytes);
    if (std::binary_search(servers.begin(), servers.end(), job.rank())) {
      m.server_chunk = job.arena().allocate_chunk(m.config.region_bytes, min_object_bytes);
      mine.serves = 1;
      mine.region = m.server_chunk.locator(job.rank());
      mine.region.length = m.config.region_bytes;
      detail::serve(m.server_chunk.data, m.config.region_bytes);
    }
    mine.ok = 1;
  } catch (const std::exception& e) {
    std::strncpy(mine.error, e.what(), sizeof mine.error - 1);
  }
  auto all = job.allgather(std::as_bytes(std::span(&mine, 1)));
  std::string failure;
  for (std::uint32_t p = 0; p < all.size() && failure.empty(); ++p) {
    Published theirs{};
    std::memcpy(&theirs, all[p].data(), std::min(sizeof theirs, all[p].size()));
    theirs.error[sizeof theirs.error - 1] = '\0';
    const bool named = std::binary_search(servers.begin(), servers.end(), p);
    if (theirs.ok == 0)
      failure = "far::Manager failed on process " + std::to_string(p) + ": " + theirs.error;
    else if (named != (theirs.serves != 0))
      failure = "far: process " + std::to_string(p) + (named ? " was named a server here but does not serve"
                                                             : " serves but was not named a server here") +
                " (every process needs the same RDMX_FAR_SERVERS)";
    else if (named)
      m.regions.push_back(theirs.region);
  }
  if (!failure.empty()) {
    detail::stop_serving();
    if (m.server_chunk) job.arena().release_chunk(m.server_chunk);
    if (m.cache_chunk) job.arena().release_chunk(m.cache_chunk);
    throw Error(Errc::invalid_argument, failure);
  }
  m.device = make_replicated(make_device(m.config.path, m.regions), m.config.replication);
  m.remote = std::make_unique<detail::RemoteAllocator>(*m.device, job.rank(), job.size());
  m.init_cache(m.cache_chunk.data);
  current_manager.store(this);
}

Manager::Manager(std::unique_ptr<Device> device, Config config) : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  m.config = std::move(config);
  check_config(m.config);
  if (device == nullptr || device->servers() == 0) throw Error(Errc::invalid_argument, "far: a Manager needs a device with a server");
  m.config.servers.clear();
  for (std::size_t s = 0; s < device->servers(); ++s) m.config.servers.push_back(device->rank_of(s));
  m.device = make_replicated(std::move(device), m.config.replication);
  m.remote = std::make_unique<detail::RemoteAllocator>(*m.device, 0, 1);
  m.own_cache.reset(static_cast<std::byte*>(std::aligned_alloc(min_object_bytes, m.config.cache_bytes / slab_bytes * slab_bytes)));
  if (m.own_cache == nullptr) throw Error(Errc::out_of_memory, "far: cannot allocate the cache");
  m.init_cache(m.own_cache.get());
  Manager* expected = nullptr;
  if (!current_manager.compare_exchange_strong(expected, this))
    throw Error(Errc::invalid_argument, "far: this process already has a far::Manager");
}

Manager::~Manager() {
  Impl& m = *impl_;
  m.stop_evacuator();
  Manager* self = this;
  current_manager.compare_exchange_strong(self, nullptr);
  if (m.job == nullptr) return;
  try {
    m.job->barrier();  // every client is done with the servers' regions
  } catch (const std::exception& e) {
    rdmx::log(rdmx::LogLevel::warn, "far: leaving the far-memory job: %s", e.what());
  }
  detail::stop_serving();
  try {
    if (m.server_chunk) m.job->arena().release_chunk(m.server_chunk);
    m.job->arena().release_chunk(m.cache_chunk);
  } catch (const std::exception& e) {
    rdmx::log(rdmx::LogLevel::error, "far: %s", e.what());
  }
}

Manager& Manager::current() {
  Manager* m = current_manager.load(std::memory_order_acquire);
  if (m == nullptr) throw Error(Errc::invalid_argument, "far: no far::Manager exists in this process (construct one first)");
  return *m;
}

const Config& Manager::config() const noexcept { return impl_->config; }
Device& Manager::device() noexcept { return *impl_->device; }

Stats Manager::stats() const {
  const Impl& m = *impl_;
  std::lock_guard lock(m.mutex);
  Stats s;
  s.cache_bytes = m.config.cache_bytes;
  s.resident_bytes = m.slabs->resident_bytes();
  s.peak_resident_bytes = m.peak_resident;
  s.objects = m.remote->live();
  s.misses = m.misses;
  s.evictions = m.evictions;
  s.inline_evictions = m.inline_evictions;
  s.background_evictions = m.background_evictions;
  s.background_failures = m.background_failures;
  s.write_backs = m.write_backs;
  s.prefetched = m.prefetched.load(std::memory_order_relaxed);
  s.prefetch_hits = m.prefetch_hits.load(std::memory_order_relaxed);
  return s;
}

bool Manager::serving() const noexcept { return static_cast<bool>(impl_->server_chunk); }

RemoteLocator Manager::server_region(std::size_t server) const {
  if (server >= impl_->regions.size())
    throw Error(Errc::invalid_argument, "far: no published region for server " + std::to_string(server));
  return impl_->regions[server];
}

bool Manager::in_cache(const void* p) const noexcept {
  const auto* b = static_cast<const std::byte*>(p);
  return b >= impl_->cache && b < impl_->cache + impl_->units * min_object_bytes;
}

void* Manager::allocate(std::atomic<std::uint64_t>& word, std::size_t bytes) { return place(word, bytes, nullptr); }
void* Manager::allocate_on(std::size_t server, std::atomic<std::uint64_t>& word, std::size_t bytes) {
  return place(word, bytes, &server);
}

void Manager::allocate_remote(std::size_t server, std::atomic<std::uint64_t>& word, std::size_t bytes) {
  Impl& m = *impl_;
  const std::uint32_t size_class = size_class_of(std::max<std::size_t>(bytes, 1));
  if ((word.load(std::memory_order_relaxed) & state::valid) != 0)
    throw Error(Errc::invalid_argument, "far: allocation into a far pointer that still owns an object");
  std::lock_guard lock(m.mutex);
  const auto block = m.remote->allocate_on(static_cast<std::uint32_t>(server), size_class);
  word.store(state::remote(block.server, block.offset, size_class), std::memory_order_release);
}

void* Manager::place(std::atomic<std::uint64_t>& word, std::size_t bytes, const std::size_t* server) {
  Impl& m = *impl_;
  const std::uint32_t size_class = size_class_of(std::max<std::size_t>(bytes, 1));
  std::unique_lock lock(m.mutex);
  const auto block = server == nullptr ? m.remote->allocate(size_class) : m.remote->allocate_on(static_cast<std::uint32_t>(*server), size_class);
  std::uint32_t frame = 0;
  try {
    frame = m.take_frame(lock, size_class);
  } catch (...) {
    m.remote->free(block, size_class);
    throw;
  }
  m.occupy(frame, word, state::remote(block.server, block.offset, size_class), bytes);
  m.referenced[frame].store(1, std::memory_order_relaxed);
  // Busy until commit(): eviction leaves it alone while it is being built.
  word.store(state::valid | state::present | state::busy | state::dirty | frame, std::memory_order_release);
  return m.address(frame);
}

void Manager::commit(std::atomic<std::uint64_t>& word) noexcept { word.fetch_and(~state::busy, std::memory_order_release); }

void* Manager::deref(std::atomic<std::uint64_t>& word, std::size_t bytes, DerefScope& scope, Access access) {
  Impl& m = *impl_;
  if (&scope.manager() != this) throw Error(Errc::invalid_argument, "far: the DerefScope belongs to another far::Manager");
  std::uint64_t remote = 0;
  if (void* local = m.pin_or_claim(word, bytes, scope, access, remote)) return local;
  Impl::Claim claim{&word, remote, 0, 0};
  m.take_frames(std::span(&claim, 1), bytes);
  try {
    // Swap-in without a copy: straight into the frame in the registered arena.
    m.device->read(state::server_of(remote), state::offset_of(remote), m.address(claim.frame), bytes);
  } catch (...) {
    m.give_back(std::span(&claim, 1));
    throw;
  }
  m.publish(std::span(&claim, 1), scope, access);
  return m.address(claim.frame);
}

void Manager::deref_many(std::span<std::atomic<std::uint64_t>* const> words, std::size_t bytes, DerefScope& scope,
                         Access access, std::span<void*> out) {
  deref_start(words, bytes, scope, access, out).finish();
}

InFlight Manager::deref_start(std::span<std::atomic<std::uint64_t>* const> words, std::size_t bytes, DerefScope& scope,
                              Access access, std::span<void*> out) {
  Impl& m = *impl_;
  if (&scope.manager() != this) throw Error(Errc::invalid_argument, "far: the DerefScope belongs to another far::Manager");
  if (out.size() < words.size()) throw Error(Errc::invalid_argument, "far: a batch needs an output entry per pointer");
  auto b = std::make_unique<InFlight::State>(this, &m, &scope, access, bytes);
  b->words = words;
  b->out = out;
  b->claims.reserve(words.size());
  try {
    for (std::size_t i = 0; i < words.size(); ++i) {
      out[i] = nullptr;
      if (std::any_of(b->claims.begin(), b->claims.end(), [&](const Impl::Claim& c) { return c.word == words[i]; })) {
        b->repeated.push_back(i);
        continue;
      }
      std::uint64_t remote = 0;
      out[i] = m.pin_or_claim(*words[i], bytes, scope, access, remote);
      if (out[i] == nullptr) b->claims.push_back({words[i], remote, 0, i});
    }
  } catch (...) {
    for (const Impl::Claim& c : b->claims) c.word->store(c.remote, std::memory_order_release);
    throw;
  }
  m.take_frames(b->claims, bytes);
  m.start(*b);
  return InFlight(std::move(b));
}

Future<void*> Manager::deref_async(std::atomic<std::uint64_t>& word, std::size_t bytes, DerefScope& scope, Access access) {
  Impl& m = *impl_;
  auto future = rdmx::detail::make_state<void*>();
  future->progress = ProgressHook{&poll_here, nullptr};
  try {
    if (&scope.manager() != this) throw Error(Errc::invalid_argument, "far: the DerefScope belongs to another far::Manager");
    std::uint64_t remote = 0;
    if (void* local = m.pin_or_claim(word, bytes, scope, access, remote)) {
      future->set_value(local);
      return Future<void*>(std::move(future));
    }
    auto b = std::make_unique<InFlight::State>(this, &m, &scope, access, bytes);
    b->own_words = {&word};
    b->own_out = {nullptr};
    b->words = b->own_words;
    b->out = b->own_out;
    b->claims.push_back({&word, remote, 0, 0});
    make_room_for_one_detached();  // no failure once started
    m.take_frames(b->claims, bytes);                    // on failure the word is remote again
    m.start(*b);
    b->promise = future;
    detached_here.push_back(std::move(b));
  } catch (...) {
    future->set_exception(std::current_exception());
  }
  return Future<void*>(std::move(future));
}

std::size_t Manager::prefetch(std::span<std::atomic<std::uint64_t>* const> words, std::size_t bytes, DerefScope& scope,
                              std::span<bool> started) noexcept {
  Impl& m = *impl_;
  std::fill(started.begin(), started.end(), false);
  if (&scope.manager() != this || started.size() < words.size()) return 0;
  std::unique_ptr<InFlight::State> b;
  try {
    b = std::make_unique<InFlight::State>(this, &m, &scope, Access::read, bytes);  // hot: it is about to be used
    b->own_words.assign(words.begin(), words.end());
    b->own_out.assign(words.size(), nullptr);
    b->claims.reserve(words.size());
    // Only objects that are remote and nobody else is moving: a prefetch
    // never waits for another thread.
    for (std::size_t i = 0; i < words.size(); ++i) {
      std::uint64_t s = words[i]->load(std::memory_order_acquire);
      if ((s & (state::valid | state::present | state::busy)) != state::valid || bytes > class_bytes(state::class_of(s))) continue;
      if (std::any_of(b->claims.begin(), b->claims.end(), [&](const Impl::Claim& c) { return c.word == words[i]; })) continue;
      if (!words[i]->compare_exchange_strong(s, s | state::busy, std::memory_order_acq_rel)) continue;
      b->claims.push_back({words[i], s, 0, i});
    }
  } catch (...) {
    if (b != nullptr)
      for (const Impl::Claim& c : b->claims) c.word->store(c.remote, std::memory_order_release);
    return 0;
  }
  if (b->claims.empty()) return 0;
  std::size_t placed = 0;
  try {
    std::unique_lock lock(m.mutex);
    for (Impl::Claim& c : b->claims) {
      const auto frame = m.take_frame_now(lock, state::class_of(c.remote));
      if (!frame) break;
      c.frame = *frame;
      m.occupy(c.frame, *c.word, c.remote, bytes);
      m.pins[c.frame].fetch_add(1, std::memory_order_relaxed);  // for the scope (an increment: see take_frames)
      ++placed;
      ++m.misses;
    }
  } catch (...) {
    // A write-back of a victim failed: no prefetch now.
  }
  // Those without room are left as they were.
  for (const Impl::Claim& c : std::span(b->claims).subspan(placed)) c.word->store(c.remote, std::memory_order_release);
  b->claims.resize(placed);
  if (placed == 0) return 0;
  b->words = b->own_words;
  b->out = b->own_out;
  try {
    make_room_for_one_detached();  // no failure once started
  } catch (...) {
    m.give_back(b->claims);
    return 0;
  }
  try {
    m.start(*b);
  } catch (...) {
    return 0;  // every claim given back
  }
  detached_here.push_back(std::move(b));
  const auto& claims = detached_here.back()->claims;
  for (const Impl::Claim& c : claims) started[c.index] = true;
  m.prefetched.fetch_add(claims.size(), std::memory_order_relaxed);
  return claims.size();
}

void Manager::count_prefetch_hits(std::size_t n) noexcept { impl_->prefetch_hits.fetch_add(n, std::memory_order_relaxed); }

void Manager::free(std::atomic<std::uint64_t>& word) {
  Impl& m = *impl_;
  std::unique_lock lock(m.mutex);
  std::uint64_t s = word.load(std::memory_order_acquire);
  // An object on its way out is freed once its write-back has landed: the
  // transfer still reads the frame and writes the far block.
  while ((s & state::present) != 0 && m.frames[state::frame_of(s)].evicting &&
         m.frames[state::frame_of(s)].owner.load(std::memory_order_relaxed) == &word) {
    if (evicting_on_this_thread(state::frame_of(s)))
      throw Error(Errc::invalid_argument, "far: a far object was freed by a handler run during its own write-back");
    lock.unlock();
    std::this_thread::yield();
    lock.lock();
    s = word.load(std::memory_order_acquire);
  }
  if ((s & state::valid) == 0) return;
  if ((s & state::busy) != 0)
    throw Error(Errc::invalid_argument, "far: a far object was freed while another thread dereferences it");
  std::uint64_t remote = s;
  if ((s & state::present) != 0) {
    const std::uint32_t frame = state::frame_of(s);
    if (m.frames[frame].owner.load(std::memory_order_relaxed) != &word)
      throw Error(Errc::invalid_argument, "far: double free or dangling far pointer: its cache frame belongs to another object");
    // Claim it first. Another thread's dereference of an object that used
    // to be in this frame may hold a pin until it re-reads that object's
    // word; a pin of this thread's own scopes is a mistake at once, and
    // another thread's that outlasts the wait is a scope still using it.
    std::uint64_t expected = s;
    while (!word.compare_exchange_weak(expected, expected | state::busy, std::memory_order_seq_cst)) {
    }
    std::chrono::steady_clock::time_point deadline{};
    while (m.pins[frame].load(std::memory_order_seq_cst) != 0) {
      if (pinned_on_this_thread(frame)) {
        word.fetch_and(~state::busy, std::memory_order_release);
        throw Error(Errc::invalid_argument, "far: a far object was freed while a DerefScope still pins it");
      }
      if (deadline == std::chrono::steady_clock::time_point{})
        deadline = std::chrono::steady_clock::now() + pin_patience;
      else if (std::chrono::steady_clock::now() > deadline) {
        word.fetch_and(~state::busy, std::memory_order_release);
        throw Error(Errc::invalid_argument, "far: a far object was freed while another thread's DerefScope pins it");
      }
      lock.unlock();
      std::this_thread::yield();
      lock.lock();
    }
    remote = m.frames[frame].remote;
    m.release(frame);
  }
  word.store(0, std::memory_order_release);
  m.remote->free({state::server_of(remote), state::offset_of(remote)}, state::class_of(remote));
}

void Manager::move(std::atomic<std::uint64_t>& from, std::atomic<std::uint64_t>& to) noexcept {
  Impl& m = *impl_;
  std::lock_guard lock(m.mutex);  // eviction rewrites the owner's word under it
  const std::uint64_t s = from.load(std::memory_order_acquire);
  to.store(s, std::memory_order_release);
  from.store(0, std::memory_order_release);
  if ((s & state::present) != 0) {
    auto& owner = m.frames[state::frame_of(s)].owner;
    std::atomic<std::uint64_t>* expected = &from;
    owner.compare_exchange_strong(expected, &to, std::memory_order_acq_rel);
  }
}

bool Manager::evict(std::atomic<std::uint64_t>& word) { return impl_->make_current(word, false); }
bool Manager::write_back(std::atomic<std::uint64_t>& word) { return impl_->make_current(word, true); }

void Manager::finish_scope(DerefScope& scope) noexcept {
  // Finishing one batch may finish another (a pointer named twice), so
  // each round looks again for the first one left.
  for (;;) {
    const auto it = std::find_if(started_here.begin(), started_here.end(), [&](const InFlight::State* b) { return b->scope == &scope; });
    if (it == started_here.end()) break;
    InFlight::State& b = **it;
    b.scope_ended = true;
    try {
      b.impl->finish(b);
    } catch (const std::exception& e) {
      // A prefetch is dropped, a future reports it; a batch an InFlight
      // holds reports it again when finished.
      if (b.own_words.empty()) rdmx::log(rdmx::LogLevel::error, "far: a batch of dereferences unfinished when its scope ended failed: %s", e.what());
    } catch (...) {
    }
  }
  for (;;) {
    const auto it = std::find_if(detached_here.begin(), detached_here.end(), [&](const auto& b) { return b->scope == &scope; });
    if (it == detached_here.end()) break;
    std::unique_ptr<InFlight::State> b = std::move(*it);
    detached_here.erase(it);
    b->scope_ended = true;
    Impl::settle(*b);  // may run continuations that start batches of their own
  }
}

void Manager::pin_in(DerefScope& scope, std::uint32_t frame) { scope.pin(frame); }
void Manager::unpin(std::uint32_t frame) noexcept { impl_->pins[frame].fetch_sub(1, std::memory_order_release); }

DerefScope::DerefScope() : manager_(&Manager::current()), outer_(scopes_here) { scopes_here = this; }
DerefScope::DerefScope(Manager& manager) noexcept : manager_(&manager), outer_(scopes_here) { scopes_here = this; }

bool DerefScope::pins(std::uint32_t frame) const noexcept {
  for (std::size_t i = 0; i < std::min(pinned_, inline_pins); ++i)
    if (first_[i] == frame) return true;
  return std::find(more_.begin(), more_.end(), frame) != more_.end();
}

DerefScope::~DerefScope() {
  // Scopes usually end innermost first; one kept in a container may not.
  if (scopes_here == this) {
    scopes_here = outer_;
  } else {
    for (DerefScope* s = scopes_here; s != nullptr; s = s->outer_)
      if (s->outer_ == this) {
        s->outer_ = outer_;
        break;
      }
  }
  // Batches still in flight into this scope land first: their objects are
  // pinned in it (a prefetch's, a future's, one whose InFlight outlives it).
  if (!started_here.empty() || !detached_here.empty()) manager_->finish_scope(*this);
  for (std::size_t i = 0; i < std::min(pinned_, inline_pins); ++i) manager_->unpin(first_[i]);
  for (std::uint32_t frame : more_) manager_->unpin(frame);
}

}  // namespace rdmx::far
