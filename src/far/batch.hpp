// Batches: dereferences whose misses are in flight together (AIFM's
// prefetching, as batches). A batch has claimed its remote objects (their
// words are busy) and taken frames for them; start() issues every transfer
// at once, finish() waits for them all and publishes the objects into the
// caller's scope. Only the thread that started a batch finishes it, and the
// thread keeps its unfinished batches: those an InFlight holds
// (deref_start), and the detached ones nobody holds (a prefetch's, a
// dereference future's), which land when the thread waits for a far
// future, dereferences one of their objects, or ends their scope.
#pragma once
#include <cstddef>
#include <exception>
#include <memory>
#include <span>
#include <vector>

#include "cache.hpp"
#include "rdmx/core/future.hpp"
#include "rdmx/far/detail/runtime.hpp"
#include "rdmx/far/device.hpp"

namespace rdmx::far::detail {

struct Batch {
  Batch(Runtime& runtime, DerefScope& scope, Access access, std::size_t bytes) noexcept
      : runtime(runtime), scope(&scope), access(access), bytes(bytes) {}

  // Issues the transfers of a batch whose claims have their frames, and
  // records it as this thread's; on failure every claim is given back.
  void start();
  // Waits for the transfers and publishes the objects; throws the first
  // failure (every claim given back), again on a later call.
  void finish();
  void finish_quietly() noexcept;  // a failure stays in `failure`
  // Completes a future's batch (deref_async) once it is finished.
  void settle() noexcept;

  // This thread's unfinished batch that fetches `word`'s object, if any.
  static Batch* fetching(const StateWord& word) noexcept;
  // Room for one more detached batch, so that detach() cannot fail once
  // its transfers are under way.
  static void reserve_detached();
  static void detach(std::unique_ptr<Batch> batch) noexcept;
  // A far future's progress hook: finishes every batch the waiting thread
  // has detached (one flush per server completes all of a path's gets),
  // then completes the futures among them. Another thread's wait finds its
  // own batches, not the starter's: it waits until the starting thread
  // finishes.
  static bool land_detached(void*);
  // A scope ends: this thread's batches in flight into it land first (a
  // prefetch's, a future's, one whose InFlight outlives the scope).
  static void land_into(DerefScope& scope) noexcept;

  Runtime& runtime;
  DerefScope* scope;
  Access access;
  std::size_t bytes;
  std::span<StateWord* const> words;
  std::span<void*> out;
  std::vector<Claim> claims;
  std::vector<std::size_t> repeated;  // pointers named twice: done once the first is local
  std::unique_ptr<Device::Reads> reads;
  bool done = false;
  std::exception_ptr failure;  // how finishing it failed (every object as it was)
  // Batches nobody holds (a prefetch, a future's) keep their words and
  // outputs here; `words` and `out` view them.
  std::vector<StateWord*> own_words;
  std::vector<void*> own_out;
  // A future's batch: completed by settle() with out[0], or its failure.
  std::shared_ptr<rdmx::detail::FutureState<void*>> promise;
  bool scope_ended = false;  // finished because its scope ended: the future fails
};

}  // namespace rdmx::far::detail
