// An action's round trip with plain values allocates nothing once warm, on
// either side: the archive is leased from a pool, the parcel's entry is a
// slot of a token table, and the future's shared state comes from a
// per-thread list of recycled blocks (rdmx/core/recycled_blocks.hpp). Each
// malloc/free pair costs tens of nanoseconds of a sub-microsecond round
// trip (docs/results/latency.md). Both processes call each other at once,
// so a waiting caller also serves the peer's requests: both sides counted.
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "../counted_allocations.hpp"
#include "rdmx/action/action.hpp"
#include "rdmx/fabric/job.hpp"
#include "rdmx/serial/serialize_buffer.hpp"

using namespace rdmx;
using namespace rdmx::testing;

namespace {
ThreadId peer() { return ThreadId{(Job::current().rank() + 1) % Job::current().size(), 0}; }

std::uint64_t mix(std::uint64_t x) { return x * 0x9e3779b97f4a7c15ull + 1; }

// n round trips; returns how many came back wrong.
int round_trips(int n) {
  int wrong = 0;
  for (int i = 0; i < n; ++i) {
    const auto x = static_cast<std::uint64_t>(i);
    wrong += async(action<&mix>, peer(), x).get() != mix(x);
  }
  return wrong;
}
}  // namespace

TEST(ActionAllocations, RoundTripOfPlainValuesAllocatesNothing) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "AddressSanitizer builds recycle no future states (a use after free stays visible)";
#endif
  expect_warm_round_trips_allocate_nothing(round_trips, "async round trips (and serving the peer's)");
}

namespace {
serial::SerializeBuffer<char> echo(serial::SerializeBuffer<char> b) { return b; }

// n round trips of `size` bytes at `bytes`; returns how many came back wrong.
int buffer_round_trips(char* bytes, std::size_t size, int n) {
  int wrong = 0;
  for (int i = 0; i < n; ++i) {
    bytes[0] = static_cast<char>('a' + i % 26);
    bytes[size - 1] = static_cast<char>('z' - i % 26);
    auto back = async(action<&echo>, peer(), serial::SerializeBuffer<char>::reference(bytes, size)).get();
    wrong += back.size() != size || back[0] != bytes[0] || back[size - 1] != bytes[size - 1];
  }
  return wrong;
}
}  // namespace

// A SerializeBuffer below the zero-copy threshold travels inline and lands
// in memory of its own: up to 1 KiB from the thread's recycled blocks, so a
// warm round trip allocates nothing; above, one allocation where the
// argument lands and one where the result does, nothing else (no count for
// the caller's reference, none per archive).
TEST(ActionAllocations, RoundTripOfASmallReferencedBufferAllocatesNothing) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "AddressSanitizer builds recycle no blocks";
#endif
  for (std::size_t size : {1, 16, 64, 100, 256, 300, 1024}) {
    std::vector<char> bytes(size, 'x');
    expect_warm_round_trips_allocate_nothing([&](int n) { return buffer_round_trips(bytes.data(), size, n); },
                                             "async round trips of a small SerializeBuffer");
  }
}

TEST(ActionAllocations, RoundTripOfALargerReferencedBufferAllocatesOnlyWhereItLands) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "AddressSanitizer builds recycle no blocks";
#endif
  std::vector<char> bytes(4096, 'x');
  constexpr int counted = 2000;
  // Per process: the results of its own calls and the arguments of the
  // peer's, which it serves while it waits.
  EXPECT_LE(count_warm_round_trips([&](int n) { return buffer_round_trips(bytes.data(), bytes.size(), n); }, counted),
            std::size_t{2 * counted + counted / 100});
}
