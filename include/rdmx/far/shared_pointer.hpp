// far::SharedPtr<T>: shared ownership of one far object (AIFM's SharedPtr).
// Copies share one state word in a small local control block, so eviction
// and swap-in update every copy at once; the last copy frees the object.
// Copies may live in several threads; the program orders their accesses to
// the object itself, as for any shared data.
//
//   auto a = far::make_shared<Point>(Point{1, 2});
//   far::SharedPtr<Point> b = a;          // same object
//   b.write({3, 4});
//   assert(a.read().x == 3);
#pragma once
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <memory>
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
class SharedPtr : public Dereference<SharedPtr<T>, T> {
 public:
  SharedPtr() noexcept = default;

  explicit operator bool() const noexcept { return block_ != nullptr; }
  long use_count() const noexcept { return block_.use_count(); }
  bool is_local() const noexcept { return block_ && (block_->word.load(std::memory_order_acquire) & state::present) != 0; }

  // Drops this copy (the last one frees the object).
  void reset() noexcept { block_.reset(); }
  bool evict() const { return block_ == nullptr || detail::evict(detail::runtime(), block_->word); }

  template <class U, class... A>
  friend SharedPtr<U> make_shared(A&&... args);
  std::atomic<std::uint64_t>& word() const {
    if (block_ == nullptr) throw Error(Errc::invalid_argument, "far: dereference of a null far::SharedPtr");
    return block_->word;
  }

 private:
  // The shared state word; freeing the object when the last copy goes.
  struct Block {
    std::atomic<std::uint64_t> word{0};
    Block() = default;
    Block(const Block&) = delete;
    Block& operator=(const Block&) = delete;
    ~Block() {
      if (word.load(std::memory_order_relaxed) == 0) return;
      try {
        detail::free(detail::runtime(), word);
      } catch (const std::exception& e) {
        rdmx::log(LogLevel::error, "far: freeing a shared far object failed: %s", e.what());
        std::abort();
      }
    }
  };

  std::shared_ptr<Block> block_;
};

// A new shared far object, constructed in a cache frame (local and dirty).
template <class T, class... A>
SharedPtr<T> make_shared(A&&... args) {
  SharedPtr<T> p;
  p.block_ = std::make_shared<typename SharedPtr<T>::Block>();
  void* frame = detail::allocate(detail::runtime(), p.block_->word, sizeof(T));
  try {
    ::new (frame) T(std::forward<A>(args)...);
  } catch (...) {
    detail::commit(p.block_->word);
    throw;  // the block frees it
  }
  detail::commit(p.block_->word);
  return p;
}

}  // namespace rdmx::far
