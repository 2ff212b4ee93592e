// std::optional: a tag byte (0 empty, 1 engaged), then the value.
#pragma once
#include <optional>

#include "rdmx/serial/input_archive.hpp"
#include "rdmx/serial/output_archive.hpp"

namespace rdmx::serial {

template <archive A, class T>
void serialize(A& ar, std::optional<T>& value) {
  if constexpr (A::is_saving) {
    const std::uint8_t tag = value.has_value() ? 1 : 0;
    ar.write_bytes(&tag, 1);
    if (value) serialize_value(ar, *value);
  } else {
    if (ar.read_tag(2, "optional") == 0) {
      value.reset();
      return;
    }
    InputArchive::Nesting nesting(ar);
    serialize_value(ar, value.emplace());
  }
}

}  // namespace rdmx::serial
