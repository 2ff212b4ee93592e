// Names that mean the same code in every process of a program. Code
// addresses differ between processes under ASLR, so whatever is invoked
// remotely (the fabric's calls, invoke's one-sided calls, action's actions)
// is registered under an id: the 64-bit FNV-1a hash of its type's mangled
// name, identical in every process running the same binary. Registration
// runs during static initialization, before main.
//
// One policy for every registry: two names with one id is a conflict that
// stops the Job from starting (registry_conflicts(), checked there), and
// such an id is never looked up as either.
#pragma once
#include <array>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>

#include "rdmx/core/error.hpp"

namespace rdmx {

// FNV-1a of `name`, never 0 (0 means "none" on the wire).
std::uint64_t name_id(std::string_view name) noexcept;
// Every conflict any registry has seen, one per line; "" when none.
std::string registry_conflicts();

namespace detail {
void record_conflict(const std::string& first, const std::string& second);
std::string describe_id(std::uint64_t id);  // "unknown id 0x..."
}  // namespace detail

// The process's table of one kind of entry (a function pointer type).
template <class Entry>
class Registry {
 public:
  static Registry& instance() {
    static Registry registry;
    return registry;
  }
  // `name` is a mangled type name (typeid(W).name()).
  std::uint64_t add(std::string_view name, Entry entry) {
    const std::uint64_t id = name_id(name);
    std::lock_guard lock(mutex_);
    auto [it, added] = entries_.try_emplace(id, Registered{std::string(name), entry, false});
    if (!added && it->second.name != name) {
      it->second.conflict = true;
      detail::record_conflict(it->second.name, std::string(name));
    }
    return id;
  }
  // nullptr when the id is unknown here or names two entries.
  Entry find(std::uint64_t id) const noexcept {
    std::lock_guard lock(mutex_);
    auto it = entries_.find(id);
    return it == entries_.end() || it->second.conflict ? nullptr : it->second.entry;
  }
  // find() through a small per-thread cache: lookups take a lock, and a
  // thread's calls mostly repeat a few functions. Entries are never removed,
  // so a cached one stays right.
  Entry find_cached(std::uint64_t id) noexcept {
    static thread_local std::array<std::pair<std::uint64_t, Entry>, 64> cache{};
    auto& e = cache[id % cache.size()];
    if (e.first != id || e.second == nullptr) e = {id, find(id)};
    return e.second;
  }
  // The demangled name registered under `id`, for messages.
  std::string name_of(std::uint64_t id) const;
  std::size_t size() const noexcept {
    std::lock_guard lock(mutex_);
    return entries_.size();
  }

 private:
  Registry() = default;
  struct Registered {
    std::string name;  // mangled
    Entry entry;
    bool conflict;
  };
  mutable std::mutex mutex_;
  std::unordered_map<std::uint64_t, Registered> entries_;
};

template <class Entry>
std::string Registry<Entry>::name_of(std::uint64_t id) const {
  std::string mangled;
  {
    std::lock_guard lock(mutex_);
    auto it = entries_.find(id);
    if (it == entries_.end()) return detail::describe_id(id);
    mangled = it->second.name;
  }
  return demangle(mangled.c_str());
}

}  // namespace rdmx
