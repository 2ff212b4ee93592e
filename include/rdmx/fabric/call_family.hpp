// The call family, written once: call, call_buffer, call_return, broadcast
// and broadcast_buffer, the same for every path a call can take:
//   send-based     rdmx::call, rdmx::call_buffer, ... (fabric/call.hpp)
//   one-sided      rdmx::MessengerGlobal (invoke/messenger.hpp)
//   batched        rdmx::Aggregator (invoke/aggregator.hpp)
// A path is a class deriving from CallFamily<Path> that says how one
// described call (an Outgoing) leaves:
//   void submit(const Outgoing&)             required; never drops a call
//   void submit_broadcast(const Outgoing&)   broadcast and broadcast_buffer
//   bool try_submit(const Outgoing&)         the try_ calls: false when the
//                                            path has no room (nothing sent)
//   bool write_inline(ThreadId, uint64_t function, const F&)
//                                            a fast path for a call nobody
//                                            waits for; false: use submit
// The completion is the same everywhere too: a Completion value
// (fabric/completion.hpp) as the last argument, and call_return's result as
// a Future or written into the caller's object.
#pragma once
#include <concepts>
#include <cstdint>
#include <cstring>
#include <memory>
#include <new>
#include <span>
#include <type_traits>
#include <utility>

#include "rdmx/core/always_false.hpp"
#include "rdmx/core/future.hpp"
#include "rdmx/fabric/completion.hpp"
#include "rdmx/fabric/function_registry.hpp"
#include "rdmx/fabric/identity.hpp"
#include "rdmx/fabric/synchronizer.hpp"
#include "rdmx/transfer/remote_locator.hpp"

