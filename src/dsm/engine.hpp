// The DSM engine of one process: the heap's three views, per-block state,
// the fault path and the coherence protocols (docs/dsm.md, "Protocol").
//
// Views of the heap, all of one memfd except the home copy:
//   app   at the agreed address; its protection is the block's state
//         (none: invalid, read: clean, read+write: dirty);
//   rw    always writable: the runtime installs fetched data through it;
//   twin  private copy of a dirty block as it was before the first write;
//   home  registered arena memory peers read with get: the block as of its
//         last release here, for the blocks this process is (or was) home of.
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <span>
#include <vector>

#include "rdmx/core/error.hpp"
#include "rdmx/dsm/config.hpp"
#include "rdmx/dsm/counters.hpp"
#include "rdmx/fabric/job.hpp"
#include "rdmx/transfer/remote_locator.hpp"
#include "signature.hpp"

namespace rdmx::dsm {

// A hint's source when the block has none (no write notice names a newer version).
inline constexpr std::uint32_t no_source = ~0u;

// Every process's `mine`, by rank: the start-up agreements (heap address,
// configuration, allocations).
template <class T>
std::vector<T> gather(Job& job, const T& mine) {
  std::vector<T> out;
  for (const auto& bytes : job.allgather(std::as_bytes(std::span(&mine, 1)))) {
    if (bytes.size() != sizeof(T)) throw Error(Errc::protocol, "dsm: a process sent a malformed start-up record");
    T value;
    std::memcpy(&value, bytes.data(), sizeof value);
    out.push_back(value);
  }
  return out;
}

// A block's lease word, beside its owner word: the largest lease end any
// reader took on the block's current version (Tardis's rts); a releaser's
// write timestamp is past it.
// A block's directory word (directory invalidation only), at its manager:
// bit p set while process p may cache the block; the top bit set while a
// releaser tells the sharers it took (others' releases wait for it).
namespace directory {
inline constexpr std::uint64_t telling = std::uint64_t{1} << 63;
inline constexpr std::uint32_t max_processes = 63;
}  // namespace directory
// A block's owner word, one per block in every process (MENPS's probable
// owner): bits 0-15 lock holder + 1 (0: unlocked), 16-31 owner, 32-63
// version. In the block's home the owner field names that process itself;
// elsewhere it is a link to a process that was home later than this one,
// which a search follows until it reaches a word that names its own process.
// A releaser locks the home's word, takes the block, names itself in its own
// word and leaves a link to itself in the previous home's. The fixed home
// uses only its own word (block mod P), which never moves.
namespace word {
inline constexpr std::uint64_t lock_mask = 0xffff;
inline std::uint64_t pack(std::uint64_t version, std::uint32_t owner, std::uint32_t holder_plus_one) {
  return version << 32 | std::uint64_t{owner} << 16 | holder_plus_one;
}
inline std::uint32_t owner(std::uint64_t w) { return static_cast<std::uint32_t>(w >> 16 & 0xffff); }
inline std::uint64_t version(std::uint64_t w) { return w >> 32; }
}  // namespace word

enum class BlockState : std::uint8_t { invalid, clean, dirty };

// Counters bumped from any thread.
struct AtomicCounters {
  std::atomic<std::uint64_t> read_faults{0}, write_faults{0}, fast_reads{0}, read_ahead{0}, write_ahead{0}, migrations{0}, links_followed{0}, merges{0},
      fast_releases{0}, invalidations{0}, overflows{0}, bytes_fetched{0}, races{0}, protects{0}, barriers{0}, locks{0};
  Counters snapshot() const;
};

class Engine {
 public:
  Engine(Job& job, const Config& config);
  ~Engine();

  static Engine* current() noexcept { return current_.load(std::memory_order_acquire); }
  static Engine& require(const char* what);

  const Config& config() const noexcept { return config_; }
  std::byte* base() const noexcept { return app_; }
  std::size_t bytes() const noexcept { return config_.heap_bytes; }
  bool contains(const void* p) const noexcept {
    auto* b = static_cast<const std::byte*>(p);
    return b >= app_ && b < app_ + config_.heap_bytes;
  }

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

