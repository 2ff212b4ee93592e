// A one-sided call_return round trip allocates nothing once warm, on either
// side: what the caller is owed is counted in a map whose nodes are reused,
// and the list of messengers to publish keeps its capacity. Both processes
// call each other at once, so a waiting caller also serves the peer's
// calls: both sides counted.
#include <gtest/gtest.h>

#include <array>
#include <cstdint>

#include "../counted_allocations.hpp"
#include "rdmx/fabric/job.hpp"
#include "rdmx/invoke/messenger.hpp"

using namespace rdmx;
using namespace rdmx::testing;

namespace {
ThreadId peer() { return ThreadId{(Job::current().rank() + 1) % Job::current().size(), 0}; }

int round_trips(int n) {
  int wrong = 0;
  MessengerGlobal messenger;
  for (int i = 0; i < n; ++i) {
    std::array<std::uint64_t, 2> sent{static_cast<std::uint64_t>(i), ~static_cast<std::uint64_t>(i)}, back{};
    Synchronizer sync;
    messenger.call_return(peer(), [sent] { return sent; }, into(back, sync));
    sync.wait();
    wrong += back != sent;
  }
  return wrong;
}
}  // namespace

TEST(MessengerAllocations, CallReturnRoundTripAllocatesNothing) {
  expect_warm_round_trips_allocate_nothing(round_trips, "one-sided call_return round trips (and serving the peer's)");
}
