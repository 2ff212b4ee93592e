// std::map and std::unordered_map: a count, then key and value pairs. A key
// that appears twice can only come from a corrupted message: bad_archive.
#pragma once
#include <map>
#include <unordered_map>

#include "rdmx/serial/input_archive.hpp"
#include "rdmx/serial/output_archive.hpp"

namespace rdmx::serial {

namespace detail {
template <archive A, class Map>
void serialize_map(A& ar, Map& map) {
  using Key = typename Map::key_type;
  if constexpr (A::is_saving) {
    ar.write_varint(map.size());
    for (auto& [key, value] : map) {
      serialize_value(ar, const_cast<Key&>(key));  // saving only reads it
      serialize_value(ar, value);
    }
  } else {
    const std::size_t n = ar.read_count();
    InputArchive::Nesting nesting(ar);
    map.clear();
    if constexpr (requires { map.reserve(n); }) map.reserve(n);
    for (std::size_t i = 0; i < n; ++i) {
      Key key{};
      typename Map::mapped_type value{};
      serialize_value(ar, key);
      serialize_value(ar, value);
      const std::size_t before = map.size();
      // A sender's std::map arrives sorted, so the end is the right hint.
      map.emplace_hint(map.end(), std::move(key), std::move(value));
      if (map.size() == before) ar.fail("a map holds the same key twice");
    }
  }
}
}  // namespace detail

template <archive A, class K, class V, class Compare, class Alloc>
void serialize(A& ar, std::map<K, V, Compare, Alloc>& map) {
  detail::serialize_map(ar, map);
}

template <archive A, class K, class V, class Hash, class Equal, class Alloc>
void serialize(A& ar, std::unordered_map<K, V, Hash, Equal, Alloc>& map) {
  detail::serialize_map(ar, map);
}

}  // namespace rdmx::serial
