// The cache and CLOCK (AIFM's local object cache): the registered arena
// local objects live in, cut into frames named by their 64-byte unit (an
// object takes a frame and the units after it; SlabCache places objects in
// per-class slabs). Per frame: who owns it (Frame), the pins of the scopes
// that use it, and CLOCK's hot bit. Eviction picks cold, unpinned victims
// with CLOCK and writes the dirty ones back without holding the lock; the
// evacuator (evacuator.hpp) evicts through the same code ahead of the
// misses.
//
// The lock (mutex()) guards the frames' bookkeeping, the slabs, the
// counters and, for the Runtime, the remote allocator. A frame's pins and
// hot bit and its owner's state word are read without it: the pin protocol
// (docs/far.md, "Dereference scopes") orders a reader against an evictor.
#pragma once
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <vector>

#include "evacuator.hpp"
#include "remote_allocator.hpp"
#include "rdmx/far/config.hpp"
#include "rdmx/far/detail/runtime.hpp"
#include "rdmx/far/device.hpp"
#include "rdmx/far/manager.hpp"
#include "slab_cache.hpp"

namespace rdmx {
class Job;
}

namespace rdmx::far::detail {

// A cache frame in use: who owns it and where the object lives remotely.
struct Frame {
  // The far pointer's word; nullptr: not the start of an object. Atomic: a
  // dereference reads it unlocked to catch a byte-wise copied pointer.
  std::atomic<StateWord*> owner{nullptr};
  std::uint64_t remote = 0;  // the owner's word once the object is remote again
  std::uint32_t bytes = 0;   // the object's size: what travels
  // Under the lock: its write-back is on the network, the lock released.
  // The frame is neither evicted again nor freed until it has landed, so two
  // write-backs of one object never race and none reads a reused frame.
  bool evicting = false;
};

// A remote object whose fetch this thread has claimed (its word is busy).
struct Claim {
  StateWord* word;
  std::uint64_t remote;  // the word before it was claimed
  std::uint32_t frame = 0;
  std::size_t index;  // in the caller's batch
};

// A write-back on the network, on the stack of the thread that sends it.
// The thread's own are chained innermost first: a call handler that the
// thread runs while it waits (progress runs them inline) and that
// dereferences the very object on its way out cannot wait for it, and calls
// that eviction off instead (Cache::cancel_own_eviction). The cache's are
// listed oldest first, for quiet().
struct WriteBack {
  std::uint32_t frame;
  std::uint64_t ticket;  // in the order they were sent
  bool cancelled = false;
  WriteBack* outer = nullptr;  // this thread's write-back this one runs inside of
  WriteBack* older = nullptr;  // the cache's list
  WriteBack* newer = nullptr;
};

class Cache {
 public:
  // Over `base`, config.cache_bytes rounded down to whole slabs; `job` and
  // `regions` tell the evacuator where it runs (nullptr, none: in-process).
  // `remote`: the allocator whose blocks the objects are written back to.
  Cache(const Config& config, Device& device, std::byte* base, Job* job, const std::vector<RemoteLocator>& regions,
        const RemoteAllocator& remote);
  Cache(const Cache&) = delete;
  Cache& operator=(const Cache&) = delete;

  std::byte* address(std::uint32_t frame) const noexcept { return base_ + std::size_t{frame} * min_object_bytes; }
  bool contains(const void* p) const noexcept;
  std::size_t units() const noexcept { return units_; }
  std::mutex& mutex() const noexcept { return mutex_; }
  Frame& frame(std::uint32_t frame) noexcept { return frames_[frame]; }
  Evacuator& evacuator() noexcept { return evacuator_; }

  // Pins: a reader pins before it re-reads the word (pin_or_claim), an
  // evictor claims the word before it reads the pins (try_evict).
  std::uint32_t pin(std::uint32_t frame) noexcept { return pins_[frame].fetch_add(1, std::memory_order_seq_cst); }
  // A pin taken under the lock for a frame not yet published: an increment,
  // not a store, as a reader that raced with this frame's eviction may
  // hold a transient pin here that it is about to take back.
  void pin_new(std::uint32_t frame) noexcept { pins_[frame].fetch_add(1, std::memory_order_relaxed); }
  void unpin(std::uint32_t frame) noexcept { pins_[frame].fetch_sub(1, std::memory_order_release); }
  // CLOCK's reference bits, one per frame: set by a dereference, cleared by
  // the hand. Beside the state word rather than in it, so that neither side
  // needs an atomic read-modify-write, a full barrier on every miss: a mark
  // lost to a race only makes CLOCK keep or drop one object wrongly.
  void mark_hot(std::uint32_t frame) noexcept {
    if (referenced_[frame].load(std::memory_order_relaxed) == 0) referenced_[frame].store(1, std::memory_order_relaxed);
  }
  void set_hot(std::uint32_t frame, bool hot) noexcept { referenced_[frame].store(hot ? 1 : 0, std::memory_order_relaxed); }

