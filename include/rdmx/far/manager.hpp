// far::Manager: this process's far-memory runtime (AIFM's FarMemManager).
// It owns the local budget, a registered cache arena that holds the objects
// currently local, places objects in size classes with no server round trip
// (each process allocates from its own share of every server's region,
// spreading objects round-robin over the servers) and evicts cold objects
// with CLOCK, writing them back if they are dirty: ahead of time on a
// background thread (the evacuator) that keeps part of the cache free, and
// on the thread that needs a frame when none is free.
//
// Constructing one is collective: every process of the job constructs its
// Manager with the same servers; the servers map and register their region
// once and publish it. Destroying it is collective too (a barrier), so a
// server's region outlives every client's use of it. One Manager per
// process at a time; far pointers find it through Manager::current().
//
//   rdmx::Job job(argc, argv);
//   rdmx::far::Manager far(job);                 // RDMX_FAR_SERVERS, RDMX_FAR_CACHE ...
//   auto p = rdmx::far::make_unique<Point>(1, 2);
//   {
//     rdmx::far::DerefScope scope;
//     p.deref_mut(scope)->x += 1;                // swapped in if remote, pinned until scope ends
//   }
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

#include "rdmx/core/future.hpp"
#include "rdmx/far/config.hpp"
#include "rdmx/far/device.hpp"

namespace rdmx {
class Job;
}

namespace rdmx::far {

class DerefScope;

// How a dereference uses the object.
enum class Access {
  read,          // deref: the object may be dropped on eviction if it is clean
  write,         // deref_mut: marks it dirty, so eviction writes it back
  non_temporal,  // read without marking it hot: it is the first to go on eviction
};

struct Stats {
  std::size_t cache_bytes = 0;     // the budget
  std::size_t resident_bytes = 0;  // size-class bytes of the objects local now
  std::size_t peak_resident_bytes = 0;
  std::size_t objects = 0;         // live far objects
  std::uint64_t misses = 0;        // dereferences that fetched the object
  std::uint64_t evictions = 0;     // every kind below, and explicit ones (evict())
  std::uint64_t inline_evictions = 0;      // by a thread that needed a frame and found none free
  std::uint64_t background_evictions = 0;  // by the evacuator, ahead of the misses
  std::uint64_t background_failures = 0;   // the evacuator's write-backs that failed (the object stays local, dirty)
  std::uint64_t write_backs = 0;   // evictions of dirty objects
  std::uint64_t prefetched = 0;    // objects fetched ahead of use (Manager::prefetch)
  std::uint64_t prefetch_hits = 0; // of those, the ones then used (as prefetchers report them)
};

// A batch of dereferences whose misses are in flight (Manager::deref_start).
// finish() waits for them, publishes the objects and fills the caller's
// output entries; it throws the first failure, after which every object of
// the batch is as it was. Unfinished, it finishes when destroyed (reporting
// a failure on stderr), or when the thread that started it dereferences one
// of its objects. Only the thread that started it may finish it.
class InFlight {
 public:
  struct State;
  explicit InFlight(std::unique_ptr<State> state) noexcept;
  ~InFlight();
  InFlight(InFlight&&) noexcept = default;
  InFlight(const InFlight&) = delete;
  InFlight& operator=(const InFlight&) = delete;
  void finish();

 private:
  std::unique_ptr<State> state_;
};

class Manager {
 public:
  // Collective over the job (see above).
  explicit Manager(Job& job, Config config = {});
  // In-process, over `device` (tests and single-process use): this process
  // is the only client of every region.
  Manager(std::unique_ptr<Device> device, Config config);
  ~Manager();
  Manager(const Manager&) = delete;
  Manager& operator=(const Manager&) = delete;

  // This process's Manager; throws Errc::invalid_argument when there is none.
  static Manager& current();

  const Config& config() const noexcept;
  Device& device() noexcept;
  Stats stats() const;
  // Whether this process serves a region (it is in Config::servers).
  bool serving() const noexcept;
  // The registered region server `server` published (job-backed only).
  RemoteLocator server_region(std::size_t server) const;
  // Whether `p` lies in the cache arena (tests check that objects never live elsewhere).
  bool in_cache(const void* p) const noexcept;

