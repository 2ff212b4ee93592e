#include "cache.hpp"

#include <algorithm>
#include <string>
#include <thread>

#include "rdmx/core/error.hpp"
#include "rdmx/far/scope.hpp"

namespace rdmx::far::detail {
namespace {

// How long a thread that needs a cache frame waits for other threads'
// scopes to unpin something before the budget counts as exhausted.
constexpr auto pinned_patience = std::chrono::seconds(2);
// How long a free or an explicit eviction waits for a pin held by another
// thread. A pin may be transient: a thread dereferencing an object that
// used to be in the frame holds it until it re-reads that object's word,
// which on a loaded machine can take a whole scheduling round. A pin that
// outlasts this is another thread's scope using the object.
constexpr auto pin_patience = std::chrono::seconds(5);

// The write-backs this thread sends, innermost first (WriteBack).
thread_local WriteBack* writing_here = nullptr;

bool writing_back_here(std::uint32_t frame) noexcept {
  for (WriteBack* w = writing_here; w != nullptr; w = w->outer)
    if (w->frame == frame) return true;
  return false;
}

}  // namespace

// A quiet() waiting for the write-backs older than `end`; the first of
// their failures is kept for it.
struct Cache::QuietWait {
  std::uint64_t end;
  std::exception_ptr failure;
  QuietWait* next;
};

Cache::Cache(const Config& config, Device& device, std::byte* base, Job* job, const std::vector<RemoteLocator>& regions,
             const RemoteAllocator& remote)
    : config_(config),
      device_(device),
      remote_(remote),
      base_(base),
      slabs_(config.cache_bytes),
      units_(slabs_.units()),
      frames_(std::make_unique<Frame[]>(units_)),
      pins_(std::make_unique<std::atomic<std::uint32_t>[]>(units_)),
      referenced_(std::make_unique<std::atomic<std::uint8_t>[]>(units_)),
      recent_dirty_share_(Evacuator::dirty_share_scale),
      evacuator_(*this, config, job, regions) {}

bool Cache::contains(const void* p) const noexcept {
  const auto* b = static_cast<const std::byte*>(p);
  return b >= base_ && b < base_ + units_ * min_object_bytes;
}

Cache::Outcome Cache::try_evict(std::unique_lock<std::mutex>& lock, std::uint32_t frame, bool second_chance, bool patient,
                                bool keep) {
  Frame& f = frames_[frame];
  if (f.evicting) return Outcome::in_flight;
  StateWord* word = f.owner.load(std::memory_order_relaxed);
  std::uint64_t s = word->load(std::memory_order_acquire);
  if ((s & state::present) == 0 || (s & state::busy) != 0 || state::frame_of(s) != frame) return Outcome::skipped;
  if (second_chance && referenced_[frame].load(std::memory_order_relaxed) != 0) {
    referenced_[frame].store(0, std::memory_order_relaxed);
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
  while (pins_[frame].load(std::memory_order_seq_cst) != 0) {
    if (patient && deadline == std::chrono::steady_clock::time_point{})
      deadline = DerefScope::pinned_here(frame) ? std::chrono::steady_clock::now() : std::chrono::steady_clock::now() + pin_patience;
    if (!patient || std::chrono::steady_clock::now() > deadline) {
      word->fetch_and(~state::busy, std::memory_order_release);
      return Outcome::skipped;
    }
    lock.unlock();
    std::this_thread::yield();
    lock.lock();
  }
  s = word->load(std::memory_order_acquire);
  // A copy of an object freed since (a byte-wise copy fetched while its
  // original lived) is not written back: its block may be another's now.
  const bool dirty = (s & state::dirty) != 0 && remote_.standing(f.remote) == RemoteAllocator::Standing::live;
  if (dirty) {
    // The write-back travels without the lock: other threads keep
    // hitting, missing and evicting meanwhile, and a call handler that
    // dereferences far memory can take the lock. The object stays busy,
    // so nobody changes it under the transfer (dereferences of it wait),
    // and its frame stays `evicting` until the transfer has ended.
    f.evicting = true;
    WriteBack mine{frame, next_ticket_++, false, writing_here};
    writing_here = &mine;
    list(mine);
    const std::uint64_t remote = f.remote;
    const std::uint32_t bytes = f.bytes;
    lock.unlock();
    std::exception_ptr failure, for_quiet;
    try {
      device_.write(state::server_of(remote), state::offset_of(remote), address(frame), bytes);
    } catch (const Error& e) {
      failure = std::current_exception();
      // quiet() throws an object of its own, message and all: one exception
      // object thrown in two threads is freed through a reference count
      // inside libstdc++, which ThreadSanitizer cannot see.
      for_quiet = std::make_exception_ptr(Error(e.code(), std::string(e.what())));
    } catch (...) {
      failure = for_quiet = std::current_exception();
    }
    writing_here = mine.outer;
    lock.lock();
    unlist(mine, for_quiet);
    f.evicting = false;
    // A move() may have handed the object to another pointer meanwhile.
    word = f.owner.load(std::memory_order_relaxed);
    if (!mine.cancelled && failure) word->fetch_and(~state::busy, std::memory_order_release);
    if (failure) std::rethrow_exception(failure);
    ++write_backs_;
    // Cancelled by a handler of this thread that needed the object: it is
    // local, unclaimed and still dirty (what travelled may predate it).
    if (mine.cancelled) return Outcome::skipped;
    s = word->load(std::memory_order_acquire);
  }
  if (keep) {
    word->store(s & ~(state::busy | state::dirty), std::memory_order_release);
    return Outcome::cleaned;
  }
  word->store(f.remote, std::memory_order_release);
  release(frame);
  ++evictions_;
  recent_dirty_share_ += ((dirty ? Evacuator::dirty_share_scale : 0) - recent_dirty_share_) / 16;
  return Outcome::evicted;
}

bool Cache::cancel_own_eviction(StateWord& word, std::uint64_t s) noexcept {
  if ((s & state::present) == 0) return false;
  const std::uint32_t frame = state::frame_of(s);
  for (WriteBack* w = writing_here; w != nullptr; w = w->outer) {
    if (w->frame != frame || w->cancelled || frames_[frame].owner.load(std::memory_order_acquire) != &word) continue;
    w->cancelled = true;
    word.store((s & ~state::busy) | state::dirty, std::memory_order_release);
    return true;
  }
  return false;
}

bool Cache::make_current(StateWord& word, bool keep) {
  std::unique_lock lock(mutex_);
  for (;;) {
    const std::uint64_t s = word.load(std::memory_order_acquire);
    if ((s & state::valid) == 0) throw Error(Errc::invalid_argument, "far: eviction or write-back of a null far pointer");
    if ((s & state::present) == 0) return true;
    if (state::frame_of(s) >= units_ || frames_[state::frame_of(s)].owner.load(std::memory_order_relaxed) != &word)
      throw Error(Errc::invalid_argument, "far: eviction or write-back of a dangling far pointer: its cache frame belongs to "
                                          "another object (was it copied byte-wise?)");
    const Outcome done = try_evict(lock, state::frame_of(s), false, true, keep);
    if (done == Outcome::in_flight && !writing_back_here(state::frame_of(s))) {
      // Another thread's write-back of it is on the network: wait for it.
      lock.unlock();
      std::this_thread::yield();
      lock.lock();
      continue;
    }
    return done == (keep ? Outcome::cleaned : Outcome::evicted);
  }
}

std::uint64_t Cache::drop(std::unique_lock<std::mutex>& lock, StateWord& word) {
  std::uint64_t s = word.load(std::memory_order_acquire);
  if ((s & state::present) != 0 && state::frame_of(s) >= units_)
    throw Error(Errc::invalid_argument, "far: free of a stale far pointer: it names no frame of this Manager's cache");
  // An object on its way out is freed once its write-back has landed: the
  // transfer still reads the frame and writes the far block.
  while ((s & state::present) != 0 && frames_[state::frame_of(s)].evicting &&
         frames_[state::frame_of(s)].owner.load(std::memory_order_relaxed) == &word) {
    if (writing_back_here(state::frame_of(s)))
      throw Error(Errc::invalid_argument, "far: a far object was freed by a handler run during its own write-back");
    lock.unlock();
    std::this_thread::yield();
    lock.lock();
    s = word.load(std::memory_order_acquire);
  }
  if ((s & state::valid) == 0) return 0;
  if ((s & state::busy) != 0)
    throw Error(Errc::invalid_argument, "far: a far object was freed while another thread dereferences it");
  if ((s & state::present) == 0) return s;
  const std::uint32_t frame = state::frame_of(s);
  if (frames_[frame].owner.load(std::memory_order_relaxed) != &word)
    throw Error(Errc::invalid_argument, "far: double free or dangling far pointer: its cache frame belongs to another object");
  // Claim it first. Another thread's dereference of an object that used
  // to be in this frame may hold a pin until it re-reads that object's
  // word; a pin of this thread's own scopes is a mistake at once, and
  // another thread's that outlasts the wait is a scope still using it.
  std::uint64_t expected = s;
  while (!word.compare_exchange_weak(expected, expected | state::busy, std::memory_order_seq_cst)) {
  }
  std::chrono::steady_clock::time_point deadline{};
  while (pins_[frame].load(std::memory_order_seq_cst) != 0) {
    if (DerefScope::pinned_here(frame)) {
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
  const std::uint64_t remote = frames_[frame].remote;
  release(frame);
  return remote;
}

void Cache::occupy(std::uint32_t frame, StateWord& word, std::uint64_t remote, std::size_t bytes) {
  frames_[frame].remote = remote;
  frames_[frame].bytes = static_cast<std::uint32_t>(bytes);
  frames_[frame].owner.store(&word, std::memory_order_release);
}

void Cache::release(std::uint32_t frame) {
  frames_[frame].owner.store(nullptr, std::memory_order_relaxed);
  const std::size_t before = slabs_.resident_bytes();
  slabs_.release(frame);
  released_bytes_ += before - slabs_.resident_bytes();
}

Cache::Sweep Cache::evict_one(std::unique_lock<std::mutex>& lock) {
  bool others_in_flight = false;
  // Steps count 64-byte units; an object is passed over whole.
  for (std::size_t step = 0; step < 3 * units_;) {
    const auto frame = static_cast<std::uint32_t>(hand_);
    if (frames_[frame].owner.load(std::memory_order_relaxed) == nullptr) {
      hand_ = (hand_ + 1) % units_;
      ++step;
      continue;
    }
    const std::size_t stride = (std::size_t{frames_[frame].bytes} + min_object_bytes - 1) / min_object_bytes;
    hand_ = (hand_ + std::max<std::size_t>(stride, 1)) % units_;
    const bool second_chance = step < 2 * units_;
    step += std::max<std::size_t>(stride, 1);
    const Outcome done = try_evict(lock, frame, second_chance);
    if (done == Outcome::evicted) return Sweep::evicted;
    if (done == Outcome::in_flight && !writing_back_here(frame)) others_in_flight = true;
  }
  return others_in_flight ? Sweep::in_flight : Sweep::none;
}

std::optional<std::uint32_t> Cache::take_free(std::uint32_t size_class) {
  const std::uint32_t frame = slabs_.take(size_class);
  if (frame == SlabCache::none) return std::nullopt;
  peak_resident_ = std::max(peak_resident_, slabs_.resident_bytes());
  if (evacuator_.below_low(free_bytes())) evacuator_.want(size_class);
  return frame;
}

std::optional<std::uint32_t> Cache::take_frame_now(std::unique_lock<std::mutex>& lock, std::uint32_t size_class) {
  for (int evicted = 0;; ++evicted) {
    if (auto frame = take_free(size_class)) return frame;
    if (evacuator_.enabled()) evacuator_.want(size_class);
    if (evicted == 8 || evict_one(lock) != Sweep::evicted) return std::nullopt;
    ++inline_evictions_;
  }
}

std::uint32_t Cache::take_frame(std::unique_lock<std::mutex>& lock, std::uint32_t size_class) {
  std::chrono::steady_clock::time_point deadline{};  // read the clock only once everything is pinned
  for (;;) {
    if (auto frame = take_free(size_class)) return *frame;
    // No frame of this class and no free slab, although free bytes may be
    // above the low mark (the free frames are in slabs of other classes):
    // the reserve did not serve this miss, so the evacuator runs a round.
    if (evacuator_.enabled()) evacuator_.want(size_class);
    if (evacuator_.knocking()) {
      // The evacuator is about to free frames ahead of time: let it in.
      lock.unlock();
      std::this_thread::yield();
      lock.lock();
      continue;
    }
    const Sweep sweep = evict_one(lock);
    if (sweep == Sweep::evicted) {
      ++inline_evictions_;
      continue;
    }
    // Everything is pinned (other threads' scopes may end soon), or is on
    // its way out (write-backs end in bounded time, a lost server's with
    // an error): only pins count towards the patience.
    const auto now = std::chrono::steady_clock::now();
    if (sweep == Sweep::in_flight) deadline = {};
    else if (deadline == std::chrono::steady_clock::time_point{}) deadline = now + pinned_patience;
    else if (now > deadline)
      throw Error(Errc::out_of_memory, "far: the local budget of " + std::to_string(config_.cache_bytes) +
                                           " bytes is exhausted: every cached object is pinned by a DerefScope "
                                           "(end scopes sooner or raise RDMX_FAR_CACHE)");
    lock.unlock();
    std::this_thread::sleep_for(std::chrono::microseconds(100));
    lock.lock();
  }
}

void Cache::take_frames(std::span<Claim> claims, std::size_t bytes) {
  std::size_t placed = 0;
  try {
    std::unique_lock lock(mutex_);
    for (Claim& c : claims) {
      c.frame = take_frame(lock, state::class_of(c.remote));
      occupy(c.frame, *c.word, c.remote, bytes);
      pin_new(c.frame);  // for the scope, before the word turns local
      ++placed;
      ++misses_;  // under the lock: one atomic add fewer per miss
    }
  } catch (...) {
    give_back(claims.first(placed));
    for (const Claim& c : claims.subspan(placed)) c.word->store(c.remote, std::memory_order_release);
    throw;
  }
}

std::size_t Cache::take_frames_now(std::span<Claim> claims, std::size_t bytes) noexcept {
  std::size_t placed = 0;
  try {
    std::unique_lock lock(mutex_);
    for (Claim& c : claims) {
      const auto frame = take_frame_now(lock, state::class_of(c.remote));
      if (!frame) break;
      c.frame = *frame;
      occupy(c.frame, *c.word, c.remote, bytes);
      pin_new(c.frame);
      ++placed;
      ++misses_;
    }
  } catch (...) {
    // A victim's write-back failed: no more frames now.
  }
  return placed;
}

void Cache::give_back(std::span<const Claim> claims) {
  {
    std::lock_guard lock(mutex_);
    for (const Claim& c : claims) {
      pins_[c.frame].fetch_sub(1, std::memory_order_relaxed);
      release(c.frame);
    }
    misses_ -= claims.size();  // a fetch that failed is no miss served
  }
  for (const Claim& c : claims) c.word->store(c.remote, std::memory_order_release);
}

void Cache::list(WriteBack& w) noexcept {
  w.older = newest_;
  w.newer = nullptr;
  (newest_ != nullptr ? newest_->newer : oldest_) = &w;
  newest_ = &w;
}

void Cache::unlist(WriteBack& w, const std::exception_ptr& failure) noexcept {
  (w.older != nullptr ? w.older->newer : oldest_) = w.newer;
  (w.newer != nullptr ? w.newer->older : newest_) = w.older;
  if (failure)
    for (QuietWait* q = quiet_waits_; q != nullptr; q = q->next)
      if (w.ticket < q->end && !q->failure) q->failure = failure;
}

bool Cache::writing_back_before(std::uint64_t end) const noexcept {
  for (const WriteBack* w = oldest_; w != nullptr && w->ticket < end; w = w->newer) {
    bool own = false;
    for (const WriteBack* o = writing_here; o != nullptr && !own; o = o->outer) own = o == w;
    if (!own) return true;
  }
  return false;
}

void Cache::quiet(const std::function<void()>& idle) {
  std::unique_lock lock(mutex_);
  QuietWait mine{next_ticket_, nullptr, quiet_waits_};
  quiet_waits_ = &mine;
  struct Leave {
    Cache& cache;
    QuietWait& wait;
    ~Leave() {
      for (QuietWait** q = &cache.quiet_waits_; *q != nullptr; q = &(*q)->next)
        if (*q == &wait) {
          *q = wait.next;
          break;
        }
    }
  } leave{*this, mine};
  while (writing_back_before(mine.end)) {
    lock.unlock();
    idle();
    lock.lock();
  }
  if (mine.failure) std::rethrow_exception(mine.failure);
}

void Cache::fill(Stats& s) const {
  s.cache_bytes = config_.cache_bytes;
  s.resident_bytes = slabs_.resident_bytes();
  s.peak_resident_bytes = peak_resident_;
  s.misses = misses_;
  s.evictions = evictions_;
  s.inline_evictions = inline_evictions_;
  s.background_evictions = evacuator_.evictions();
  s.background_failures = evacuator_.failures();
  s.write_backs = write_backs_;
}

}  // namespace rdmx::far::detail
