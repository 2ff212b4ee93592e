// Compute offload (AIFM's remote agent): work that runs where far objects
// live, on the servers' CPUs, so that only its result crosses the network.
// far::Array's reduce_remote and update_remote are built on it; this header
// has what they share with any other offloaded operation.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <type_traits>

#include "rdmx/core/error.hpp"
#include "rdmx/fabric/call.hpp"

namespace rdmx::far {

// In a function offloaded to a server: [offset, offset + bytes) of the
// region it serves; throws Errc::invalid_argument outside it.
std::span<std::byte> served_bytes(std::uint64_t offset, std::uint64_t bytes);

// A ready-made reduction for Array::reduce_remote: the sum of the elements.
template <class T>
struct Sum {
  using Result = T;
  T identity() const { return T{}; }
  void fold(T& r, const T* items, std::size_t n) const {
    for (std::size_t i = 0; i < n; ++i) r += items[i];
  }
  void combine(T& r, const T& part) const { r += part; }
};

namespace detail {

// One far object an offloaded request covers: where it is in the served
// region, and how many of its elements count.
struct OffloadObject {
  std::uint64_t offset;
  std::uint32_t items;
  std::uint32_t unused;
};
// Objects per request: a request stays one small message (the call's
// captures are limited to a few KiB).
inline constexpr std::size_t offload_objects = 128;

template <class Op>
struct OffloadHeader {
  Op op;
  std::uint32_t objects;
  std::uint32_t object_bytes;
};

// The server's side of an offloaded request over objects holding arrays of
// T: Kind::start(op) makes the result, Kind::run(op, result, items, n) is
// called per object, and the result is the reply.
template <class Op, class T, class Kind>
struct OffloadHandler {
  static void invoke(fabric::Incoming& in) {
    OffloadHeader<Op> header;
    if (in.closure_size < sizeof header) throw Error(Errc::protocol, "far: an offloaded request is too short for its header");
    std::memcpy(&header, in.closure, sizeof header);
    if (header.objects > offload_objects || in.closure_size != sizeof header + header.objects * sizeof(OffloadObject) ||
        header.object_bytes % sizeof(T) != 0)
      throw Error(Errc::protocol, "far: malformed offloaded request (" + std::to_string(header.objects) + " objects in " +
                                      std::to_string(in.closure_size) + " bytes)");
    auto result = Kind::start(header.op);
    for (std::uint32_t i = 0; i < header.objects; ++i) {
      OffloadObject object;
      std::memcpy(&object, in.closure + sizeof header + i * sizeof object, sizeof object);
      if (object.items > header.object_bytes / sizeof(T)) throw Error(Errc::protocol, "far: an offloaded object's element count overruns it");
      std::span<std::byte> bytes = served_bytes(object.offset, header.object_bytes);
      Kind::run(header.op, result, reinterpret_cast<T*>(bytes.data()), object.items);
    }
    in.reply(in, &result, sizeof result);
  }
};

}  // namespace detail
}  // namespace rdmx::far
