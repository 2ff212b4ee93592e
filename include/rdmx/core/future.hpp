// Future<T>/Promise<T>: the result of a non-blocking operation, in the style
// of UPC++'s futures with std::future's ownership. Waiting drives the
// progress engine the operation needs (UCX completes operations only while
// its worker is progressed), so get() never deadlocks a single-threaded
// program.
//
// Ownership (as std::future / std::shared_future):
//   T v = f.get();                  the value, moved out; f is invalid afterwards
//                                   (a second get() throws rdmx::Error)
//   SharedFuture<T> s = f.share();  copyable; s.get() returns const T&, any number
//                                   of times, from any thread
//   f.wait_for(10ms)                future_status::ready or ::timeout
//
// Continuations (HPX / UPC++ style; then() consumes f):
//   f.then([](T& value) { ... })        runs once f is ready; f's error skips it
//   f.then([](Future<T> done) { ... })  runs once f is ready or failed
//   when_all(std::vector<Future<T>>)    ready once all are (never fails: inspect each)
//   when_all(Future<A>, Future<B>, ...) the same for futures of different types
//   when_any(...)                       ready once one is: its index and the futures
//   wait_any(range or futures...)       progresses until one is complete: its index
// A continuation runs on the thread that completes its future (for rdmx's
// remote actions: the calling thread, while it progresses), or at once in
// then() when the future is ready already. If it returns a Future<U>, then()
// returns a Future<U> that completes with it (no Future<Future<U>>). What a
// continuation throws fails the future then() returned.
#pragma once
#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "rdmx/core/backoff.hpp"
#include "rdmx/core/error.hpp"
#include "rdmx/core/recycled_blocks.hpp"

namespace rdmx {

// Something a waiter can poke to make completions happen.
struct ProgressHook {
  bool (*fn)(void*) = nullptr;
  void* arg = nullptr;
  bool operator()() const { return fn != nullptr && fn(arg); }
};

template <class T>
class Future;
template <class T>
class SharedFuture;

// What wait_for / wait_until found.
enum class future_status { ready, timeout };

namespace detail {

// A continuation waiting for a future. Lock-free: a state keeps them on an
// intrusive stack that completing the state swaps out for a marker.
struct Continuation {
  virtual ~Continuation() = default;
  virtual void run() noexcept = 0;
  Continuation* next = nullptr;
};
template <class Fn>
struct ContinuationOf final : Continuation {
  explicit ContinuationOf(Fn f) : fn(std::move(f)) {}
  void run() noexcept override { fn(); }
  Fn fn;
};

// The part of a future's state that does not depend on T.
struct FutureStateBase {
  enum : int { pending, ready, failed };
  FutureStateBase() = default;
  FutureStateBase(const FutureStateBase&) = delete;
  FutureStateBase& operator=(const FutureStateBase&) = delete;
  ~FutureStateBase() {
    Continuation* c = continuations.load(std::memory_order_acquire);
    while (c != nullptr && c != fired()) delete std::exchange(c, c->next);
  }

  std::atomic<int> status{pending};
  bool is_pending() const noexcept { return status.load(std::memory_order_acquire) == pending; }
  Errc code = Errc::transport;
  std::string message;
  std::exception_ptr exception;  // set: get() rethrows it (a continuation's own exception)
  ProgressHook progress;

  void set_error(Errc c, std::string text) {
    code = c;
    message = std::move(text);
    complete(failed);
  }
  void set_exception(std::exception_ptr e) {
    try {
      std::rethrow_exception(e);
    } catch (const Error& error) {
      code = error.code();
      message = error.what();
    } catch (const std::exception& other) {
      code = Errc::invalid_argument;
      message = other.what();
    } catch (...) {
      code = Errc::invalid_argument;
      message = "a non-standard exception";
    }
    exception = std::move(e);
    complete(failed);
  }
  void copy_failure(const FutureStateBase& from) {
    code = from.code;
    message = from.message;
    exception = from.exception;
    complete(failed);
  }
  [[noreturn]] void rethrow() const {
    if (exception) std::rethrow_exception(exception);
    throw Error(code, message);
  }

