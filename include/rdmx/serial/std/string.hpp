// std::basic_string: a length, then the characters as one bulk run (a
// pointer chunk when the string reaches the zero-copy threshold).
#pragma once
#include <cstring>
#include <string>

#include "rdmx/serial/input_archive.hpp"
#include "rdmx/serial/output_archive.hpp"

namespace rdmx::serial {

template <archive A, class C, class Traits, class Alloc>
  requires bitwise_serializable<C>
void serialize(A& ar, std::basic_string<C, Traits, Alloc>& s) {
  if constexpr (A::is_saving) {
    ar.write_varint(s.size());
    ar.write_bulk(s.data(), s.size() * sizeof(C));
  } else {
    const std::size_t n = ar.read_varint();
    const Bulk bulk = ar.read_bulk(n, sizeof(C));
    if constexpr (sizeof(C) == 1) {
      s.assign(reinterpret_cast<const C*>(bulk.bytes.data()), n);  // character types may alias bytes
    } else {
      s.resize(n);
      if (n != 0) std::memcpy(s.data(), bulk.bytes.data(), bulk.bytes.size());
    }
  }
}

}  // namespace rdmx::serial
