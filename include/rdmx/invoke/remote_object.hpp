// RemoteObject<T>: a T that lives in this process's registered memory, so
// another process can write it with one-sided RDMA (Seriema's RemoteObject).
// The one-sided call family uses it to answer without a message:
//  - when_run(RemoteObject<Synchronizer>&): one RDMA atomic counts it down
//    once the destination has run the call;
//  - into(RemoteObject<R>&, RemoteObject<Synchronizer>&): call_return writes
//    its result straight into the object, then counts the Synchronizer down
//    (fenced after the result).
// Other paths take the same completions and answer them by message.
//
//   rdmx::RemoteObject<rdmx::Synchronizer> sync;
//   rdmx::RemoteObject<Answer> answer;
//   rdmx::MessengerGlobal().call_return(dest, [] { return Answer{...}; }, rdmx::into(answer, sync));
//   sync->wait();  // then *answer holds the result
#pragma once
#include <cstddef>
#include <new>
#include <type_traits>
#include <utility>

#include "rdmx/fabric/completion.hpp"
#include "rdmx/memory/block.hpp"
#include "rdmx/transfer/remote_locator.hpp"

namespace rdmx {

namespace invoke::detail {
// Zeroed, 64-byte aligned memory from this process's registered arena.
memory::Block allocate_registered(std::size_t bytes);
void release_registered(const memory::Block& block) noexcept;
std::uint32_t this_process();
}  // namespace invoke::detail

template <class T>
class RemoteObject {
 public:
  // Implicit, so `RemoteObject<T> o = {};` and std::vector<RemoteObject<T>>(n) compile.
  RemoteObject() : RemoteObject(std::in_place) {}
  template <class A0, class... Args>
    requires(!std::is_same_v<std::remove_cvref_t<A0>, RemoteObject> && !std::is_same_v<std::remove_cvref_t<A0>, std::in_place_t>)
  explicit RemoteObject(A0&& a0, Args&&... args) : RemoteObject(std::in_place, std::forward<A0>(a0), std::forward<Args>(args)...) {}
  template <class... Args>
  explicit RemoteObject(std::in_place_t, Args&&... args) : block_(invoke::detail::allocate_registered(sizeof(T))) {
    try {
      new (block_.data) T(std::forward<Args>(args)...);
    } catch (...) {
      invoke::detail::release_registered(block_);
      throw;
    }
  }
  ~RemoteObject() {
    get()->~T();
    invoke::detail::release_registered(block_);
  }
  RemoteObject(const RemoteObject&) = delete;
  RemoteObject& operator=(const RemoteObject&) = delete;

  T* get() noexcept { return std::launder(reinterpret_cast<T*>(block_.data)); }
  const T* get() const noexcept { return std::launder(reinterpret_cast<const T*>(block_.data)); }
  T& operator*() noexcept { return *get(); }
  const T& operator*() const noexcept { return *get(); }
  T* operator->() noexcept { return get(); }
  const T* operator->() const noexcept { return get(); }

  // The object's network-wide name, for peers that write it.
  RemoteLocator locator() const { return {invoke::detail::this_process(), block_.region, block_.offset, sizeof(T)}; }
  // The name of bytes [from, from + length) of the object (a member, e.g. a counter).
  RemoteLocator locator_of(const void* member, std::size_t length) const {
    const auto from = static_cast<std::size_t>(static_cast<const std::byte*>(member) - block_.data);
    return {invoke::detail::this_process(), block_.region, block_.offset + from, length};
  }

 private:
  memory::Block block_;
};

// when_run answered by one RDMA atomic on the one-sided path.
inline Completion when_run(RemoteObject<Synchronizer>& sync) {
  return Completion::run_counted_at(*sync, sync.locator_of(sync->counter(), 8));
}
// call_return's result written by RDMA into `result`, then `sync` counted
// down by one RDMA atomic, on the one-sided path.
template <class R>
Into<R> into(RemoteObject<R>& result, RemoteObject<Synchronizer>& sync) {
  return Into<R>::written_at(*result, result.locator(), *sync, sync.locator_of(sync->counter(), 8));
}

}  // namespace rdmx
