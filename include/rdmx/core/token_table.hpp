// TokenTable<T>: entries named by tokens that travel across the network, as
// a reply names the call it answers. A token is (generation << 32) |
// (index + 1), so 0 is never a token, and a stale, repeated or forged one
// (its entry freed, or reused by a later call) finds nothing instead of
// touching someone else's state. Entries never move (a deque), so a
// reference stays valid while others are added. Not thread-safe: its owner
// locks, or keeps it to one thread.
#pragma once
#include <cstddef>
#include <cstdint>
#include <deque>
#include <vector>

namespace rdmx {

template <class T>
class TokenTable {
 public:
  struct Added {
    std::uint64_t token;
    T& value;  // value-initialized
  };
  Added add() {
    std::uint32_t index;
    if (free_.empty()) {
      index = static_cast<std::uint32_t>(entries_.size());
      entries_.emplace_back();
    } else {
      index = free_.back();
      free_.pop_back();
    }
    Entry& s = entries_[index];
    ++s.generation;
    s.used = true;
    s.value = T{};
    ++in_use_;
    return {token_of(index, s.generation), s.value};
  }
  // The entry `token` names; nullptr if none (never made, freed, or reused).
  T* find(std::uint64_t token) noexcept {
    const std::uint64_t index = (token & 0xffffffffu) - 1;
    if (token == 0 || index >= entries_.size()) return nullptr;
    Entry& s = entries_[index];
    return s.used && s.generation == static_cast<std::uint32_t>(token >> 32) ? &s.value : nullptr;
  }
  // Frees the entry (its value is reset); false if `token` names none.
  bool erase(std::uint64_t token) {
    T* value = find(token);
    if (value == nullptr) return false;
    const auto index = static_cast<std::uint32_t>((token & 0xffffffffu) - 1);
    *value = T{};
    entries_[index].used = false;
    free_.push_back(index);
    --in_use_;
    return true;
  }
  std::size_t in_use() const noexcept { return in_use_; }
  // f(token, value) for each entry in use. f may erase any entry, the one
  // it was given included, and add entries (which may or may not be visited).
  template <class F>
  void for_each(F&& f) {
    const std::size_t n = entries_.size();
    for (std::size_t i = 0; i < n; ++i)
      if (entries_[i].used) f(token_of(static_cast<std::uint32_t>(i), entries_[i].generation), entries_[i].value);
  }

 private:
  struct Entry {
    std::uint32_t generation = 0;
    bool used = false;
    T value{};
  };
  static std::uint64_t token_of(std::uint32_t index, std::uint32_t generation) noexcept {
    return (std::uint64_t{generation} << 32) | (std::uint64_t{index} + 1);
  }
  std::deque<Entry> entries_;
  std::vector<std::uint32_t> free_;
  std::size_t in_use_ = 0;
};

}  // namespace rdmx