  // Under the lock. A frame of `size_class`, evicting cold objects while the
  // budget is spent; throws Errc::out_of_memory when pins hold every object.
  std::uint32_t take_frame(std::unique_lock<std::mutex>& lock, std::uint32_t size_class);
  void occupy(std::uint32_t frame, StateWord& word, std::uint64_t remote, std::size_t bytes);
  void release(std::uint32_t frame);

  // Frames for every claim, pinned for the scope to come, counted as
  // misses; on failure every claim is given back.
  void take_frames(std::span<Claim> claims, std::size_t bytes);
  // The same for a prefetch, as far as frames come without waiting (a free
  // one, or a few evictions of cold objects): returns how many of the
  // first claims have one. A victim's failed write-back ends it there.
  std::size_t take_frames_now(std::span<Claim> claims, std::size_t bytes) noexcept;
  // Releases the claims' frames and makes their words remote again.
  void give_back(std::span<const Claim> claims);

  // An explicit eviction, or only a write-back (`keep`): false when pinned.
  bool make_current(StateWord& word, bool keep);
  // A dereference on a thread whose own write-back of `word`'s object is
  // in flight (from a handler run while it waits): waiting would never end,
  // so the eviction is called off and the object stays local and dirty.
  bool cancel_own_eviction(StateWord& word, std::uint64_t s) noexcept;
  // Under the lock, for a free of `word`'s object: waits for its write-back
  // in flight and, if it is local, for pins other threads hold on it (up to
  // pin_patience), then releases its frame. Returns the object's remote
  // word, 0 for a null pointer. Throws Errc::invalid_argument for a pin of
  // this thread's scopes or one that outlasts the patience, an object
  // another thread dereferences, a frame that belongs to another object,
  // and a handler that frees the object its own thread is writing back.
  std::uint64_t drop(std::unique_lock<std::mutex>& lock, StateWord& word);

  // Returns once every write-back on the network now has landed, calling
  // `idle` while it waits; rethrows the first of their failures. The
  // calling thread's own write-backs (it runs a handler inside one) are
  // not waited for: they end after it returns.
  void quiet(const std::function<void()>& idle);

  // Under the lock.
  void fill(Stats& stats) const;

 private:
  friend class Evacuator;
  // in_flight: passed over because another eviction's write-back is on the network.
  enum class Outcome { evicted, cooled, skipped, in_flight, cleaned };
  enum class Sweep { evicted, in_flight, none };

  std::optional<std::uint32_t> take_free(std::uint32_t size_class);
  // A frame without waiting: a free one, or one a few evictions of cold
  // objects make; none when that does not do.
  std::optional<std::uint32_t> take_frame_now(std::unique_lock<std::mutex>& lock, std::uint32_t size_class);
  // Called with the lock held, returns with it held; releases it while a
  // dirty victim travels. CLOCK: a hot object gets a second chance; a
  // pinned or busy one is passed over. `keep`: only written back, it stays local.
  Outcome try_evict(std::unique_lock<std::mutex>& lock, std::uint32_t frame, bool second_chance, bool patient = false,
                    bool keep = false);
  // Evicts one object. in_flight: none now, but other threads' write-backs
  // will free frames; none: three sweeps found only pinned or busy objects.
  Sweep evict_one(std::unique_lock<std::mutex>& lock);
  std::size_t free_bytes() const noexcept { return units_ * min_object_bytes - slabs_.resident_bytes(); }
  // Whether a write-back older than `end`, not one of this thread's, is on the network.
  bool writing_back_before(std::uint64_t end) const noexcept;
  void list(WriteBack& w) noexcept;
  void unlist(WriteBack& w, const std::exception_ptr& failure) noexcept;

  const Config& config_;
  Device& device_;
  const RemoteAllocator& remote_;
  std::byte* base_;
  SlabCache slabs_;
  std::size_t units_;
  std::unique_ptr<Frame[]> frames_;  // per 64-byte unit of the cache
  std::unique_ptr<std::atomic<std::uint32_t>[]> pins_;
  std::unique_ptr<std::atomic<std::uint8_t>[]> referenced_;
  std::size_t hand_ = 0;  // CLOCK
  mutable std::mutex mutex_;
  std::size_t peak_resident_ = 0;
  std::uint64_t misses_ = 0;  // fetches into the cache that succeeded
  std::uint64_t evictions_ = 0;
  std::uint64_t inline_evictions_ = 0;
  std::uint64_t write_backs_ = 0;
  std::size_t released_bytes_ = 0;  // ever: how much a round of the evacuator freed
  // Of the last evictions (a moving average over about 16), the share that
  // wrote a dirty victim back, out of dirty_share_scale.
  int recent_dirty_share_;
  std::uint64_t next_ticket_ = 0;
  WriteBack* oldest_ = nullptr;  // the write-backs on the network
  WriteBack* newest_ = nullptr;
  struct QuietWait;
  QuietWait* quiet_waits_ = nullptr;
  Evacuator evacuator_;  // last: stopped before anything it uses goes
};

}  // namespace rdmx::far::detail
