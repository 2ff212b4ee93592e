// std::vector: a count, then either one bulk run (bitwise elements: one
// memcpy, or one pointer chunk at the threshold; on loading, one memcpy from
// the inline bytes or the received chunk straight into the vector's
// storage) or the elements one by one. std::vector<bool> goes bit by bit, as
// checked tag bytes.
#pragma once
#include <cstring>
#include <vector>

#include "rdmx/serial/input_archive.hpp"
#include "rdmx/serial/output_archive.hpp"

namespace rdmx::serial {

template <archive A, class T, class Alloc>
void serialize(A& ar, std::vector<T, Alloc>& v) {
  if constexpr (A::is_saving) {
    ar.write_varint(v.size());
    if constexpr (bitwise_serializable<T>) {
      ar.write_bulk(v.data(), v.size() * sizeof(T));
    } else {
      for (T& element : v) serialize_value(ar, element);
    }
  } else if constexpr (bitwise_serializable<T>) {
    const std::size_t n = ar.read_varint();
    const Bulk bulk = ar.read_bulk(n, sizeof(T));  // checked before anything is allocated
    v.resize(n);
    if (n != 0) std::memcpy(v.data(), bulk.bytes.data(), bulk.bytes.size());
  } else {
    const std::size_t n = ar.read_count();
    InputArchive::Nesting nesting(ar);
    v.clear();
    v.reserve(n);
    for (std::size_t i = 0; i < n; ++i) serialize_value(ar, v.emplace_back());
  }
}

template <archive A, class Alloc>
void serialize(A& ar, std::vector<bool, Alloc>& v) {
  if constexpr (A::is_saving) {
    ar.write_varint(v.size());
    for (bool bit : v) {
      const std::uint8_t byte = bit ? 1 : 0;
      ar.write_bytes(&byte, 1);
    }
  } else {
    const std::size_t n = ar.read_count();
    v.clear();
    v.reserve(n);
    for (std::size_t i = 0; i < n; ++i) v.push_back(ar.read_tag(2, "bool") != 0);
  }
}

}  // namespace rdmx::serial
