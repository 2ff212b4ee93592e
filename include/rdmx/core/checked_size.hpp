// Size arithmetic that cannot wrap. A size that reaches an allocator or
// crosses the wire may come from a hostile peer or a corrupt message; plain
// `(n + to - 1) / to * to` turns a size near SIZE_MAX into 0 and hands out a
// block far smaller than the caller was promised. These throw rdmx::Error
// (Errc::out_of_memory unless told otherwise: no such block can exist)
// with a message naming `what` and the exact operands.
#pragma once
#include <cstddef>
#include <string>

#include "rdmx/core/error.hpp"

namespace rdmx {

namespace detail {
[[noreturn]] inline void throw_size_overflow(const char* what, std::size_t a, const char* op, std::size_t b, Errc code) {
  throw Error(code, std::string(what) + ": " + std::to_string(a) + op + std::to_string(b) +
                        " bytes overflows the 64-bit size range");
}
}  // namespace detail

inline std::size_t checked_add(std::size_t a, std::size_t b, const char* what, Errc code = Errc::out_of_memory) {
  std::size_t sum = 0;
  if (__builtin_add_overflow(a, b, &sum)) detail::throw_size_overflow(what, a, " + ", b, code);
  return sum;
}

inline std::size_t checked_mul(std::size_t a, std::size_t b, const char* what, Errc code = Errc::out_of_memory) {
  std::size_t product = 0;
  if (__builtin_mul_overflow(a, b, &product)) detail::throw_size_overflow(what, a, " * ", b, code);
  return product;
}

// n rounded up to a multiple of `to` (> 0; need not be a power of two).
inline std::size_t checked_round_up(std::size_t n, std::size_t to, const char* what, Errc code = Errc::out_of_memory) {
  if (to == 0) throw Error(Errc::invalid_argument, std::string(what) + ": rounding to a multiple of 0");
  const std::size_t rest = n % to;
  if (rest == 0) return n;
  std::size_t up = 0;
  if (__builtin_add_overflow(n, to - rest, &up)) {
    throw Error(code, std::string(what) + ": " + std::to_string(n) + " bytes rounded up to a multiple of " +
                          std::to_string(to) + " overflows the 64-bit size range");
  }
  return up;
}

}  // namespace rdmx