namespace rdmx::fabric {

enum class CallKind : std::uint8_t { call = 1, buffer = 2, returning = 3, broadcast = 4 };

// A received call as its invoker sees it.
struct Incoming {
  std::uint64_t function = 0;
  ThreadId source;
  const std::byte* closure = nullptr;
  std::size_t closure_size = 0;
  std::span<std::byte> data;
  // A returning invoker hands its result to the runtime here, which sends it back.
  void (*reply)(Incoming&, const void* result, std::size_t size) = nullptr;
  void* runtime = nullptr;
};

// What the templates below hand to the runtime.
struct Outgoing {
  ThreadId destination;
  CallKind kind = CallKind::call;
  std::uint64_t function = 0;
  const void* closure = nullptr;
  std::size_t closure_size = 0;
  std::span<const std::byte> data;
  Synchronizer* sync = nullptr;
  Notify notify = Notify::sent;
  void* result = nullptr;  // call_return: where the reply lands
  std::size_t result_size = 0;
  // One-sided calls only (invoke/remote_object.hpp): the caller's
  // Synchronizer count and call_return result in registered memory, which
  // the destination writes by RDMA instead of answering with a message.
  // Other paths answer by message.
  const RemoteLocator* remote_counter = nullptr;
  const RemoteLocator* remote_result = nullptr;
};

void send_call(const Outgoing& call);
void broadcast_call(const Outgoing& call);

template <class F>
F& closure_of(Incoming& in, std::byte (&storage)[sizeof(F)]) {
  // Trivially copyable closures are implicit-lifetime types: memcpy creates them.
  std::memcpy(storage, in.closure, sizeof(F));
  return *std::launder(reinterpret_cast<F*>(storage));
}

template <class F>
struct CallWrapper {
  static void invoke(Incoming& in) {
    alignas(F) std::byte storage[sizeof(F)];
    closure_of<F>(in, storage)();
  }
};

template <class F>
struct BufferWrapper {
  static void invoke(Incoming& in) {
    alignas(F) std::byte storage[sizeof(F)];
    F& f = closure_of<F>(in, storage);
    if constexpr (std::is_invocable_v<F&, std::span<std::byte>>)
      f(in.data);
    else
      f(static_cast<void*>(in.data.data()), static_cast<std::uint64_t>(in.data.size()));
  }
};

template <class F>
struct ReturnWrapper {
  static void invoke(Incoming& in) {
    alignas(F) std::byte storage[sizeof(F)];
    auto result = closure_of<F>(in, storage)();
    in.reply(in, &result, sizeof(result));
  }
};

// One-sentence errors for every entry point of the call family, which all
// build their Outgoing below. False:
// the invoker is not instantiated, so no page of follow-up errors.
template <template <class> class Wrapper, class F>
constexpr bool check_callee() {
  if constexpr (std::is_function_v<F> || std::is_pointer_v<F> || std::is_member_pointer_v<F>) {
    static_assert(always_false<F>, "rdmx: a remote call takes a lambda, not a function or function pointer: a pointer's value differs between processes (wrap it: [] { f(); })");
    return false;
  } else if constexpr (!std::is_trivially_copyable_v<F>) {
    static_assert(always_false<F>, "rdmx: a remotely called lambda must capture only trivially copyable values "
                                   "(send bulk data with call_buffer, or capture a RemoteLocator)");
    return false;
  } else if constexpr (std::is_same_v<Wrapper<F>, BufferWrapper<F>>) {
    constexpr bool ok = std::is_invocable_v<F&, std::span<std::byte>> || std::is_invocable_v<F&, void*, std::uint64_t>;
    static_assert(ok, "rdmx: a call_buffer lambda takes (std::span<std::byte>) or (void*, std::uint64_t)");
    return ok;
  } else if constexpr (!std::is_invocable_v<F&>) {
    static_assert(always_false<F>, "rdmx: a remotely called lambda takes no arguments: what it needs travels in its captures");
    return false;
  } else if constexpr (std::is_same_v<Wrapper<F>, ReturnWrapper<F>>) {
    using R = std::invoke_result_t<F&>;
    constexpr bool ok = !std::is_void_v<R> && std::is_trivially_copyable_v<R>;
    static_assert(ok, "rdmx: a call_return lambda must return a trivially copyable value");
    return ok;
  } else {
    return true;
  }
}

// call_return writes F's result into an R: they must be one type.
template <class F, class R>
constexpr void check_result_type() {
  static_assert(!std::is_invocable_v<const F&> || std::is_same_v<std::invoke_result_t<F&>, R>,
                "rdmx: call_return's result object is not of the type the lambda returns");
}

// The future state of a call_return that returns a Future: the reply lands
// in `slot`, `sync` counts it, and counting it down completes the future.
ProgressHook progress_hook() noexcept;

template <class R>
struct ReturnState final : rdmx::detail::FutureState<R> {
  Synchronizer sync;
  alignas(R) std::byte slot[sizeof(R)];
  // The state lives until the reply (or the failure) has landed, even when
  // the caller dropped its future.
  std::shared_ptr<rdmx::detail::FutureState<R>> self;