  // Runs c once this state is complete (at once if it is).
  void add_continuation(Continuation* c) noexcept {
    Continuation* head = continuations.load(std::memory_order_acquire);
    do {
      if (head == fired()) {
        c->run();
        delete c;
        return;
      }
      c->next = head;
    } while (!continuations.compare_exchange_weak(head, c, std::memory_order_acq_rel, std::memory_order_acquire));
  }
  template <class Fn>
  void then_run(Fn fn) {
    add_continuation(new ContinuationOf<Fn>(std::move(fn)));
  }

 protected:
  void complete(int outcome) noexcept {
    status.store(outcome, std::memory_order_release);
    Continuation* list = continuations.exchange(fired(), std::memory_order_acq_rel);
    if (list == fired()) return;
    Continuation* fifo = nullptr;  // registration order
    while (list != nullptr) {
      Continuation* c = list;
      list = c->next;
      c->next = fifo;
      fifo = c;
    }
    while (fifo != nullptr) {
      Continuation* c = fifo;
      fifo = c->next;
      c->run();
      delete c;
    }
  }

 private:
  static Continuation* fired() noexcept { return reinterpret_cast<Continuation*>(std::uintptr_t{1}); }
  std::atomic<Continuation*> continuations{nullptr};
};

template <class T>
struct FutureState : FutureStateBase, std::enable_shared_from_this<FutureState<T>> {
  std::optional<std::conditional_t<std::is_void_v<T>, bool, T>> value;

  template <class... V>
  void set_value(V&&... v) {
    if constexpr (std::is_void_v<T>)
      value.emplace(true);
    else
      value.emplace(std::forward<V>(v)...);
    complete(ready);
  }
};

// One state per operation (rdmx::async makes one per call): recycled per
// thread rather than allocated.
template <class T>
std::shared_ptr<FutureState<T>> make_state() {
  return std::allocate_shared<FutureState<T>>(RecyclingAllocator<FutureState<T>>());
}

template <class T>
struct is_future : std::false_type {};
template <class T>
struct is_future<Future<T>> : std::true_type {};
template <class T>
struct unwrap_future {
  using type = T;
};
template <class T>
struct unwrap_future<Future<T>> {
  using type = T;
};

// Complete `next` with what `call()` returns (a value, nothing, or a future to follow).
template <class U, class Call>
void complete_with(const std::shared_ptr<FutureState<U>>& next, Call&& call);

}  // namespace detail

namespace detail {

[[noreturn]] inline void throw_no_state(const char* operation) {
  throw Error(Errc::invalid_argument, std::string("rdmx future: ") + operation +
                                          " on a future without a state (its value was already taken by get(), "
                                          "it was moved from, shared, continued with then(), or default-constructed)");
}

// What Future and SharedFuture share: the state, asking it, waiting for it.
// Waiting progresses the state's progress hook (never a condition variable):
// the thread that waits is often the one whose progress completes the state.
template <class T>
class FutureBase {
 public:
  using value_type = T;
  bool valid() const noexcept { return state_ != nullptr; }
  bool ready() const { return state("ready()").status.load(std::memory_order_acquire) != FutureStateBase::pending; }
  bool failed() const { return state("failed()").status.load(std::memory_order_acquire) == FutureStateBase::failed; }
  // The failure's code and text (valid once failed()).
  Errc error_code() const { return state("error_code()").code; }
  const std::string& error_message() const { return state("error_message()").message; }

  // Progress until complete (without throwing its error).
  void wait() const {
    const FutureStateBase& s = state("wait()");
    Backoff backoff;
    while (s.is_pending()) {
      const bool busy = s.progress();
      // The poll that completed it may look idle (it ran no call): backing
      // off then would hand the core away just as this thread has work.
      if (!s.is_pending()) break;
      backoff(busy);
    }
  }
  // Progress until complete or `timeout` has passed; ready means complete (ready or failed).
  template <class Rep, class Period>
  future_status wait_for(const std::chrono::duration<Rep, Period>& timeout) const {
    return wait_until(std::chrono::steady_clock::now() + timeout);
  }
  template <class Clock, class Duration>
  future_status wait_until(const std::chrono::time_point<Clock, Duration>& deadline) const {
    const FutureStateBase& s = state("wait_until()");
    Backoff backoff;
    while (s.is_pending()) {
      if (Clock::now() >= deadline) return future_status::timeout;
      const bool busy = s.progress();
      if (!s.is_pending()) break;  // no back-off once complete (wait above)
      backoff(busy);
    }
    return future_status::ready;
  }

  // For rdmx's internals (when_all, the action layer).
  const std::shared_ptr<FutureState<T>>& shared_state() const noexcept { return state_; }

