// A compact type signature: a 64-bit FNV-1a hash of the mangled names of the
// argument types, computed once per type list. Mangled names follow the
// Itanium C++ ABI, so they are the same in every process of a program and
// across GCC and Clang; that is what makes the hash comparable between
// sender and receiver (the fabric names functions the same way). The check
// is by name: it catches a call decoded as the wrong types, not a struct
// whose members changed under the same name (length checks catch most of those).
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <typeinfo>

namespace rdmx::serial {

// Never 0, which means "no signature" on the wire.
std::uint64_t signature_hash(std::string_view names) noexcept;

namespace detail {
template <class... T>
std::string type_list() {
  std::string names;
  ((names += typeid(T).name(), names += ';'), ...);
  return names;
}
}  // namespace detail

template <class... T>
std::uint64_t signature_of() {
  static const std::uint64_t value = signature_hash(detail::type_list<T...>());
  return value;
}

}  // namespace rdmx::serial
