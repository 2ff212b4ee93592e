// The word-level operations far pointers and data structures are built on;
// programs use far::UniquePtr, SharedPtr, Array, Vector and HashTable
// instead. Each operation takes a pointer's 8-byte state word (far/state.hpp)
// and works in this process's far-memory runtime: the one runtime() finds,
// or the one of the DerefScope it is given.
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

#include "rdmx/core/future.hpp"
#include "rdmx/far/access.hpp"
#include "rdmx/far/config.hpp"
#include "rdmx/far/device.hpp"
#include "rdmx/far/state.hpp"

namespace rdmx::far {
class DerefScope;
}

namespace rdmx::far::detail {

class Runtime;  // src/far/runtime.hpp
struct Batch;   // src/far/batch.hpp

// A far pointer's state word (far/state.hpp).
using StateWord = std::atomic<std::uint64_t>;

// This process's far memory: its far::Manager's runtime. Throws
// Errc::invalid_argument when the process has no far::Manager.
Runtime& runtime();
const Config& config(const Runtime& runtime) noexcept;
Device& device(Runtime& runtime) noexcept;

// A new object of `bytes`: returns its cache frame, in which the caller
// constructs it; the object stays out of eviction's reach until commit().
void* allocate(Runtime& runtime, StateWord& word, std::size_t bytes);
// The same with the far block on `server`.
void* allocate_on(Runtime& runtime, std::size_t server, StateWord& word, std::size_t bytes);
// A far block on `server` and no cache frame: the word is remote at once
// and the object is whatever is in the block, for work offloaded there to
// fill (far::Vector's server-side copies).
void allocate_remote(Runtime& runtime, std::size_t server, StateWord& word, std::size_t bytes);
inline void commit(StateWord& word) noexcept { word.fetch_and(~state::busy, std::memory_order_release); }
// Frees the object's far block and cache frame; the word becomes null.
void free(Runtime& runtime, StateWord& word);
// Moves ownership of the object from `from` (then null) to `to` (null before).
void move(Runtime& runtime, StateWord& from, StateWord& to) noexcept;
// Writes the object back if dirty and makes it remote now (false: pinned by a scope).
bool evict(Runtime& runtime, StateWord& word);
// Writes the object back if dirty and keeps it local, now clean (false:
// pinned by a scope): the server's copy is current, the cache still hits.
bool write_back(Runtime& runtime, StateWord& word);

// The object's local address, valid while `scope` lives; fetches it
// straight into a cache frame if it is remote.
void* deref(StateWord& word, std::size_t bytes, DerefScope& scope, Access access);

// A batch of dereferences whose misses are in flight (deref_start).
// finish() waits for them, publishes the objects and fills the caller's
// output entries; it throws the first failure, after which every object of
// the batch is as it was. Unfinished, it finishes when destroyed (reporting
// a failure on stderr), or when the thread that started it dereferences one
// of its objects, or when its scope ends. Only the thread that started it
// may finish it.
class InFlight {
 public:
  explicit InFlight(std::unique_ptr<Batch> batch) noexcept;
  ~InFlight();
  InFlight(InFlight&&) noexcept = default;
  InFlight(const InFlight&) = delete;
  InFlight& operator=(const InFlight&) = delete;
  void finish();

 private:
  std::unique_ptr<Batch> batch_;
};

// deref() of several objects in two halves, their misses travelling
// together (latency hiding): local objects are in `out` at once, remote
// ones once the result is finished; out[i] is words[i]'s object. `words`,
// `out` and `scope` must outlive the result.
InFlight deref_start(std::span<StateWord* const> words, std::size_t bytes, DerefScope& scope, Access access,
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
Future<void*> deref_async(StateWord& word, std::size_t bytes, DerefScope& scope, Access access);
// Starts fetching, into cache frames, those of `words` that are remote and
// not busy and that a frame can be found for without waiting for pins or
// write-backs; the others are skipped (started[i] says which were
// started). Nothing of it throws or waits: a prefetch that cannot get
// room, or whose server fails, is dropped, and the dereference that
// follows does what it would have done. The fetched objects are pinned
// in `scope` once they land; they land when this thread dereferences one
// of them, waits for a far future, or when `scope` ends, whichever is first.
// Returns how many were started.
std::size_t prefetch(std::span<StateWord* const> words, std::size_t bytes, DerefScope& scope, std::span<bool> started) noexcept;
// A prefetcher reports the prefetched objects that were then used (Stats::prefetch_hits).
void count_prefetch_hits(Runtime& runtime, std::size_t n) noexcept;

}  // namespace rdmx::far::detail