 protected:
  FutureBase() noexcept = default;
  explicit FutureBase(std::shared_ptr<FutureState<T>> s) noexcept : state_(std::move(s)) {}
  FutureState<T>& state(const char* operation) const {
    if (state_ == nullptr) throw_no_state(operation);
    return *state_;
  }
  // Waits, then returns the completed state or throws its failure.
  FutureState<T>& completed(const char* operation) const {
    FutureState<T>& s = state(operation);
    wait();
    if (s.status.load(std::memory_order_acquire) == FutureStateBase::failed) s.rethrow();
    return s;
  }

  std::shared_ptr<FutureState<T>> state_;
};

}  // namespace detail

// The result of one operation, with std::future's ownership: move-only, and
// get(), share() and then() consume it (valid() is false afterwards; using
// it again throws rdmx::Error instead of being undefined).
template <class T>
class Future : public detail::FutureBase<T> {
  using Base = detail::FutureBase<T>;

 public:
  Future() noexcept = default;
  explicit Future(std::shared_ptr<detail::FutureState<T>> state) noexcept : Base(std::move(state)) {}
  Future(Future&&) noexcept = default;
  Future& operator=(Future&&) noexcept = default;
  Future(const Future&) = delete;
  Future& operator=(const Future&) = delete;

  // Progress until complete; returns the value (moved out) or throws the
  // operation's error. Either way the future is invalid afterwards.
  T get() {
    this->wait();
    const std::shared_ptr<detail::FutureState<T>> owned = std::move(this->state_);
    if (owned->status.load(std::memory_order_acquire) == detail::FutureStateBase::failed) owned->rethrow();
    if constexpr (!std::is_void_v<T>) return std::move(*owned->value);
  }

  // A copyable handle whose get() may be called any number of times.
  SharedFuture<T> share() { return SharedFuture<T>(take("share()")); }

  // f(T&) (f() for Future<void>), skipped on failure; or f(Future<T>), always.
  // Consumes this future (like get()): its value goes to f.
  template <class F>
  auto then(F&& f) {
    constexpr bool takes_future = std::is_invocable_v<F&, Future<T>>;
    using Raw = decltype(call_continuation(std::declval<F&>(), std::declval<detail::FutureState<T>&>()));
    using U = typename detail::unwrap_future<Raw>::type;
    std::shared_ptr<detail::FutureState<T>> owned = take("then()");
    auto next = detail::make_state<U>();
    next->progress = owned->progress;
    detail::FutureState<T>* source = owned.get();
    owned->then_run([source, next, fn = std::forward<F>(f)]() mutable {
      if (!takes_future && source->status.load(std::memory_order_acquire) == detail::FutureStateBase::failed) {
        next->copy_failure(*source);
        return;
      }
      try {
        detail::complete_with(next, [&]() -> decltype(auto) { return call_continuation(fn, *source); });
      } catch (...) {
        next->set_exception(std::current_exception());
      }
    });
    return Future<U>(std::move(next));
  }

 private:
  std::shared_ptr<detail::FutureState<T>> take(const char* operation) {
    if (this->state_ == nullptr) detail::throw_no_state(operation);
    return std::move(this->state_);
  }
  template <class F>
  static decltype(auto) call_continuation(F& f, detail::FutureState<T>& source) {
    if constexpr (std::is_invocable_v<F&, Future<T>>)
      return std::invoke(f, Future<T>(source.shared_from_this()));
    else if constexpr (std::is_void_v<T>)
      return std::invoke(f);
    else
      return std::invoke(f, *source.value);
  }
};

// A copyable view of one result, for several readers (threads included):
// get() returns a reference into the shared state, valid while any copy lives.
template <class T>
class SharedFuture : public detail::FutureBase<T> {
  using Base = detail::FutureBase<T>;

 public:
  SharedFuture() noexcept = default;
  explicit SharedFuture(std::shared_ptr<detail::FutureState<T>> state) noexcept : Base(std::move(state)) {}
  SharedFuture(Future<T>&& f) : SharedFuture(f.share()) {}  // NOLINT: implicit, as std::shared_future's

