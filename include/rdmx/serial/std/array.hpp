// Fixed-size arrays of non-bitwise elements, element by element. (Arrays of
// bitwise elements are bitwise themselves: see bitwise.hpp.)
#pragma once
#include <array>
#include <cstddef>

#include "rdmx/serial/access.hpp"

namespace rdmx::serial {

template <archive A, class T, std::size_t N>
void serialize(A& ar, std::array<T, N>& a) {
  for (T& element : a) serialize_value(ar, element);
}

template <archive A, class T, std::size_t N>
void serialize(A& ar, T (&a)[N]) {
  for (T& element : a) serialize_value(ar, element);
}

}  // namespace rdmx::serial
