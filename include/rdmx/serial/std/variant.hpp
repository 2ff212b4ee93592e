// std::variant: the alternative's index, then the alternative. Loading
// default-constructs the alternative named by the (checked) index through a
// table built at compile time, then loads into it.
#pragma once
#include <cstddef>
#include <string>
#include <utility>
#include <variant>

#include "rdmx/core/error.hpp"
#include "rdmx/serial/input_archive.hpp"
#include "rdmx/serial/output_archive.hpp"

namespace rdmx::serial {

template <archive A>
void serialize(A&, std::monostate&) {}

namespace detail {
template <class Variant, std::size_t... I>
void load_alternative(InputArchive& ar, Variant& value, std::size_t index, std::index_sequence<I...>) {
  using Loader = void (*)(InputArchive&, Variant&);
  static constexpr Loader loaders[] = {
      [](InputArchive& a, Variant& v) { serialize_value(a, v.template emplace<I>()); }...};
  loaders[index](ar, value);
}
}  // namespace detail

template <archive A, class... T>
void serialize(A& ar, std::variant<T...>& value) {
  if constexpr (A::is_saving) {
    if (value.valueless_by_exception())
      throw Error(Errc::invalid_argument, "rdmx::serial: cannot serialize a variant that is valueless by exception");
    ar.write_varint(value.index());
    std::visit([&ar](auto& alternative) { serialize_value(ar, alternative); }, value);
  } else {
    const std::uint64_t index = ar.read_varint();
    if (index >= sizeof...(T))
      ar.fail("variant index " + std::to_string(index) + " out of range (" + std::to_string(sizeof...(T)) +
              " alternatives)");
    InputArchive::Nesting nesting(ar);
    detail::load_alternative(ar, value, static_cast<std::size_t>(index), std::index_sequence_for<T...>{});
  }
}

}  // namespace rdmx::serial
