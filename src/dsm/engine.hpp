// The DSM of one process (docs/dsm.md): the state every mechanism shares
// and the face the API, the layer and the signal handler use.
//
// The engine owns the per-block state, the heap's views (heap.hpp), the
// registered memory of every process (metadata.hpp), the history of write
// notices, the logical clock and the two protocol choices, each behind one
// interface: where a block's home lives and how a release merges into it
// (home.hpp), and how a process learns that its copy is out of date
// (invalidation.hpp). Its functions are defined one file per mechanism:
//   engine.cpp         construction, the configuration all processes share,
//                      waits on peers that may fail
//   owners.cpp         owner words, probable-owner links, the home search
//   fault.cpp          the fault path with read- and write-ahead
//   release.cpp        the dirty list, releases, the fast release
//   acquire.cpp        signatures applied, logical clock and leases
//   barrier.cpp        the process barrier and the threads' meeting
//   mutex.cpp          the global mutexes
//   allocator.cpp      collective allocation
// and the protocols, each a class nested here (so that it reaches the
// engine's state) in a file of its own: floating_home.cpp, fixed_home.cpp,
// the signature protocol in acquire.cpp, directory.cpp.
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "heap.hpp"
#include "home.hpp"
#include "invalidation.hpp"
#include "layer.hpp"
#include "metadata.hpp"
#include "rdmx/core/error.hpp"
#include "rdmx/dsm/config.hpp"
#include "rdmx/dsm/counters.hpp"
#include "signature.hpp"

namespace rdmx::dsm {

// A hint's source when the block has none (no write notice names a newer version).
inline constexpr std::uint32_t no_source = ~0u;

enum class BlockState : std::uint8_t { invalid, clean, dirty };

// Counters bumped from any thread.
struct AtomicCounters {
  std::atomic<std::uint64_t> read_faults{0}, write_faults{0}, fast_reads{0}, read_ahead{0}, write_ahead{0},
      migrations{0}, links_followed{0}, merges{0}, fast_releases{0}, invalidations{0}, overflows{0},
      bytes_fetched{0}, races{0}, protects{0}, barriers{0}, locks{0}, causal_misses{0};
  Counters snapshot() const;
};

class Engine {
 public:
  // Collective, one thread per process: opens the process's Space in `layer`.
  Engine(Job& job, Layer& layer, const Config& config);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  const Config& config() const noexcept { return config_; }
  std::byte* base() const noexcept { return heap_.base(); }
  std::size_t bytes() const noexcept { return heap_.bytes(); }
  bool contains(const void* p) const noexcept { return heap_.contains(p); }

  // The fault path: `address` lies in the heap. Returns once the access can proceed.
  void fault(void* address, bool write);

  void* allocate(std::size_t bytes, std::size_t alignment);
  void release();
  void barrier(bool every_thread);
  void lock(std::uint32_t mutex);
  bool try_lock(std::uint32_t mutex);
  void unlock(std::uint32_t mutex);
  // An unlock that releases only the blocks of [only, only + bytes).
  void unlock(std::uint32_t mutex, const void* only, std::size_t bytes);
  Counters counters() const { return counters_.snapshot(); }
  // One process: the heap is plain shared memory among its threads (no
  // protection, faults, merges or notices); synchronizations only order.
  bool local() const noexcept { return processes_ == 1; }
  // The Space ends on this process (~Space, before its closing barrier):
  // tells every live peer how many barriers it passed, so that a peer
  // waiting in a later one fails at once, naming it, instead of waiting for
  // ever. Never throws.
  void tell_ended() noexcept;

 private:
  class FloatingHome;
  class FixedHome;
  class SignatureInvalidation;
  class DirectoryInvalidation;
  struct SignalGuard;
  std::unique_ptr<Home> make_home();
  std::unique_ptr<Home> make_floating_home();
  std::unique_ptr<Home> make_fixed_home();
  std::unique_ptr<Invalidator> make_invalidator();
  std::unique_ptr<Invalidator> make_signature_invalidation();
  std::unique_ptr<Invalidator> make_directory_invalidation();
  // The configuration checked, as every process runs it (collective).
  static Config agreed(Job& job, const Layer& layer, Config config);
  // Leaves the layer and this worker's word (the engine is going).
  void forget() noexcept;

  std::size_t offset(std::uint32_t block) const noexcept { return heap_.offset(block); }

  // ---- owner words and the home search (owners.cpp) ----
  // Follows the block's links from its probable owner to the home: returns
  // the home's word (unlocked or not), `home` set to its process.
  std::uint64_t find_home(std::uint32_t block, std::uint32_t& home);
  // `process` was the block's home at `version` (a notice, a search or our
  // own release says so): it becomes the probable owner unless a newer
  // version is known.
  void learn_owner(std::uint32_t block, std::uint32_t process, std::uint64_t version) noexcept;
  // The probable owner kept here (Home::probable_owner of the floating home).
  std::uint32_t link(std::uint32_t block) const noexcept;
  std::uint64_t link_version(std::uint32_t block) const noexcept;
  // A link led to a failed process: asks every live process's word for the
  // one that names itself; throws peer_failed if none does.
  std::uint32_t search_home(std::uint32_t block, std::uint32_t failed);