  // Progress until complete; the value, or throws the operation's error.
  decltype(auto) get() const {
    detail::FutureState<T>& s = this->completed("get()");
    if constexpr (!std::is_void_v<T>) return static_cast<const T&>(*s.value);
  }
};

namespace detail {
template <class U, class Call>
void complete_with(const std::shared_ptr<FutureState<U>>& next, Call&& call) {
  using Raw = decltype(call());
  if constexpr (is_future<std::remove_cvref_t<Raw>>::value) {
    std::remove_cvref_t<Raw> inner = call();
    auto* in = inner.shared_state().get();
    inner.shared_state()->then_run([in, keep = inner.shared_state(), next] {
      if (in->status.load(std::memory_order_acquire) == FutureStateBase::failed) {
        next->copy_failure(*in);
      } else if constexpr (std::is_void_v<U>) {
        next->set_value();
      } else {
        next->set_value(std::move(*in->value));  // the returned future is consumed
      }
    });
  } else if constexpr (std::is_void_v<Raw>) {
    call();
    next->set_value();
  } else {
    next->set_value(call());
  }
}
}  // namespace detail

template <class T>
class Promise {
 public:
  Promise() : Promise(ProgressHook{}) {}
  explicit Promise(ProgressHook progress) : state_(detail::make_state<T>()) {
    state_->progress = progress;
  }
  // One producer, as std::promise: a copy would hand out a second future.
  Promise(Promise&&) noexcept = default;
  Promise& operator=(Promise&&) noexcept = default;
  Promise(const Promise&) = delete;
  Promise& operator=(const Promise&) = delete;
  // Once: the future owns the value it hands out.
  Future<T> get_future() {
    if (retrieved_) throw Error(Errc::invalid_argument, "rdmx::Promise::get_future: the future was already retrieved");
    retrieved_ = true;
    return Future<T>(state_);
  }

  template <class... V>
  void set_value(V&&... v) {
    state_->set_value(std::forward<V>(v)...);
  }
  void set_error(Errc code, std::string message) { state_->set_error(code, std::move(message)); }
  void set_exception(std::exception_ptr e) { state_->set_exception(std::move(e)); }
  detail::FutureState<T>& state() { return *state_; }