  static void done(Synchronizer& s, void* arg) {
    auto* state = static_cast<ReturnState*>(arg);
    const std::shared_ptr<rdmx::detail::FutureState<R>> keep = std::move(state->self);
    if (s.failed())
      state->set_error(s.error_code(), s.error_message());
    else  // R is trivially copyable: the reply's bytes are an R
      state->set_value(*std::launder(reinterpret_cast<R*>(state->slot)));
  }
};

template <template <class> class Wrapper, class F>
Outgoing outgoing(ThreadId dest, CallKind kind, const F& f, const Completion& done) {
  Outgoing o;
  o.destination = dest;
  o.kind = kind;
  if constexpr (check_callee<Wrapper, F>()) {
    o.function = FunctionId<Wrapper<F>>::value;
    o.closure = &f;
    o.closure_size = sizeof(F);
  }
  o.sync = done.synchronizer();
  o.notify = done.event();
  o.remote_counter = done.rdma_counter();
  return o;
}


template <class Path>
class CallFamily {
 public:
  // Thread dest runs func().
  template <class F>
  void call(ThreadId dest, const F& func, const Completion& done = {}) {
    if constexpr (requires(Path& p) { p.write_inline(dest, std::uint64_t{}, func); }) {
      if (done.synchronizer() == nullptr && path().write_inline(dest, FunctionId<CallWrapper<F>>::value, func)) [[likely]]
        return;
    }
    path().submit(outgoing<CallWrapper>(dest, CallKind::call, func, done));
  }
  // Thread dest runs func(std::span<std::byte>) (or func(void*, uint64_t)) on
  // a copy of `buffer` that travels with the call.
  template <class F>
  void call_buffer(ThreadId dest, const F& func, std::span<const std::byte> buffer, const Completion& done = {}) {
    path().submit(with_data(outgoing<BufferWrapper>(dest, CallKind::buffer, func, done), buffer));
  }
  // Thread dest runs func(); its (trivially copyable) result completes the
  // future. A failure (a dead peer, what func threw) fails it.
  template <class F>
  auto call_return(ThreadId dest, const F& func) {
    if constexpr (check_callee<ReturnWrapper, F>()) {
      using R = std::invoke_result_t<F&>;
      auto state = std::allocate_shared<ReturnState<R>>(rdmx::detail::RecyclingAllocator<ReturnState<R>>());
      state->progress = progress_hook();
      state->sync.on_done(&ReturnState<R>::done, state.get());
      state->self = state;
      Outgoing o = outgoing<ReturnWrapper>(dest, CallKind::returning, func, when_run(state->sync));
      o.result = state->slot;
      o.result_size = sizeof(R);
      try {
        path().submit(o);
      } catch (...) {  // nothing was sent: nothing will complete the state
        state->self.reset();
        throw;
      }
      return Future<R>(std::move(state));
    }
  }
  // The same, the result written into the caller's object (into(r, sync)),
  // after which its Synchronizer counts down.
  template <class F, class R>
  void call_return(ThreadId dest, const F& func, const Into<R>& result) {
    path().submit(returning(dest, func, result));
  }
  // Every worker thread of every process runs func(). when_run counts down
  // once, after all of them ran it.
  template <class F>
  void broadcast(const F& func, const Completion& done = {})
    requires requires(Path& p, const Outgoing& o) { p.submit_broadcast(o); }
  {
    path().submit_broadcast(outgoing<CallWrapper>(ThreadId{}, CallKind::broadcast, func, done));
  }
  // broadcast with a buffer that travels with the call (func(std::span<std::byte>)).
  template <class F>
  void broadcast_buffer(const F& func, std::span<const std::byte> buffer, const Completion& done = {})
    requires requires(Path& p, const Outgoing& o) { p.submit_broadcast(o); }
  {
    path().submit_broadcast(with_data(outgoing<BufferWrapper>(ThreadId{}, CallKind::broadcast, func, done), buffer));
  }

  // As above, but a path that has no room now refuses the call instead of
  // waiting for room: false, and nothing was sent.
  template <class F>
  [[nodiscard]] bool try_call(ThreadId dest, const F& func, const Completion& done = {})
    requires requires(Path& p, const Outgoing& o) { { p.try_submit(o) } -> std::same_as<bool>; }
  {
    return path().try_submit(outgoing<CallWrapper>(dest, CallKind::call, func, done));
  }
  template <class F>
  [[nodiscard]] bool try_call_buffer(ThreadId dest, const F& func, std::span<const std::byte> buffer, const Completion& done = {})
    requires requires(Path& p, const Outgoing& o) { { p.try_submit(o) } -> std::same_as<bool>; }
  {
    return path().try_submit(with_data(outgoing<BufferWrapper>(dest, CallKind::buffer, func, done), buffer));
  }
  template <class F, class R>
  [[nodiscard]] bool try_call_return(ThreadId dest, const F& func, const Into<R>& result)
    requires requires(Path& p, const Outgoing& o) { { p.try_submit(o) } -> std::same_as<bool>; }
  {
    return path().try_submit(returning(dest, func, result));
  }

 protected:
  static Outgoing with_data(Outgoing o, std::span<const std::byte> data) {
    o.data = data;
    return o;
  }
  template <class F, class R>
  static Outgoing returning(ThreadId dest, const F& func, const Into<R>& result) {
    check_result_type<F, R>();
    Outgoing o = outgoing<ReturnWrapper>(dest, CallKind::returning, func, result.completion());
    o.result = result.result();
    o.result_size = sizeof(R);
    o.remote_result = result.rdma_result();
    return o;
  }

 private:
  Path& path() { return static_cast<Path&>(*this); }

};

}  // namespace rdmx::fabric
