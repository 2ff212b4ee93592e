// One call each way for a list of values:
//
//   OutputArchive ar = serial::encode(x, y, data);     // signed with signature_of<X, Y, Data>()
//   std::span<const std::byte> message = ar.flatten();
//   auto [x2, y2, data2] = serial::decode<X, Y, Data>(message, chunks);
//
// decode builds fresh values and returns them only once the whole archive
// has been read and checked (signature, every byte, every chunk): on bad
// input it throws Errc::bad_archive and nothing it built is left behind.
#pragma once
#include <cstddef>
#include <span>
#include <tuple>
#include <type_traits>
#include <utility>

#include "rdmx/serial/input_archive.hpp"
#include "rdmx/serial/output_archive.hpp"
#include "rdmx/serial/signature.hpp"

namespace rdmx::serial {

// Temporaries among the values are kept by the archive (see OutputArchive).
template <class... T>
OutputArchive encode_with(ArchiveOptions options, T&&... values) {
  OutputArchive ar(options);
  ar.set_signature(signature_of<std::remove_cvref_t<T>...>());
  ar(std::forward<T>(values)...);
  return ar;
}

template <class... T>
OutputArchive encode(T&&... values) {
  return encode_with(ArchiveOptions{}, std::forward<T>(values)...);
}

// decode<T>() returns a T, decode<T, U, ...>() a std::tuple<T, U, ...>.
template <class... T>
auto decode(std::span<const std::byte> message, std::span<const ReceivedChunk> chunks = {}, InputOptions options = {}) {
  static_assert(sizeof...(T) > 0, "decode needs the types to decode");
  InputArchive ar(message, chunks, options);
  if (!ar.signature_matches(signature_of<T...>()))
    ar.fail("type signature mismatch: the archive was written for other types than the (mangled) " +
            detail::type_list<T...>());
  std::tuple<T...> values;
  std::apply([&ar](auto&... v) { ar(v...); }, values);
  ar.finish();
  if constexpr (sizeof...(T) == 1)
    return std::get<0>(std::move(values));
  else
    return values;
}

}  // namespace rdmx::serial
