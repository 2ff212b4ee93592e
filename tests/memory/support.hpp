// Shared by the memory tests: one UCX context for the whole binary (creating
// one costs tens of milliseconds) and small arenas, since /dev/shm is limited.
#pragma once
#include <cstddef>

#include "rdmx/memory/arena.hpp"
#include "rdmx/transfer/context.hpp"

namespace rdmx::memory::testing {

constexpr std::size_t KiB = std::size_t{1} << 10;
constexpr std::size_t MiB = std::size_t{1} << 20;

inline transfer::Context& context() {
  static transfer::Context ctx;
  return ctx;
}

// UCX-backed so the tests do not depend on the machine's huge-page pools.
inline Arena::Options small_arena(std::size_t segment = 1 * MiB, std::size_t max = 4 * MiB) {
  Arena::Options options;
  options.segment_size = segment;
  options.max_size = max;
  options.backing = Backing::ucx;
  return options;
}

}  // namespace rdmx::memory::testing
