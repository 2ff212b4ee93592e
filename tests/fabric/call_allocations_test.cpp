// A small send-based round trip allocates nothing once warm: no heap
// allocation on the calling thread, which also serves its peer's calls while
// it waits (so both the caller's and the callee's side are counted). Each
// malloc/free pair costs tens of nanoseconds, a sizable part of a
// sub-microsecond round trip (docs/results/latency.md). What is asserted is
// "none per call": under a loaded machine, over TCP, one allocation in 2000
// round trips was seen once (work that is not per call); fewer than one in a
// hundred passes, and the first allocation's stack is printed either way.
#include <gtest/gtest.h>

#include <array>

#include "../counted_allocations.hpp"
#include "rdmx/fabric/call.hpp"
#include "rdmx/fabric/job.hpp"

using namespace rdmx;
using namespace rdmx::testing;

namespace {
Job& job() { return Job::current(); }
ThreadId peer() { return ThreadId{(job().rank() + 1) % job().size(), 0}; }

// n round trips with a 16-byte result; returns how many came back wrong.
int call_return_round_trips(int n) {
  int wrong = 0;
  for (int i = 0; i < n; ++i) {
    std::array<std::uint64_t, 2> sent{static_cast<std::uint64_t>(i), ~static_cast<std::uint64_t>(i)}, back{};
    Synchronizer sync;
    call_return(peer(), [sent] { return sent; }, &back, sync);
    sync.wait();
    wrong += back != sent;
  }
  return wrong;
}

void consumed_round_trips(int n) {
  for (int i = 0; i < n; ++i) {
    Synchronizer sync;
    call<Notify::consumed>(peer(), [i] { (void)i; }, sync);
    sync.wait();
  }
}
}  // namespace

TEST(CallAllocations, SmallCallReturnRoundTripAllocatesNothing) {
  job().barrier();
  EXPECT_EQ(call_return_round_trips(200), 0);  // warm: endpoints, send buffers, queues
  counting = true;
  allocations = 0;
  const int wrong = call_return_round_trips(2000);
  counting = false;
  job().barrier();
  EXPECT_EQ(wrong, 0);
  expect_none_per(2000, "call_return round trips (and serving the peer's)");
}

TEST(CallAllocations, ConsumedCallRoundTripAllocatesNothing) {
  job().barrier();
  consumed_round_trips(200);
  counting = true;
  allocations = 0;
  consumed_round_trips(2000);
  counting = false;
  job().barrier();
  expect_none_per(2000, "consumed round trips (and serving the peer's)");
}