 private:
  struct Views;
  void map_heap();
  void exchange_locators();
  RemoteLocator owner_word(std::uint32_t process, std::uint32_t block) const;
  RemoteLocator lease_word(std::uint32_t process, std::uint32_t block) const;
  // Follows the block's links from its probable owner to the home: returns
  // the home's word (unlocked or not), `home` set to its process.
  std::uint64_t find_home(std::uint32_t block, std::uint32_t& home);
  // Where to start a search for the block's home, and what taught us so.
  std::uint32_t probable_owner(std::uint32_t block) const noexcept;
  void learn_owner(std::uint32_t block, std::uint32_t process, std::uint64_t version) noexcept;
  // A link led to a failed process: asks every live process's word for the
  // one that names itself; throws peer_failed if none does.
  std::uint32_t search_home(std::uint32_t block, std::uint32_t failed);
  // Logical time (Tardis): raised to every write timestamp released or acquired here.
  std::uint64_t now() const noexcept { return time_.load(std::memory_order_acquire); }
  // Whether copies take leases: only a copy an overflowed signature would
  // drop needs one, so a process takes them once it has acquired
  // one, and saves the lease word's round trips before. Skipping a lease is
  // always safe: a copy without one goes at the next overflow.
  bool leasing() const noexcept { return config_.lease != 0 && overflowed_.load(std::memory_order_relaxed); }
  void advance(std::uint64_t t) noexcept;
  // Raises the lease word of `block` at `home` to at least `until`; returns what it held before.
  std::uint64_t extend_lease(std::uint32_t home, std::uint32_t block, std::uint64_t until);
  std::uint64_t write_timestamp(std::uint32_t home, std::uint32_t block);
  RemoteLocator home_block(std::uint32_t process, std::uint32_t block) const;
  RemoteLocator mutex_word(std::uint32_t mutex) const;
  RemoteLocator mutex_slot(std::uint32_t mutex, std::size_t bytes) const;
  std::size_t barrier_flag_offset(std::uint64_t parity, std::uint32_t sender) const;
  std::size_t barrier_slot_offset(std::uint64_t parity, std::uint32_t sender) const;
  RemoteLocator barrier_flag(std::uint32_t process, std::uint64_t parity, std::uint32_t sender) const;
  RemoteLocator barrier_slot(std::uint32_t process, std::uint64_t parity, std::uint32_t sender, std::size_t bytes) const;
  void wait_for_peer(std::uint32_t process, std::uint64_t target);
  RemoteLocator round_word(std::uint32_t process, std::uint64_t parity, std::uint32_t round, std::uint32_t word) const;
  // The barrier's exchange by dissemination; returns the largest clock of any process.
  std::uint64_t disseminate(std::span<const std::byte> signature, std::uint64_t target);
  static constexpr std::uint32_t every_peer = ~0u;
  void await_flag(std::uint64_t& word, std::uint64_t target, std::uint32_t process);
  void probe_peers(const std::string& what, std::uint32_t process = every_peer);
  static void deliver_barrier(std::uint32_t sender, std::uint64_t target, std::span<const std::byte> signature);
  std::size_t offset(std::uint32_t block) const { return std::size_t{block} * config_.block_bytes; }

  std::uint32_t take_ahead(std::uint32_t block, bool write);
  void make_dirty(std::uint32_t block);
  void lock_block(std::uint32_t block) noexcept;
  void unlock_block(std::uint32_t block) noexcept;
  void protect(std::uint32_t block, int protection);
  void protect(std::uint32_t first, std::uint32_t count, int protection);
  // Merges the dirty blocks of the list (sorted here), each under its lock;
  // leaves in the list the blocks a fast release kept writable.
  void release_blocks(std::vector<std::uint32_t>& blocks);
  // Sets up the calling worker's endpoints and remote keys towards every
  // process's metadata and home area, so that its faults find them ready
  // (setting one up allocates and waits for the owner's answer, running
  // calls meanwhile). The constructing thread warms in the constructor,
  // others at their first fault, before taking the block's lock.
  void warm();
  // With the block's lock held:
  void fetch(std::uint32_t block, bool for_write);
  // Whether the runtime view differs from the twin (the block was written).
  bool changed(std::uint32_t block) const;
  // The block's twin: our home copy when at_home_ says it is the same bytes.
  std::byte* twin(std::uint32_t block) const noexcept;
  bool release_block(std::uint32_t block);
  // release_block once the block is read-only; false if it had not changed
  // (nothing merged, no new version).
  bool merge(std::uint32_t block);
  // Floating home; `writable`: the fast release, the block stays writable
  // and dirty, its twin becomes what was merged.
  void release_floating(std::uint32_t block, bool writable);
  struct FloatingRelease {
    std::uint32_t block;
    bool writable;
  };
  // release_floating of several blocks (their local locks held), the round
  // trips of all overlapped.
  void release_floating_all(std::span<const FloatingRelease> todo);
  void merge_into_home(std::uint32_t block, bool moved);
  void merge_writable(std::uint32_t block, bool moved);
  void report_race(std::uint32_t block, std::size_t at);
  void release_fixed(std::uint32_t block);
  bool outdated(std::uint32_t block, const WriteNotice& notice);
  void drop(std::uint32_t first, std::uint32_t count);
  // Directory invalidation: this process's bit in the block's directory
  // word, the sharers a releaser invalidates, and what an acquire applies.
  RemoteLocator directory_word(std::uint32_t block) const;
  RemoteLocator mailbox(std::uint32_t process, std::uint32_t block) const;
  void join_sharers(std::uint32_t block);
  void invalidate_sharers(std::uint32_t block);
  void acquire_directory();

