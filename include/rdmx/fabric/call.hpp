// Send-based (no-setup) remote invocation: Seriema Table 1 over UCX active
// messages. The callee is a lambda; its captures travel with the call, so they
// must be trivially copyable (plain values, not owning containers): pass bulk
// data as the call_buffer buffer. Calls from one thread to another run in the
// order they were issued, on the destination thread, when it calls
// rdmx::progress() (or waits on anything).
//
//   rdmx::Synchronizer sync;
//   rdmx::call<rdmx::Notify::consumed>({1, 0}, [x = 42] { use(x); }, sync);
//   sync.wait();  // ran on process 1, thread 0
#pragma once
#include <cstdint>
#include <cstring>
#include <new>
#include <span>
#include <type_traits>
#include <utility>

#include "rdmx/core/future.hpp"
#include "rdmx/fabric/function_registry.hpp"
#include "rdmx/fabric/identity.hpp"
#include "rdmx/fabric/synchronizer.hpp"
#include "rdmx/transfer/remote_locator.hpp"

namespace rdmx {
namespace fabric {

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

template <class>
inline constexpr bool always_false = false;

// One-sentence errors for every entry point of the call family (here, in
// messengers and aggregators), which all build their Outgoing below. False:
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

template <template <class> class Wrapper, class F>
Outgoing outgoing(ThreadId dest, CallKind kind, const F& f, Synchronizer* sync, Notify notify) {
  Outgoing o;
  o.destination = dest;
  o.kind = kind;
  if constexpr (check_callee<Wrapper, F>()) {
    o.function = FunctionId<Wrapper<F>>::value;
    o.closure = &f;
    o.closure_size = sizeof(F);
  }
  o.sync = sync;
  o.notify = notify;
  return o;
}

}  // namespace fabric

// Thread dest runs func().
template <Notify N = Notify::sent, class F>
void call(ThreadId dest, const F& func, Synchronizer* sync = nullptr) {
  fabric::send_call(fabric::outgoing<fabric::CallWrapper>(dest, fabric::CallKind::call, func, sync, N));
}
template <Notify N = Notify::sent, class F>
void call(ThreadId dest, const F& func, Synchronizer& sync) {
  call<N>(dest, func, &sync);
}

// Thread dest runs func(std::span<std::byte>) (or func(void*, uint64_t)) on a
// copy of `buffer` that travels with the call. Without a Synchronizer the call
// returns once `buffer` may be reused; with one, once it was counted down.
template <Notify N = Notify::sent, class F>
void call_buffer(ThreadId dest, const F& func, std::span<const std::byte> buffer, Synchronizer* sync = nullptr) {
  auto o = fabric::outgoing<fabric::BufferWrapper>(dest, fabric::CallKind::buffer, func, sync, N);
  o.data = buffer;
  fabric::send_call(o);
}
template <Notify N = Notify::sent, class F>
void call_buffer(ThreadId dest, const F& func, std::span<const std::byte> buffer, Synchronizer& sync) {
  call_buffer<N>(dest, func, buffer, &sync);
}

// Thread dest runs func(); its (trivially copyable) result is written into
// *orig, after which sync counts down.
template <class F, class R>
void call_return(ThreadId dest, const F& func, R* orig, Synchronizer& sync) {
  fabric::check_result_type<F, R>();
  auto o = fabric::outgoing<fabric::ReturnWrapper>(dest, fabric::CallKind::returning, func, &sync, Notify::consumed);
  o.result = orig;
  o.result_size = sizeof(R);
  fabric::send_call(o);
}

// Every worker thread of every process runs func(); messages fan out over a
// binomial tree of processes. With Notify::consumed, sync counts down once,
// after all threads ran it.
template <Notify N = Notify::sent, class F>
void broadcast(const F& func, Synchronizer* sync = nullptr) {
  auto o = fabric::outgoing<fabric::CallWrapper>(ThreadId{}, fabric::CallKind::broadcast, func, sync, N);
  fabric::broadcast_call(o);
}
template <Notify N = Notify::sent, class F>
void broadcast(const F& func, Synchronizer& sync) {
  broadcast<N>(func, &sync);
}

}  // namespace rdmx