 private:
  std::shared_ptr<detail::FutureState<T>> state_;
  bool retrieved_ = false;
};

template <class T>
Future<std::decay_t<T>> make_ready_future(T&& value) {
  Promise<std::decay_t<T>> p;
  p.set_value(std::forward<T>(value));
  return p.get_future();
}
inline Future<void> make_ready_future() {
  Promise<void> p;
  p.set_value();
  return p.get_future();
}

// Ready once every future in `futures` is complete (ready or failed); holds them.
template <class T>
Future<std::vector<Future<T>>> when_all(std::vector<Future<T>> futures) {
  using All = std::vector<Future<T>>;
  auto next = detail::make_state<All>();
  if (futures.empty()) {
    next->set_value(All{});
    return Future<All>(std::move(next));
  }
  next->progress = futures.front().shared_state()->progress;
  struct Join {
    std::atomic<std::size_t> left;
    All futures;
    std::shared_ptr<detail::FutureState<All>> next;
  };
  auto join = std::make_shared<Join>();
  join->left.store(futures.size(), std::memory_order_relaxed);
  join->next = next;
  join->futures = std::move(futures);
  for (auto& f : join->futures)
    f.shared_state()->then_run([join] {
      if (join->left.fetch_sub(1, std::memory_order_acq_rel) == 1) join->next->set_value(std::move(join->futures));
    });
  return Future<All>(std::move(next));
}

template <class... T>
Future<std::tuple<Future<T>...>> when_all(Future<T>... futures) {
  using All = std::tuple<Future<T>...>;
  auto next = detail::make_state<All>();
  if constexpr (sizeof...(T) == 0) {
    next->set_value();
  } else {
    next->progress = std::get<0>(std::tie(futures...)).shared_state()->progress;
    struct Join {
      std::atomic<std::size_t> left{sizeof...(T)};
      All futures;
      std::shared_ptr<detail::FutureState<All>> next;
    };
    auto join = std::make_shared<Join>();
    join->next = next;
    join->futures = All(std::move(futures)...);
    std::apply([&join](auto&... f) {
      (f.shared_state()->then_run([join] {
        if (join->left.fetch_sub(1, std::memory_order_acq_rel) == 1) join->next->set_value(std::move(join->futures));
      }), ...);
    }, join->futures);
  }
  return Future<All>(std::move(next));
}

// when_any's result: which future completed first, and all of them back.
template <class Sequence>
struct WhenAnyResult {
  std::size_t index;
  Sequence futures;
};

namespace detail {

template <class Sequence>
Future<WhenAnyResult<Sequence>> when_any_of(Sequence futures, const std::vector<FutureStateBase*>& states) {
  using Result = WhenAnyResult<Sequence>;
  if (states.empty()) throw Error(Errc::invalid_argument, "rdmx::when_any: no futures (it could never complete)");
  auto next = make_state<Result>();
  for (const FutureStateBase* s : states)  // waiting on the result progresses the first that can progress
    if (s->progress.fn != nullptr) {
      next->progress = s->progress;
      break;
    }
  struct Race {
    std::atomic<bool> decided{false};
    Sequence futures;
    std::shared_ptr<FutureState<Result>> next;
  };
  auto race = std::make_shared<Race>();
  race->futures = std::move(futures);
  race->next = next;
  // By the states, not race->futures: a ready one moves the futures away at once.
  for (std::size_t i = 0; i < states.size(); ++i)
    states[i]->then_run([race, i] {
      if (!race->decided.exchange(true, std::memory_order_acq_rel))
        race->next->set_value(Result{i, std::move(race->futures)});
    });
  return Future<Result>(std::move(next));
}

template <class T>
FutureStateBase* state_of(const FutureBase<T>& f, const char* operation) {
  if (!f.valid()) throw_no_state(operation);
  return f.shared_state().get();
}

template <class F>
concept future_like = requires(const F& f) { state_of(f, ""); };

// Progresses each distinct hook of `states` until one is complete; its index.
inline std::size_t wait_any_of(const FutureStateBase* const* states, std::size_t n) {
  if (n == 0) throw Error(Errc::invalid_argument, "rdmx::wait_any: no futures (it could never return)");
  auto complete = [&]() -> std::size_t {
    for (std::size_t i = 0; i < n; ++i)
      if (!states[i]->is_pending()) return i;
    return n;
  };
  Backoff backoff;
  for (;;) {
    if (const std::size_t i = complete(); i != n) return i;
    bool active = false;
    for (std::size_t i = 0; i < n; ++i) {
      const ProgressHook& hook = states[i]->progress;
      bool seen = false;  // futures of one kind share one hook: progress it once per round
      for (std::size_t j = 0; j < i && !seen; ++j) seen = states[j]->progress.fn == hook.fn && states[j]->progress.arg == hook.arg;
      if (!seen) active = hook() || active;
    }
    if (const std::size_t i = complete(); i != n) return i;  // no back-off once complete (wait())
    backoff(active);
  }
}

}  // namespace detail

// Ready once any of `futures` is complete (ready or failed): its index, and
// the futures back. Throws for an empty vector.
template <class T>
Future<WhenAnyResult<std::vector<Future<T>>>> when_any(std::vector<Future<T>> futures) {
  std::vector<detail::FutureStateBase*> states;
  states.reserve(futures.size());
  for (const auto& f : futures) states.push_back(detail::state_of(f, "when_any()"));
  return detail::when_any_of(std::move(futures), states);
}
template <class... T>
Future<WhenAnyResult<std::tuple<Future<T>...>>> when_any(Future<T>... futures) {
  static_assert(sizeof...(T) > 0, "rdmx::when_any needs at least one future");
  std::vector<detail::FutureStateBase*> states{detail::state_of(futures, "when_any()")...};
  return detail::when_any_of(std::tuple<Future<T>...>(std::move(futures)...), states);
}

// Progresses until one of `futures` (a range of Future or SharedFuture) is
// complete, and returns its index; the futures stay valid. Throws for none.
template <class Range>
  requires detail::future_like<std::remove_cvref_t<decltype(*std::begin(std::declval<Range&>()))>>
std::size_t wait_any(Range&& futures) {
  std::vector<const detail::FutureStateBase*> states;
  for (const auto& f : futures) states.push_back(detail::state_of(f, "wait_any()"));
  return detail::wait_any_of(states.data(), states.size());
}
template <class... F>
  requires(sizeof...(F) > 1 && (detail::future_like<F> && ...))
std::size_t wait_any(const F&... futures) {
  const std::array<const detail::FutureStateBase*, sizeof...(F)> states{detail::state_of(futures, "wait_any()")...};
  return detail::wait_any_of(states.data(), states.size());
}

}  // namespace rdmx
