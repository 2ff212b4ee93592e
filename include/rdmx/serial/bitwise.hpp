// is_bitwise_serializable<T>: the types whose object bytes are their wire
// format (HPX's trait of the same name). Such a value is one memcpy; a
// contiguous run of them (std::vector, std::array, std::string, C arrays,
// SerializeBuffer, RmaVector) is one memcpy or, at or above the zero-copy
// threshold, one pointer or RMA chunk.
//
// The default covers arithmetic types and enums, not every trivially
// copyable type: a struct with padding would put uninitialised bytes on the
// wire, and a raw pointer means nothing in another process. bool is left
// out too because a byte other than 0 or 1 read into a bool is undefined
// behaviour; bools are checked one by one. Opt a type in with
//
//   template <> struct rdmx::serial::is_bitwise_serializable<Point> : std::true_type {};
//
// (it must be trivially copyable; that is checked where it is used).
#pragma once
#include <array>
#include <cstddef>
#include <type_traits>

namespace rdmx::serial {

template <class T>
struct is_bitwise_serializable
    : std::bool_constant<(std::is_arithmetic_v<T> && !std::is_same_v<T, bool>) || std::is_enum_v<T>> {};

// Arrays of bitwise elements have no padding between elements, so they are bitwise too.
template <class T, std::size_t N>
struct is_bitwise_serializable<T[N]> : is_bitwise_serializable<T> {};
template <class T, std::size_t N>
struct is_bitwise_serializable<std::array<T, N>> : is_bitwise_serializable<T> {};

template <class T>
inline constexpr bool is_bitwise_serializable_v = is_bitwise_serializable<std::remove_cv_t<T>>::value;

// What the serializers and the RMA containers actually require.
template <class T>
concept bitwise_serializable = is_bitwise_serializable_v<T> && std::is_trivially_copyable_v<T>;

}  // namespace rdmx::serial
