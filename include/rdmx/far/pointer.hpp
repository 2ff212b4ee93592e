// far::UniquePtr<T>: the owning far pointer (AIFM's UniquePtr). It is one
// 8-byte state word (state.hpp) that says whether the object is local, in
// which cache frame, or remote, where. Objects are trivially copyable values
// moved byte for byte between the cache and the servers.
//
//   auto p = far::make_unique<Point>(Point{1, 2});
//   far::DerefScope scope;
//   int x = p.deref(scope)->x;      // read: swapped in if remote
//   p.deref_mut(scope)->y = 3;      // write: dirty, written back on eviction
//
// Dereferences need a DerefScope: the object stays pinned in the cache
// while it lives, and the returned pointer is only valid until then.
#pragma once
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <new>
#include <type_traits>
#include <utility>

#include "rdmx/core/error.hpp"
#include "rdmx/core/log.hpp"
#include "rdmx/far/config.hpp"
#include "rdmx/far/dereference.hpp"
#include "rdmx/far/detail/runtime.hpp"
#include "rdmx/far/manager.hpp"
#include "rdmx/far/scope.hpp"
#include "rdmx/far/state.hpp"

namespace rdmx::far {

template <class T>
class UniquePtr : public Dereference<UniquePtr<T>, T> {
 public:
  UniquePtr() noexcept = default;
  UniquePtr(UniquePtr&& other) noexcept { take(other); }
  UniquePtr& operator=(UniquePtr&& other) {
    if (this != &other) {
      reset();
      take(other);
    }
    return *this;
  }
  // A pointer that still owns an object frees it; freeing an object a
  // DerefScope still pins is a program error and ends the process.
  ~UniquePtr() {
    try {
      reset();
    } catch (const std::exception& e) {
      rdmx::log(LogLevel::error, "far: destroying a far pointer failed: %s", e.what());
      std::abort();
    }
  }

  explicit operator bool() const noexcept { return word_.load(std::memory_order_relaxed) != 0; }
  // Local now (a hint: eviction may change it unless a scope pins it).
  bool is_local() const noexcept { return (word_.load(std::memory_order_acquire) & state::present) != 0; }
  std::uint64_t state_word() const noexcept { return word_.load(std::memory_order_acquire); }

  // Frees the object now; throws Errc::invalid_argument if a scope pins it.
  void reset() {
    if (word_.load(std::memory_order_relaxed) != 0) detail::free(detail::runtime(), word_);
  }
  // Writes it back if dirty and makes it remote; false when a scope pins it.
  // Const: the object's value stays the same, only where it lives changes.
  bool evict() const { return detail::evict(detail::runtime(), word_); }
  // Writes it back if dirty, keeping it local; false when a scope pins it.
  bool write_back() const { return detail::write_back(detail::runtime(), word_); }

  template <class U, class... A>
  friend UniquePtr<U> make_unique(A&&... args);
  // The state word (for Dereference and far/detail/runtime.hpp).
  std::atomic<std::uint64_t>& word() const noexcept { return word_; }

 private:
  void take(UniquePtr& other) noexcept {
    if (other.word_.load(std::memory_order_relaxed) != 0) detail::move(detail::runtime(), other.word_, word_);
  }

  mutable std::atomic<std::uint64_t> word_{0};
};

static_assert(sizeof(UniquePtr<int>) == 8, "a far pointer is one 8-byte word");

// A new far object, constructed in a cache frame (local and dirty).
template <class T, class... A>
UniquePtr<T> make_unique(A&&... args) {
  UniquePtr<T> p;
  void* frame = detail::allocate(detail::runtime(), p.word_, sizeof(T));
  try {
    ::new (frame) T(std::forward<A>(args)...);
  } catch (...) {
    detail::commit(p.word_);
    throw;  // p frees it
  }
  detail::commit(p.word_);
  return p;
}

}  // namespace rdmx::far