  // ---- the fault path (fault.cpp) ----
  // Returns how many blocks it took; `newer` set if a fetch returned true.
  std::uint32_t take_ahead(std::uint32_t block, bool write, bool& newer);
  void make_dirty(std::uint32_t block);
  // With the block's lock held:
  // Returns whether the copy may hold writes of a release this process has
  // not acquired (checked only with Config::causal_mutex set; see fault()).
  bool fetch(std::uint32_t block, bool for_write);
  // After a causal miss: what the causal mutex passed on, acquired.
  void acquire_causal();
  void lock_block(std::uint32_t block) noexcept;
  void unlock_block(std::uint32_t block) noexcept { block_lock_[block].store(0, std::memory_order_release); }
  void protect(std::uint32_t first, std::uint32_t count, int protection) {
    counters_.protects.fetch_add(1, std::memory_order_relaxed);
    heap_.protect(first, count, protection);
  }

  // ---- releases (release.cpp) ----
  void release_all();
  void release_range(const void* address, std::size_t bytes);
  // Merges the dirty blocks of the list (sorted here), each under its lock;
  // leaves in the list the blocks a fast release kept writable.
  void release_blocks(std::vector<std::uint32_t>& blocks);
  // Makes one dirty block read-only and merges it; false if it had not
  // changed (nothing merged, no new version).
  bool release_block(std::uint32_t block);
  // release_block once the block is read-only.
  bool merge(std::uint32_t block);
  // After Home::merge: the blocks' states, the invalidation protocol, counters.
  void merged(std::span<const Merge> blocks);
  // Whether the runtime view differs from the twin (the block was written).
  bool changed(std::uint32_t block) const;
  // The block's twin: our home copy when at_home_ says it is the same bytes.
  std::byte* twin(std::uint32_t block) const noexcept;
  // A merge's write notice, kept for acquirers if the protocol hands them on.
  void note(const WriteNotice& notice);

  // ---- acquires, the logical clock and leases (acquire.cpp) ----
  // Acquire from every signature at once (a barrier hands over several).
  // `alone`: no other thread of this process runs (a barrier all of them
  // are in, or a process of one worker thread), so nothing writes the heap.
  void acquire(std::span<const DecodedSignature> signatures, bool alone);
  bool outdated(std::uint32_t block, const WriteNotice& notice);
  void drop(std::uint32_t first, std::uint32_t count);
  void invalidate_expired();
  // Logical time (Tardis): raised to every write timestamp released or acquired here.
  std::uint64_t now() const noexcept { return time_.load(std::memory_order_acquire); }
  void advance(std::uint64_t t) noexcept;
  // Whether copies take leases: only a copy an overflowed signature would
  // drop needs one, so a process takes them once it has acquired
  // one, and saves the lease word's round trips before. Skipping a lease is
  // always safe: a copy without one goes at the next overflow.
  bool leasing() const noexcept { return config_.lease != 0 && overflowed_.load(std::memory_order_relaxed); }
  // Raises the lease word of `block` at `home` to at least `until`; returns what it held before.
  std::uint64_t extend_lease(std::uint32_t home, std::uint32_t block, std::uint64_t until);
  std::uint64_t write_timestamp(std::uint32_t home, std::uint32_t block);

  // ---- the barrier (barrier.cpp) ----
  void process_barrier(bool alone);
  // The barrier's exchange by dissemination; returns the largest clock of any process.
  std::uint64_t disseminate(std::span<const std::byte> signature, std::uint64_t target);
  static void deliver_barrier(std::uint32_t sender, std::uint64_t target, std::span<const std::byte> signature);
  void await_flag(std::uint64_t& word, std::uint64_t target, std::uint32_t process);

  // ---- the mutexes (mutex.cpp) ----
  // Waits for the mutex and acquires through it; `run_calls`: handles the
  // thread's calls while it waits (not in the fault path).
  void take(std::uint32_t mutex, bool run_calls);
  // `free_word`: the mutex word as the lock found it free.
  void acquire_mutex(std::uint32_t mutex, std::uint64_t free_word);
  void acquire_through(std::uint32_t mutex, std::uint64_t free_word);
  void check_mutex(std::uint32_t mutex, const char* what) const;
  void free_mutex(std::uint32_t mutex, std::uint64_t held, std::uint64_t free_word);
  static Error not_held(std::uint32_t mutex, std::uint64_t word);
  // A waiter's error: `holder` ended this Space or left the job holding
  // `mutex`; `causal`: the waiter is a fault's causal acquire, not a lock.
  Error holder_gone(std::uint32_t mutex, std::uint32_t holder, bool causal) const;