  void release_all();
  void release_range(const void* address, std::size_t bytes);
  // Acquire from every signature at once (a barrier hands over several).
  // `alone`: no other thread of this process runs (a barrier all of them
  // are in, or a process of one worker thread), so nothing writes the heap.
  void acquire(std::span<const DecodedSignature> signatures, bool alone);
  void invalidate_expired();
  void note(const WriteNotice& notice);
  void process_barrier(bool alone);
  // `free_word`: the mutex word as the lock found it free.
  void acquire_mutex(std::uint32_t mutex, std::uint64_t free_word);
  void check_mutex(std::uint32_t mutex, const char* what) const;
  static Error not_held(std::uint32_t mutex, std::uint64_t word);

  static std::atomic<Engine*> current_;

  Job& job_;
  Config config_;
  std::uint32_t rank_, processes_;
  std::size_t blocks_;
  int memfd_ = -1;
  std::byte* app_ = nullptr;
  std::byte* rw_ = nullptr;
  std::byte* twin_ = nullptr;
  std::byte* home_ = nullptr;   // this process's home copies (registered)
  // Per process: an owner word and a lease word per block, mutex words and
  // slots, then the barrier area:
  // a flag per sender (the last barrier it sent for) and two sets (by
  // barrier parity) of a signature slot per sender.
  std::size_t meta_bytes_ = 0;
  std::size_t slot_bytes_ = 0;
  std::size_t barrier_offset_ = 0;
  // The dissemination barrier's records, per parity and round: the
  // sender's logical clock, then the barrier it reached (the flag).
  static constexpr std::uint32_t max_rounds = 32;
  std::size_t rounds_offset_ = 0;
  // Every peer's one-sided operations are native (no process reaches
  // another over TCP): the barrier disseminates flags in log2(P) rounds
  // and pushes only signatures that hold something. Agreed by every
  // process when the Space starts.
  bool disseminate_ = false;
  // Directory invalidation: the directory words of the blocks this process
  // manages, then a byte per block that releasers set to invalidate our copy.
  std::size_t directory_offset_ = 0;
  std::size_t mailbox_offset_ = 0;
  std::byte* meta_ = nullptr;  // this process's metadata, where peers write barrier signatures
  std::vector<RemoteLocator> homes_, metas_;
  std::size_t allocated_ = 0;

  // Per block, preallocated so that the fault path allocates nothing of ours.
  std::unique_ptr<std::atomic<std::uint8_t>[]> block_lock_;
  std::unique_ptr<std::atomic<BlockState>[]> state_;
  std::unique_ptr<std::uint64_t[]> version_;      // version of the cached copy
  std::unique_ptr<WriteNotice[]> hint_;           // newest notice of an invalid block (source ~0u: none)
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
  // Per mutex: the word this process holds it with (0: not held), and the
  // free word it last saw (what its next lock expects).
  std::unique_ptr<std::atomic<std::uint64_t>[]> held_, mutex_free_;
  std::atomic<std::uint64_t> time_{0};
  std::atomic<bool> overflowed_{false};  // an overflowed signature was acquired here

  std::atomic_flag dirty_lock_ = ATOMIC_FLAG_INIT;
  // Blocks to release, each listed at most once (listed_), so the fault
  // path's push never grows the vector past its reserved capacity.
  std::vector<std::uint32_t> dirty_;
  std::unique_ptr<std::uint8_t[]> listed_;
  std::vector<std::uint32_t> spare_;  // an empty list of full capacity, for the next release_all
  std::atomic<std::uint32_t> merging_{0};  // lists taken by a release_all and not merged yet
  std::unique_ptr<std::uint8_t[]> shared_;  // directory: our bit is set in the block's directory word

  std::mutex history_mutex_;
  Signature history_;  // notices produced or acquired since the last barrier
  std::uint64_t epoch_ = 0;

  // Threads of this process meeting in barrier().
  std::mutex meet_mutex_;
  std::condition_variable meet_cv_;
  std::uint32_t arrived_ = 0;
  std::uint64_t generation_ = 0;
  std::exception_ptr meet_error_;

  AtomicCounters counters_;
  struct SignalGuard;
  std::unique_ptr<SignalGuard> signals_;
};

}  // namespace rdmx::dsm
