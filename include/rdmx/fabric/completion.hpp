// What a call tells its caller, and how: one value passed as the call's last
// argument, the same for every path a call can take (send-based, one-sided,
// batched), in the spirit of UPC++'s completions.
//
//   rdmx::call(dest, f);                               nothing to learn
//   rdmx::call(dest, f, rdmx::when_sent(sync));        sync counts down once the call has left
//                                                      (the caller's buffers are reusable)
//   rdmx::call(dest, f, rdmx::when_run(sync));         sync counts down once dest has run it;
//                                                      sync.wait() throws what failed it
//   R r = rdmx::call_return(dest, f).get();            a call's result, as a future
//   rdmx::call_return(dest, f, rdmx::into(r, sync));   the result written into r, then sync
//                                                      counts down: no allocation per call
//
// With the Synchronizer (and the result) in registered memory
// (invoke/remote_object.hpp), when_run and into are answered by RDMA on the
// one-sided path: one atomic (and one write) instead of a message back.
// Other paths answer such a completion by message, so every path takes
// every completion.
#pragma once
#include <cstdint>
#include <type_traits>

#include "rdmx/core/always_false.hpp"
#include "rdmx/fabric/synchronizer.hpp"
#include "rdmx/transfer/remote_locator.hpp"

namespace rdmx {

namespace fabric {
// The event a Synchronizer completion counts down on (Seriema's Notify).
enum class Notify : std::uint8_t { sent, consumed };
}  // namespace fabric

class Completion {
 public:
  // Nothing to learn.
  Completion() = default;
  // A bare Synchronizer does not say when it counts down.
  template <class S>
    requires std::is_same_v<std::remove_cvref_t<S>, Synchronizer> || std::is_same_v<std::remove_cvref_t<S>, Synchronizer*>
  Completion(S&&) {  // NOLINT: implicit, to name the fix
    static_assert(always_false<S>, "rdmx: say when the Synchronizer counts down: rdmx::when_sent(sync) or rdmx::when_run(sync)");
  }

  Synchronizer* synchronizer() const noexcept { return sync_; }
  fabric::Notify event() const noexcept { return event_; }
  // Set for a Synchronizer in registered memory: where a remote process
  // counts it down by RDMA atomic.
  const RemoteLocator* rdma_counter() const noexcept { return by_rdma_ ? &counter_ : nullptr; }

  friend Completion when_sent(Synchronizer& sync) noexcept;
  friend Completion when_run(Synchronizer& sync) noexcept;
  // when_run answered by one RDMA atomic on `counter` (the Synchronizer's
  // count in registered memory): for invoke/remote_object.hpp.
  static Completion run_counted_at(Synchronizer& sync, const RemoteLocator& counter) noexcept {
    Completion c(sync, fabric::Notify::consumed);
    c.counter_ = counter;
    c.by_rdma_ = true;
    return c;
  }

 private:
  Completion(Synchronizer& sync, fabric::Notify event) noexcept : sync_(&sync), event_(event) {}
  Synchronizer* sync_ = nullptr;
  fabric::Notify event_ = fabric::Notify::sent;
  bool by_rdma_ = false;
  RemoteLocator counter_;
};

inline Completion when_sent(Synchronizer& sync) noexcept { return Completion(sync, fabric::Notify::sent); }
inline Completion when_run(Synchronizer& sync) noexcept { return Completion(sync, fabric::Notify::consumed); }

// call_return's result written into an R the caller owns, after which its
// Synchronizer counts down (when_run's event).
template <class R>
class Into {
 public:
  Into(R& result, Synchronizer& sync) noexcept : result_(&result), done_(when_run(sync)) {}

  R* result() const noexcept { return result_; }
  const Completion& completion() const noexcept { return done_; }
  const RemoteLocator* rdma_result() const noexcept { return by_rdma_ ? &where_ : nullptr; }

  // The result and the count in registered memory, written by RDMA: for
  // invoke/remote_object.hpp.
  static Into written_at(R& result, const RemoteLocator& where, Synchronizer& sync, const RemoteLocator& counter) noexcept {
    Into i(result, sync);
    i.done_ = Completion::run_counted_at(sync, counter);
    i.where_ = where;
    i.by_rdma_ = true;
    return i;
  }

 private:
  R* result_;
  Completion done_;
  bool by_rdma_ = false;
  RemoteLocator where_;
};

template <class R>
Into<R> into(R& result, Synchronizer& sync) noexcept {
  return Into<R>(result, sync);
}

}  // namespace rdmx