  // ---- waits on peers (engine.cpp) ----
  static constexpr std::uint32_t every_peer = ~0u;
  // Throws Errc::peer_failed, naming `what()` and the process, if the fabric
  // has reported `process` (every_peer: any peer) failed. One load while no
  // process has failed: for every round of a wait.
  template <class What>
  void throw_if_failed(std::uint32_t process, What&& what) const {
    if (layer_.failures() != 0) [[unlikely]]
      throw_if_reported(process, what());
  }
  void throw_if_reported(std::uint32_t process, const std::string& what) const;
  // Throws Errc::shut_down, naming it, if a peer has ended this Space
  // before entering barrier `target`: whichever peer a barrier waits for,
  // it cannot complete. One load while no process has ended a Space.
  void throw_if_ended(std::uint64_t target) const {
    if (layer_.endings() != 0) [[unlikely]]
      throw_if_ended_before(target);
  }
  void throw_if_ended_before(std::uint64_t target) const;
  // Asks `process` (every_peer: every peer) whether it is alive, one get
  // each: a peer that died turns into Errc::peer_failed, naming `what`.
  void probe_peers(const std::string& what, std::uint32_t process = every_peer);

  Job& job_;
  Layer& layer_;
  Config config_;
  std::uint32_t rank_, processes_;
  std::size_t blocks_;
  std::unique_ptr<Home> home_;
  std::unique_ptr<Invalidator> invalidator_;
  Heap heap_;
  Metadata meta_;
  std::size_t allocated_ = 0;

  // Per block, preallocated so that the fault path allocates nothing of ours.
  std::unique_ptr<std::atomic<std::uint8_t>[]> block_lock_;
  std::unique_ptr<std::atomic<BlockState>[]> state_;
  std::unique_ptr<std::uint64_t[]> version_;      // version of the cached copy
  std::unique_ptr<WriteNotice[]> hint_;           // newest notice of an invalid block (source no_source: none)
  std::unique_ptr<std::uint8_t[]> quiet_;         // fast-released, writable: releases since it last changed
  // Floating home only: the block's copy in the runtime view (while clean),
  // or its twin (while dirty), is our home copy's bytes, so the home copy
  // serves as the twin and a write fault copies nothing (see make_dirty).
  std::unique_ptr<std::uint8_t[]> at_home_;
  std::unique_ptr<std::uint64_t[]> lease_;        // logical time the cached copy is valid until (0: none)
  // The probable owner, and the version at which we learnt it (a newer
  // notice or word replaces it; an older one does not).
  std::unique_ptr<std::uint32_t[]> link_;
  std::unique_ptr<std::uint64_t[]> link_version_;
  std::atomic<std::uint64_t> time_{0};
  std::atomic<bool> overflowed_{false};  // an overflowed signature was acquired here

  std::atomic_flag dirty_lock_ = ATOMIC_FLAG_INIT;
  // Blocks to release, each listed at most once (listed_), so the fault
  // path's push never grows the vector past its reserved capacity.
  std::vector<std::uint32_t> dirty_;
  std::unique_ptr<std::uint8_t[]> listed_;
  std::vector<std::uint32_t> spare_;  // an empty list of full capacity, for the next release_all
  std::atomic<std::uint32_t> merging_{0};  // lists taken by a release_all and not merged yet

  std::mutex history_mutex_;
  Signature history_;  // notices produced or acquired since the last barrier
  std::uint64_t epoch_ = 0;  // barriers passed
  std::uint64_t space_ = 0;  // this Space's number (Layer::open)

  // The barrier: every peer's one-sided operations are native (no process
  // reaches another over TCP), so it disseminates flags in log2(P) rounds
  // and pushes only signatures that hold something. Agreed by every
  // process when the Space starts.
  bool disseminate_ = false;
  // Threads of this process meeting in barrier().
  std::mutex meet_mutex_;
  std::condition_variable meet_cv_;
  std::uint32_t arrived_ = 0;
  std::uint64_t generation_ = 0;
  std::exception_ptr meet_error_;

  // Per mutex: the word this process holds it with (0: not held), and the
  // free word it last saw (what its next lock expects).
  std::unique_ptr<std::atomic<std::uint64_t>[]> held_, mutex_free_;
  // Per mutex: the thread that locked it (this_thread_word(); 0: none), so
  // that a thread locking a mutex it holds is an error, not a wait for ever.
  std::unique_ptr<std::atomic<std::uintptr_t>[]> holder_thread_;
  // Per mutex, while held: its acquire merged a block early (see unlock).
  std::unique_ptr<std::atomic<bool>[]> merged_early_;

  AtomicCounters counters_;
  std::unique_ptr<SignalGuard> signals_;
};

}  // namespace rdmx::dsm
