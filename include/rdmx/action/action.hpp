// Typed remote actions (HPX's async over parcels, section 3.3): call any
// function with any serializable arguments on another worker thread, get a
// future of its result. Large arguments are not copied on the way: they
// travel as pointer or RMA chunks that the destination pulls with RDMA gets
// straight into the argument objects (SerializeBuffer, RmaVector).
//
//   int add(int a, int b) { return a + b; }
//   double norm(const rdmx::serial::SerializeBuffer<double>& v);
//
//   job.run([&](rdmx::ThreadId me) {
//     rdmx::Future<int> f = rdmx::async(rdmx::action<&add>, {1, 0}, 2, 3);
//     f.then([](int& sum) { use(sum); });
//     rdmx::post(rdmx::action<&add>, {1, 0}, 4, 5);           // nobody waits
//     auto g = rdmx::async([](std::string s) { return s.size(); }, {1, 0}, std::string("hi"));
//     rdmx::serial::SerializeBuffer<double> v(1 << 20);       // pulled by RDMA, not copied
//     rdmx::Synchronizer sent;
//     auto n2 = rdmx::async(rdmx::when_sent(sent), rdmx::action<&norm>, {1, 0}, v);
//     sent.wait();                                              // v may be changed now
//     std::size_t n = g.get();                                  // progresses this thread
//     auto h = rdmx::async(rdmx::parcel::Path::send, rdmx::action<&add>, {1, 0}, 6, 7);  // this call as a UCX active message
//   });
//
// Actions: rdmx::action<&function> for a function, or a lambda without
// captures (pass it directly, or as rdmx::action<lambda_constant>). Their id
// is a hash of their type's mangled name, the same in every process of a
// program, registered during static initialization. RemoteAction<R(A...)>
// calls an action known only by its id (rdmx::action_id), as another
// program would; a caller whose argument types differ from the action's
// gets Errc::bad_archive and the action does not run.
//
// Arguments are taken as std::async takes them: rvalues are moved into the
// parcel, lvalues copied, except SerializeBuffer, RmaVector and
// RmaValue, whose copies share memory (the way to send data you keep
// without copying it) and lvalues small enough to travel inline. The
// destination runs the action on its worker thread when that thread
// progresses; results and exceptions come back in a reply that completes
// the future when the calling thread progresses (waiting on any rdmx future
// or Synchronizer, rdmx::progress()). An exception thrown by the action
// fails the future with Errc::remote_exception (its type and what()); a
// destination process that dies fails it with Errc::peer_failed.
//
// Called from worker threads only (like MessengerGlobal). Parcels from one
// thread to another are not ordered (an eager one may overtake a large one).
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "rdmx/core/always_false.hpp"
#include "rdmx/core/future.hpp"
#include "rdmx/fabric/completion.hpp"
#include "rdmx/fabric/identity.hpp"
#include "rdmx/action/parcel.hpp"
#include "rdmx/serial/rma_value.hpp"
#include "rdmx/serial/rma_vector.hpp"
#include "rdmx/serial/serial.hpp"

namespace rdmx {

// The action that calls F: a function pointer or a captureless lambda constant.
template <auto F>
struct action_t {};
template <auto F>
inline constexpr action_t<F> action{};

// An action known by its id only, believed to take A... and return R.
template <class Signature>
class RemoteAction;
template <class R, class... A>
class RemoteAction<R(A...)> {
 public:
  constexpr explicit RemoteAction(std::uint64_t id) noexcept : id_(id) {}
  constexpr std::uint64_t id() const noexcept { return id_; }

