// How a value finds its serialization, in the usual C++ way (as in HPX and
// cereal). One function serves both directions; the archive says which
// (A::is_saving / A::is_loading):
//
//   struct Particle {
//     std::uint64_t id; std::string name; std::vector<double> position;
//     template <class Archive> void serialize(Archive& ar) { ar(id, name, position); }
//   };
//   // or, for a type you cannot change, next to it (found by ADL):
//   template <class Archive> void serialize(Archive& ar, Particle& p) { ar(p.id, p.name, p.position); }
//
// Order of preference: the bitwise fast path (is_bitwise_serializable), a
// member serialize(Archive&), a free serialize(Archive&, T&). rdmx's own
// overloads for standard types live in rdmx::serial, the archives'
// namespace, so argument-dependent lookup finds them wherever they are
// included. Everything is resolved at compile time: no virtual call per value.
#pragma once
#include <cstdint>
#include <type_traits>

#include "rdmx/serial/bitwise.hpp"
#include "rdmx/serial/fwd.hpp"

namespace rdmx::serial {

namespace detail {
template <class T, class A>
concept member_serializable = requires(T& value, A& ar) { value.serialize(ar); };
template <class T, class A>
concept free_serializable = requires(T& value, A& ar) { serialize(ar, value); };
template <class>
inline constexpr bool unsupported = false;
}  // namespace detail

// Whether T has a way to be serialized (its own; the types it contains are
// checked when it is). For one-sentence errors at rdmx's entry points.
template <class T>
concept serializable = is_bitwise_serializable_v<T> || detail::member_serializable<T, OutputArchive> ||
                       detail::free_serializable<T, OutputArchive>;

template <archive A, class T>
void serialize_value(A& ar, T& value) {
  if constexpr (is_bitwise_serializable_v<T>) {
    static_assert(std::is_trivially_copyable_v<T>, "is_bitwise_serializable is specialized for a type that is not trivially copyable");
    ar.bitwise(value);
  } else if constexpr (detail::member_serializable<T, A>) {
    value.serialize(ar);
  } else if constexpr (detail::free_serializable<T, A>) {
    serialize(ar, value);
  } else {
    static_assert(detail::unsupported<T>,
                  "rdmx::serial: no serialization for this type. Give it a member `template <class Archive> void "
                  "serialize(Archive&)`, a free `serialize(Archive&, T&)` found by ADL, or specialize "
                  "rdmx::serial::is_bitwise_serializable for a trivially copyable type; for standard types include "
                  "rdmx/serial/serial.hpp");
  }
}

// bool is one byte, 0 or 1, checked on loading (see bitwise.hpp for why it
// is not bitwise).
template <archive A>
void serialize(A& ar, bool& value) {
  if constexpr (A::is_saving) {
    const std::uint8_t byte = value ? 1 : 0;
    ar.write_bytes(&byte, 1);
  } else {
    value = ar.read_tag(2, "bool") != 0;
  }
}

}  // namespace rdmx::serial
