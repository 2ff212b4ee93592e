// std::set and std::unordered_set: a count, then the keys. A repeated key
// can only come from a corrupted message: bad_archive.
#pragma once
#include <set>
#include <unordered_set>

#include "rdmx/serial/input_archive.hpp"
#include "rdmx/serial/output_archive.hpp"

namespace rdmx::serial {

namespace detail {
template <archive A, class Set>
void serialize_set(A& ar, Set& set) {
  using Key = typename Set::key_type;
  if constexpr (A::is_saving) {
    ar.write_varint(set.size());
    for (const Key& key : set) serialize_value(ar, const_cast<Key&>(key));  // saving only reads it
  } else {
    const std::size_t n = ar.read_count();
    InputArchive::Nesting nesting(ar);
    set.clear();
    if constexpr (requires { set.reserve(n); }) set.reserve(n);
    for (std::size_t i = 0; i < n; ++i) {
      Key key{};
      serialize_value(ar, key);
      const std::size_t before = set.size();
      set.emplace_hint(set.end(), std::move(key));
      if (set.size() == before) ar.fail("a set holds the same key twice");
    }
  }
}
}  // namespace detail

template <archive A, class K, class Compare, class Alloc>
void serialize(A& ar, std::set<K, Compare, Alloc>& set) {
  detail::serialize_set(ar, set);
}

template <archive A, class K, class Hash, class Equal, class Alloc>
void serialize(A& ar, std::unordered_set<K, Hash, Equal, Alloc>& set) {
  detail::serialize_set(ar, set);
}

}  // namespace rdmx::serial