 private:
  std::uint64_t id_;
};

namespace parcel::detail {

template <class... T>
struct types {};

// R(P...) of a function pointer or of a class's operator().
template <class T>
struct signature : signature<decltype(&T::operator())> {};
template <class R, class... P>
struct signature<R (*)(P...)> {
  using result = R;
  using params = types<P...>;
};
template <class R, class... P>
struct signature<R (*)(P...) noexcept> : signature<R (*)(P...)> {};
template <class C, class R, class... P>
struct signature<R (C::*)(P...) const> : signature<R (*)(P...)> {};
template <class C, class R, class... P>
struct signature<R (C::*)(P...) const noexcept> : signature<R (*)(P...)> {};
template <class C, class R, class... P>
struct signature<R (C::*)(P...)> : signature<R (*)(P...)> {};
template <class C, class R, class... P>
struct signature<R (C::*)(P...) noexcept> : signature<R (*)(P...)> {};

template <class T>
concept captureless = std::is_class_v<T> && std::is_empty_v<T> && std::is_default_constructible_v<T> &&
                      requires { &T::operator(); };

template <class R, class Params>
struct traits_base;
template <class R, class... P>
struct traits_base<R, types<P...>> {
  using result = std::remove_cvref_t<R>;
  using params = types<P...>;
  using stored = std::tuple<std::remove_cvref_t<P>...>;  // what the destination decodes into
  static constexpr std::size_t arity = sizeof...(P);
  static std::uint64_t argument_signature() { return serial::signature_of<std::remove_cvref_t<P>...>(); }
  static std::string argument_types() { return serial::detail::type_list<std::remove_cvref_t<P>...>(); }
};

template <class A>
struct action_traits;
template <auto F>
struct action_traits<action_t<F>>
    : traits_base<typename signature<std::remove_cv_t<decltype(F)>>::result, typename signature<std::remove_cv_t<decltype(F)>>::params> {
  template <class... V>
  static decltype(auto) call(V&&... v) {
    return std::invoke(F, std::forward<V>(v)...);
  }
};
template <captureless C>
struct action_traits<C> : traits_base<typename signature<C>::result, typename signature<C>::params> {
  template <class... V>
  static decltype(auto) call(V&&... v) {
    return std::invoke(C{}, std::forward<V>(v)...);
  }
};
template <class R, class... A>
struct action_traits<RemoteAction<R(A...)>> : traits_base<R, types<A...>> {};

// The receiving half of action A: decode, run, answer.
template <class A>
struct ActionWrapper {
  using T = action_traits<A>;
  using R = typename T::result;

  static void handle(const parcel::Received& in, parcel::Responder& out) {
    typename T::stored args;
    try {
      serial::InputArchive ar(in.message, in.chunks, in.options);
      if (!ar.signature_matches(T::argument_signature()))
        ar.fail("type signature mismatch: the caller sent other argument types than " + parcel::action_name(id) +
                " takes (mangled: " + T::argument_types() + ")");
      std::apply([&ar](auto&... v) { ar(v...); }, args);
      ar.finish();
    } catch (const Error& e) {
      out.fail(e.code(), "the arguments for " + parcel::action_name(id) + " were rejected, nothing ran: " + e.what());
      return;
    }
    try {
      if constexpr (std::is_void_v<R>) {
        run(args, typename T::params{});
        if (out.wants_result()) {
          out.archive().set_signature(serial::signature_of<>());
          out.reply();
        }
      } else {
        R result = run(args, typename T::params{});
        if (out.wants_result()) {
          serial::OutputArchive& ar = out.archive();
          ar.set_signature(serial::signature_of<R>());
          ar(std::move(result));
          out.reply();
        }
      }
    } catch (...) {
      out.fail_with_current_exception(id);
    }
  }

  // Each argument as the parameter wants it: by value and && take the
  // decoded object over, & and const& refer to it.
  template <class... P>
  static decltype(auto) run(typename T::stored& args, types<P...>) {
    return [&]<std::size_t... I>(std::index_sequence<I...>) -> decltype(auto) {
      return T::call(static_cast<P&&>(std::get<I>(args))...);
    }(std::index_sequence_for<P...>{});
  }

