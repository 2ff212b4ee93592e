// std::unique_ptr and std::shared_ptr with value semantics: a tag byte
// (0 null), then the pointee; the receiver gets a new object of the static
// type. Sharing is not preserved: two shared_ptrs to one object arrive as
// two objects. A polymorphic pointee whose dynamic type is not the static
// type would be sliced, so saving it throws Errc::invalid_argument.
#pragma once
#include <memory>
#include <string>
#include <type_traits>
#include <typeinfo>

#include "rdmx/core/error.hpp"
#include "rdmx/serial/input_archive.hpp"
#include "rdmx/serial/output_archive.hpp"

namespace rdmx::serial {

namespace detail {
template <class T>
void check_not_sliced(const T& value) {
  if constexpr (std::is_polymorphic_v<T>) {
    if (typeid(value) != typeid(T))
      throw Error(Errc::invalid_argument, std::string("rdmx::serial: a pointer to ") + typeid(T).name() +
                                              " holds a " + typeid(value).name() +
                                              "; only the static type would be sent");
  }
}

template <archive A, class Pointer, class Make>
void serialize_pointer(A& ar, Pointer& p, Make make) {
  if constexpr (A::is_saving) {
    const std::uint8_t tag = p ? 1 : 0;
    ar.write_bytes(&tag, 1);
    if (p) {
      check_not_sliced(*p);
      serialize_value(ar, *p);
    }
  } else {
    if (ar.read_tag(2, "pointer") == 0) {
      p.reset();
      return;
    }
    InputArchive::Nesting nesting(ar);
    auto fresh = make();
    serialize_value(ar, *fresh);
    p = std::move(fresh);
  }
}
}  // namespace detail

template <archive A, class T>
void serialize(A& ar, std::unique_ptr<T>& p) {
  detail::serialize_pointer(ar, p, [] { return std::make_unique<T>(); });
}

template <archive A, class T>
void serialize(A& ar, std::shared_ptr<T>& p) {
  detail::serialize_pointer(ar, p, [] { return std::make_shared<T>(); });
}

}  // namespace rdmx::serial
