// far::DerefScope: the region of code in which dereferenced far objects stay
// where they are. Every object dereferenced through a scope is pinned in the
// cache until the scope ends, so eviction (running on any thread) cannot
// move it out from under a pointer the program holds. Scopes nest and a
// thread may hold several; each releases only what it pinned. A scope
// belongs to the thread that created it.
#pragma once
#include <cstdint>
#include <vector>

namespace rdmx::far {

class Manager;

class DerefScope {
 public:
  // Binds to Manager::current().
  DerefScope();
  explicit DerefScope(Manager& manager) noexcept : manager_(&manager) {}
  ~DerefScope();
  DerefScope(const DerefScope&) = delete;
  DerefScope& operator=(const DerefScope&) = delete;

  Manager& manager() const noexcept { return *manager_; }
  // Objects this scope pins (one entry per dereference).
  std::size_t pinned() const noexcept { return slots_.size(); }

 private:
  friend class Manager;
  void pin(std::uint32_t slot) { slots_.push_back(slot); }

  Manager* manager_;
  std::vector<std::uint32_t> slots_;
};

}  // namespace rdmx::far