  // The type-erased operations far pointers are built on. `word` is the
  // pointer's 8-byte state (see pointer.hpp).
  // A new object of `bytes`: returns its local frame, in which the caller
  // constructs it; the object stays out of eviction's reach until commit().
  void* allocate(std::atomic<std::uint64_t>& word, std::size_t bytes);
  // The same with the far block on `server`.
  void* allocate_on(std::size_t server, std::atomic<std::uint64_t>& word, std::size_t bytes);
  // A far block on `server` and no cache frame: the word is remote at once
  // and the object is whatever is in the block, for work offloaded there
  // to fill (far::Vector's server-side copies).
  void allocate_remote(std::size_t server, std::atomic<std::uint64_t>& word, std::size_t bytes);
  void commit(std::atomic<std::uint64_t>& word) noexcept;
  // The object's local address, valid while `scope` lives; fetches it
  // straight into a cache frame if it is remote.
  void* deref(std::atomic<std::uint64_t>& word, std::size_t bytes, DerefScope& scope, Access access);
  // deref() of several objects, whose misses travel together (all in
  // flight at once: latency hiding); out[i] is words[i]'s object.
  void deref_many(std::span<std::atomic<std::uint64_t>* const> words, std::size_t bytes, DerefScope& scope, Access access,
                  std::span<void*> out);
  // The same in two halves: local objects are in `out` at once, remote ones
  // once the result is finished. `words`, `out` and `scope` must outlive it.
  InFlight deref_start(std::span<std::atomic<std::uint64_t>* const> words, std::size_t bytes, DerefScope& scope, Access access,
                       std::span<void*> out);
  // A dereference whose miss travels while the thread goes on: the future
  // holds the object's address, pinned in `scope`. Waiting for it (get,
  // wait, when_all) on the thread that started it finishes every transfer
  // that thread has under way, so many outstanding futures complete in one
  // poll. As with deref_start, the object stays busy until then: this
  // thread's own dereference of it finishes the transfer first, other
  // threads wait. When `scope` ends first, the transfer is finished there
  // and the future fails (Errc::invalid_argument): the address would no
  // longer be pinned. Every failure (a lost server, a null pointer) comes
  // from the future.
  Future<void*> deref_async(std::atomic<std::uint64_t>& word, std::size_t bytes, DerefScope& scope, Access access);
  // Starts fetching, into cache frames, those of `words` that are remote and
  // not busy and that a frame can be found for without waiting for pins or
  // write-backs; the others are skipped (started[i] says which were
  // started). Nothing of it throws or waits: a prefetch that cannot get
  // room, or whose server fails, is dropped, and the dereference that
  // follows does what it would have done. The fetched objects are pinned
  // in `scope` once they land; they land when this thread dereferences one
  // of them, waits for a far future, or when `scope` ends, whichever is first.
  // Returns how many were started.
  std::size_t prefetch(std::span<std::atomic<std::uint64_t>* const> words, std::size_t bytes, DerefScope& scope,
                       std::span<bool> started) noexcept;
  // A prefetcher reports the prefetched objects that were then used (Stats::prefetch_hits).
  void count_prefetch_hits(std::size_t n) noexcept;
  // Frees the object's far block and cache frame; the word becomes null.
  void free(std::atomic<std::uint64_t>& word);
  // Moves ownership of the object from `from` (then null) to `to` (null before).
  void move(std::atomic<std::uint64_t>& from, std::atomic<std::uint64_t>& to) noexcept;
  // Writes the object back if dirty and makes it remote now (false: pinned by a scope).
  bool evict(std::atomic<std::uint64_t>& word);
  // Writes the object back if dirty and keeps it local, now clean (false:
  // pinned by a scope): the server's copy is current, the cache still hits.
  bool write_back(std::atomic<std::uint64_t>& word);

  struct Impl;

 private:
  friend class DerefScope;
  void unpin(std::uint32_t frame) noexcept;
  // A scope ends: the batches in flight into it land first.
  void finish_scope(DerefScope& scope) noexcept;
  void* place(std::atomic<std::uint64_t>& word, std::size_t bytes, const std::size_t* server);
  static void pin_in(DerefScope& scope, std::uint32_t frame);
  std::unique_ptr<Impl> impl_;
};

}  // namespace rdmx::far