  static inline const std::uint64_t id = parcel::ActionRegistry::instance().add(typeid(ActionWrapper).name(), &handle);
};

// One-sentence errors for the public entry points instead of a page of
// template instantiations. Each check asserts what is wrong and returns
// false, so the caller instantiates nothing more.
template <class A>
constexpr bool check_action_kind() {
  if constexpr (std::is_function_v<A> || std::is_pointer_v<A> || std::is_member_pointer_v<A>) {
    static_assert(always_false<A>, "rdmx: pass a function as rdmx::action<&f>: an action is named at compile time, a function pointer value cannot be");
    return false;
  } else if constexpr (captureless<A> || requires { typename action_traits<A>::params; }) {
    return true;
  } else if constexpr (std::is_class_v<A> && requires { &A::operator(); }) {
    static_assert(always_false<A>, "rdmx actions must be captureless lambdas or functions: captures cannot travel to another process (pass the values as arguments)");
    return false;
  } else if constexpr (std::is_class_v<A> && std::is_empty_v<A>) {
    static_assert(always_false<A>, "rdmx: an action lambda cannot be generic (auto parameters): its parameter types decide what is sent");
    return false;
  } else {
    static_assert(always_false<A>, "rdmx: not an action: pass rdmx::action<&f>, a captureless lambda or an rdmx::RemoteAction<R(A...)>");
    return false;
  }
}

template <class A, class... V>
constexpr bool check_arguments() {
  using T = action_traits<A>;
  if constexpr (sizeof...(V) != T::arity) {
    static_assert(always_false<A>, "rdmx: wrong number of arguments for this action");
    return false;
  } else {
    return []<class... P>(types<P...>) {
      constexpr bool converts = (std::is_constructible_v<std::remove_cvref_t<P>, V&&> && ...);
      static_assert(converts, "rdmx: an argument does not convert to the type of the action's parameter");
      constexpr bool serial = (serial::serializable<std::remove_cvref_t<P>> && ...);
      static_assert(!converts || serial,
                    "rdmx: a parameter type of the action cannot be serialized: give it a serialize(Archive&) member "
                    "(rdmx/serial/access.hpp), or include rdmx/serial/serial.hpp for standard types");
      using R = typename T::result;
      constexpr bool result = std::is_void_v<R> || serial::serializable<R>;
      static_assert(!converts || !serial || result, "rdmx: the action's result type cannot be serialized");
      return converts && serial && result;
    }(typename T::params{});
  }
}

// The action A can be called with arguments V... (else one static_assert said why).
template <class A, class... V>
constexpr bool callable() {
  if constexpr (!check_action_kind<A>())
    return false;
  else
    return check_arguments<A, V...>();
}

template <class A>
std::uint64_t id_of(const A& a) {
  if constexpr (requires { a.id(); })
    return a.id();
  else
    return ActionWrapper<A>::id;
}

// Types whose copies share memory with the original: serialized as an
// lvalue, the archive holds a reference instead of a copy.
template <class T>
inline constexpr bool shares_memory = false;
template <class T>
inline constexpr bool shares_memory<serial::SerializeBuffer<T>> = true;
template <class T>
inline constexpr bool shares_memory<serial::RmaVector<T>> = true;
template <class T>
inline constexpr bool shares_memory<serial::RmaValue<T>> = true;

// Whether `value` becomes inline bytes only (so serializing the caller's
// lvalue leaves nothing pointing at it). Conservative: unknown types say no.
template <class D>
bool travels_inline(const D& value, std::size_t threshold) {
  if (threshold == 0) return true;  // zero copy off: no chunks at all
  if constexpr (serial::bitwise_serializable<D>) {
    return sizeof(D) < threshold;
  } else if constexpr (requires { typename D::value_type; value.size(); value.data(); }) {
    if constexpr (serial::bitwise_serializable<typename D::value_type> &&
                  (std::is_same_v<D, std::vector<typename D::value_type>> ||
                   std::is_same_v<D, std::basic_string<typename D::value_type>>))
      return value.size() * sizeof(typename D::value_type) < threshold;
    else
      return false;
  } else {
    return std::is_arithmetic_v<D> || std::is_enum_v<D>;
  }
}

template <class D, class V>
void save_argument(serial::OutputArchive& ar, V&& value) {
  using U = std::remove_cvref_t<V>;
  if constexpr (!std::is_same_v<U, D>) {
    ar(D(std::forward<V>(value)));  // converted: a temporary the archive keeps if it made chunks
  } else if constexpr (std::is_lvalue_reference_v<V> && !shares_memory<D>) {
    if (travels_inline(value, ar.zero_copy_threshold()))
      ar(value);
    else
      ar(D(value));  // the caller may change its variable at once: send a copy
  } else {
    ar(std::forward<V>(value));
  }
}

template <class A, class... V>
void save_arguments(serial::OutputArchive& ar, V&&... values) {
  using T = action_traits<A>;
  ar.set_signature(T::argument_signature());
  [&]<class... P>(types<P...>) { (save_argument<std::remove_cvref_t<P>>(ar, std::forward<V>(values)), ...); }(
      typename T::params{});
}

template <class R>
void deliver(rdmx::detail::FutureStateBase& base, const parcel::Received& in) {
  auto& state = static_cast<rdmx::detail::FutureState<R>&>(base);
  std::conditional_t<std::is_void_v<R>, char, R> result{};
  try {
    serial::InputArchive ar(in.message, in.chunks, in.options);
    if constexpr (std::is_void_v<R>) {
      if (!ar.signature_matches(serial::signature_of<>())) ar.fail("type signature mismatch: the reply carries a result, none was expected");
    } else {
      if (!ar.signature_matches(serial::signature_of<R>()))
        ar.fail("type signature mismatch: the reply is not of the expected (mangled) " + serial::detail::type_list<R>());
      ar(result);
    }
    ar.finish();
  } catch (const Error& e) {
    state.set_error(e.code(), std::string("the result of a remote action was rejected: ") + e.what());
    return;
  }
  if constexpr (std::is_void_v<R>)
    state.set_value();
  else
    state.set_value(std::move(result));
}

// The completion's Synchronizer, counted up for the parcel: down when the
// argument buffers may be reused (when_sent) or when the reply has
// completed the future (when_run); failed with what ended the parcel.
inline SentCallback count_when_sent(const Completion& done) {
  Synchronizer* sync = done.synchronizer();
  if (sync == nullptr || done.event() != fabric::Notify::sent) return {};
  sync->add();
  return [sync](const Error* failure) {
    if (failure != nullptr)
      sync->fail(failure->code(), failure->what());
    else
      sync->notify();
  };
}
inline void count_when_run(const Completion& done, rdmx::detail::FutureStateBase& state) {
  Synchronizer* sync = done.synchronizer();
  if (sync == nullptr || done.event() != fabric::Notify::consumed) return;
  sync->add();
  state.then_run([sync, &state] {
    if (state.status.load(std::memory_order_acquire) == rdmx::detail::FutureStateBase::failed)
      sync->fail(state.code, state.message);
    else
      sync->notify();
  });
}

template <class A, class... V>
Future<typename action_traits<std::remove_cvref_t<A>>::result> send(parcel::Path path, const Completion& done, const A& a,
                                                                     ThreadId dest, V&&... values) {
  using T = action_traits<std::remove_cvref_t<A>>;
  using R = typename T::result;
  Promise<R> promise(parcel::progress_hook());
  Future<R> future = promise.get_future();
  parcel::SentCallback sent = count_when_sent(done);
  try {
    parcel::ArchiveLease lease;
    save_arguments<std::remove_cvref_t<A>>(*lease, std::forward<V>(values)...);
    parcel::ReplyTarget reply{future.shared_state(), &deliver<R>};
    parcel::send_request(path, dest, id_of(a), lease, &reply, sent ? &sent : nullptr);
  } catch (...) {
    // Nothing was sent: the buffers may be reused, and the future says why.
    promise.set_exception(std::current_exception());
    if (sent) {
      const Error why(promise.state().code, promise.state().message);
      sent(&why);
    }
  }
  count_when_run(done, *future.shared_state());
  return future;
}

}  // namespace parcel::detail

// The id under which an action travels (for RemoteAction in another program).
template <class A>
std::uint64_t action_id(const A& a) {
  if constexpr (parcel::detail::check_action_kind<A>())
    return parcel::detail::id_of(a);
  else
    return 0;
}

// dest runs the action with `args`; the future completes with its result.
// Optional, in front: the path the parcel takes (rdmx::parcel::Path;
// docs/action.md, "Which path"; without it, the process-wide choice), and a
// completion (fabric/completion.hpp): when_sent(sync) counts down once the
// arguments' buffers may be reused (at once for an eager parcel, once the
// destination has pulled the chunks of a rendezvous one), when_run(sync)
// once the future is complete; either fails with what failed the parcel.
template <class A, class... V>
auto async(parcel::Path path, const Completion& done, const A& a, ThreadId dest, V&&... args) {
  if constexpr (parcel::detail::callable<A, V...>())
    return parcel::detail::send(path, done, a, dest, std::forward<V>(args)...);
  else
    return Future<void>();  // after the static_assert: no second error about the result
}
template <class A, class... V>
auto async(parcel::Path path, const A& a, ThreadId dest, V&&... args) {
  return async(path, Completion{}, a, dest, std::forward<V>(args)...);
}
template <class A, class... V>
auto async(const Completion& done, const A& a, ThreadId dest, V&&... args) {
  return async(parcel::Path::automatic, done, a, dest, std::forward<V>(args)...);
}
template <class A, class... V>
auto async(const A& a, ThreadId dest, V&&... args) {
  return async(parcel::Path::automatic, Completion{}, a, dest, std::forward<V>(args)...);
}

// Fire and forget: dest runs the action; nothing comes back (an exception
// it throws is printed there). Throws what prevented sending. With a
// completion (as async's), it is an async whose future nobody holds: what
// the action throws, and what prevents sending, fail the completion.
template <class A, class... V>
void post(parcel::Path path, const Completion& done, const A& a, ThreadId dest, V&&... args) {
  if constexpr (parcel::detail::callable<A, V...>()) {
    if (done.synchronizer() != nullptr) {
      (void)parcel::detail::send(path, done, a, dest, std::forward<V>(args)...);
      return;
    }
    parcel::ArchiveLease lease;
    parcel::detail::save_arguments<std::remove_cvref_t<A>>(*lease, std::forward<V>(args)...);
    parcel::send_request(path, dest, parcel::detail::id_of(a), lease, nullptr, nullptr);
  }
}
template <class A, class... V>
void post(parcel::Path path, const A& a, ThreadId dest, V&&... args) {
  post(path, Completion{}, a, dest, std::forward<V>(args)...);
}
template <class A, class... V>
void post(const Completion& done, const A& a, ThreadId dest, V&&... args) {
  post(parcel::Path::automatic, done, a, dest, std::forward<V>(args)...);
}
template <class A, class... V>
void post(const A& a, ThreadId dest, V&&... args) {
  post(parcel::Path::automatic, Completion{}, a, dest, std::forward<V>(args)...);
}

}  // namespace rdmx
