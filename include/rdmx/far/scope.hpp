// far::DerefScope: the region of code in which dereferenced far objects stay
// where they are. Every object dereferenced through a scope is pinned in the
// cache until the scope ends, so eviction (running on any thread) cannot
// move it out from under a pointer the program holds. Scopes nest and a
// thread may hold several; each releases only what it pinned. A scope
// belongs to the thread that created it.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace rdmx::far {

namespace detail {
class Runtime;
class Cache;
}  // namespace detail

class DerefScope {
 public:
  // In this process's far memory (its far::Manager); throws
  // Errc::invalid_argument when there is none.
  DerefScope();
  ~DerefScope();
  DerefScope(const DerefScope&) = delete;
  DerefScope& operator=(const DerefScope&) = delete;

  // Objects this scope pins (one entry per dereference).
  std::size_t pinned() const noexcept { return pinned_; }
  // The far memory it pins in (for far's own operations, far/detail/runtime.hpp).
  detail::Runtime& runtime() const noexcept { return *runtime_; }

 private:
  friend class detail::Runtime;
  friend class detail::Cache;
  void pin(std::uint32_t frame) {
    if (pinned_ < inline_pins) first_[pinned_] = frame;
    else more_.push_back(frame);
    ++pinned_;
  }
  bool pins(std::uint32_t frame) const noexcept;
  // Whether a scope open on the calling thread pins `frame`.
  static bool pinned_here(std::uint32_t frame) noexcept;

  // Most scopes pin a few objects: those need no allocation, which would
  // cost a cold dereference as much as a fifth of its time.
  static constexpr std::size_t inline_pins = 8;
  detail::Runtime* runtime_;
  std::size_t pinned_ = 0;
  std::uint32_t first_[inline_pins];
  std::vector<std::uint32_t> more_;  // pins after the first inline_pins
  // The scope opened before this one on the same thread: freeing an object
  // that the thread itself still pins is an error at once, while another
  // thread's pin is waited for.
  DerefScope* outer_;
};

}  // namespace rdmx::far
