// Future<T>/Promise<T>: the result of a non-blocking operation, in the style
// of UPC++'s futures. Waiting drives the progress engine the operation needs
// (UCX completes operations only while its worker is progressed), so get()
// never deadlocks a single-threaded program.
//
// Continuations (HPX / UPC++ style):
//   f.then([](T& value) { ... })        runs once f is ready; f's error skips it
//   f.then([](Future<T> done) { ... })  runs once f is ready or failed
//   when_all(std::vector<Future<T>>)    ready once all are (never fails: inspect each)
//   when_all(Future<A>, Future<B>, ...) the same for futures of different types
// A continuation runs on the thread that completes its future (for rdmx's
// remote actions: the calling thread, while it progresses), or at once in
// then() when the future is ready already. If it returns a Future<U>, then()
// returns a Future<U> that completes with it (no Future<Future<U>>). What a
// continuation throws fails the future then() returned.
#pragma once
#include <atomic>
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

namespace rdmx {

// Something a waiter can poke to make completions happen.
struct ProgressHook {
  bool (*fn)(void*) = nullptr;
  void* arg = nullptr;
  bool operator()() const { return fn != nullptr && fn(arg); }
};

template <class T>
class Future;

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

template <class T>
class Future {
 public:
  using value_type = T;
  Future() = default;
  explicit Future(std::shared_ptr<detail::FutureState<T>> state) : state_(std::move(state)) {}

  bool valid() const noexcept { return state_ != nullptr; }
  bool ready() const noexcept { return state_->status.load(std::memory_order_acquire) != detail::FutureStateBase::pending; }
  // Progress until complete (without throwing its error).
  void wait() const {
    Backoff backoff;
    while (!ready()) backoff(state_->progress());
  }
  // Progress until complete; throws the operation's error.
  decltype(auto) get() const {
    wait();
    if (state_->status.load(std::memory_order_acquire) == detail::FutureStateBase::failed) state_->rethrow();
    if constexpr (!std::is_void_v<T>) return *state_->value;
  }
  bool failed() const noexcept { return state_->status.load(std::memory_order_acquire) == detail::FutureStateBase::failed; }
  // The failure's code and text (valid once failed()).
  Errc error_code() const noexcept { return state_->code; }
  const std::string& error_message() const noexcept { return state_->message; }

  // f(T&) (f() for Future<void>), skipped on failure; or f(Future<T>), always.
  template <class F>
  auto then(F&& f) const {
    constexpr bool takes_future = std::is_invocable_v<F&, Future<T>>;
    using Raw = decltype(call_continuation(std::declval<F&>(), std::declval<detail::FutureState<T>&>()));
    using U = typename detail::unwrap_future<Raw>::type;
    auto next = std::make_shared<detail::FutureState<U>>();
    next->progress = state_->progress;
    detail::FutureState<T>* source = state_.get();
    state_->then_run([source, next, fn = std::forward<F>(f)]() mutable {
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

  // For rdmx's internals (when_all, the action layer).
  const std::shared_ptr<detail::FutureState<T>>& shared_state() const noexcept { return state_; }

 private:
  template <class F>
  static decltype(auto) call_continuation(F& f, detail::FutureState<T>& source) {
    if constexpr (std::is_invocable_v<F&, Future<T>>)
      return std::invoke(f, Future<T>(source.shared_from_this()));
    else if constexpr (std::is_void_v<T>)
      return std::invoke(f);
    else
      return std::invoke(f, *source.value);
  }

  std::shared_ptr<detail::FutureState<T>> state_;
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
  explicit Promise(ProgressHook progress = {}) : state_(std::make_shared<detail::FutureState<T>>()) {
    state_->progress = progress;
  }
  Future<T> get_future() const { return Future<T>(state_); }

  template <class... V>
  void set_value(V&&... v) {
    state_->set_value(std::forward<V>(v)...);
  }
  void set_error(Errc code, std::string message) { state_->set_error(code, std::move(message)); }
  void set_exception(std::exception_ptr e) { state_->set_exception(std::move(e)); }
  detail::FutureState<T>& state() { return *state_; }

 private:
  std::shared_ptr<detail::FutureState<T>> state_;
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
  auto next = std::make_shared<detail::FutureState<All>>();
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
  auto next = std::make_shared<detail::FutureState<All>>();
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

}  // namespace rdmx
