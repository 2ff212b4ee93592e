// Future<T>/Promise<T>: the result of a non-blocking operation, in the style
// of UPC++'s futures. Waiting drives the progress engine the operation needs
// (UCX completes operations only while its worker is progressed), so get()
// never deadlocks a single-threaded program.
#pragma once
#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>

#include "rdmx/core/error.hpp"

namespace rdmx {

// Something a waiter can poke to make completions happen.
struct ProgressHook {
  bool (*fn)(void*) = nullptr;
  void* arg = nullptr;
  bool operator()() const { return fn != nullptr && fn(arg); }
};

namespace detail {
template <class T>
struct FutureState {
  enum : int { pending, ready, failed };
  std::atomic<int> status{pending};
  std::optional<std::conditional_t<std::is_void_v<T>, bool, T>> value;
  Errc code = Errc::transport;
  std::string message;
  ProgressHook progress;
};
}  // namespace detail

template <class T>
class Future {
 public:
  Future() = default;
  explicit Future(std::shared_ptr<detail::FutureState<T>> state) : state_(std::move(state)) {}

  bool valid() const noexcept { return state_ != nullptr; }
  bool ready() const noexcept { return state_->status.load(std::memory_order_acquire) != detail::FutureState<T>::pending; }
  // Progress until complete; throws the operation's error.
  void wait() const {
    while (!ready()) state_->progress();
  }
  decltype(auto) get() const {
    wait();
    if (state_->status.load(std::memory_order_acquire) == detail::FutureState<T>::failed)
      throw Error(state_->code, state_->message);
    if constexpr (!std::is_void_v<T>) return *state_->value;
  }
  bool failed() const noexcept { return state_->status.load(std::memory_order_acquire) == detail::FutureState<T>::failed; }

 private:
  std::shared_ptr<detail::FutureState<T>> state_;
};

template <class T>
class Promise {
 public:
  explicit Promise(ProgressHook progress = {}) : state_(std::make_shared<detail::FutureState<T>>()) {
    state_->progress = progress;
  }
  Future<T> get_future() const { return Future<T>(state_); }

  template <class... V>
  void set_value(V&&... v) {
    if constexpr (std::is_void_v<T>) {
      state_->value.emplace(true);
    } else {
      state_->value.emplace(std::forward<V>(v)...);
    }
    state_->status.store(detail::FutureState<T>::ready, std::memory_order_release);
  }
  void set_error(Errc code, std::string message) {
    state_->code = code;
    state_->message = std::move(message);
    state_->status.store(detail::FutureState<T>::failed, std::memory_order_release);
  }
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

}  // namespace rdmx
