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
#include <atomic>
#include <span>
#include <vector>

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
    call_return(peer(), [sent] { return sent; }, into(back, sync));
    sync.wait();
    wrong += back != sent;
  }
  return wrong;
}

int consumed_round_trips(int n) {
  for (int i = 0; i < n; ++i) {
    Synchronizer sync;
    call(peer(), [i] { (void)i; }, when_run(sync));
    sync.wait();
  }
  return 0;  // nothing comes back to check
}
}  // namespace

TEST(CallAllocations, SmallCallReturnRoundTripAllocatesNothing) {
  expect_warm_round_trips_allocate_nothing(call_return_round_trips, "call_return round trips (and serving the peer's)");
}

TEST(CallAllocations, ConsumedCallRoundTripAllocatesNothing) {
  expect_warm_round_trips_allocate_nothing(consumed_round_trips, "consumed round trips (and serving the peer's)");
}

// Calls whose payload fits fabric::receive_reserved_bytes are received
// without an allocation from the first one on: the queue's slots exist, with
// their buffers, before any call arrives (the DSM relies on it: a call may
// arrive while its thread serves a fault that interrupted malloc). UCX lends
// its buffer for most payloads; the slots' own buffers take the others. Run
// alone (ctest's fabric.call_allocations.first_calls), before process 0's
// thread 0 has received any call: process 0 only calls out first, which
// connects the two processes both ways; then more calls than the queue has
// slots, of growing sizes, arrive for it in rounds.
TEST(CallAllocations, FirstCallsAreReceivedWithoutAllocating) {
  static std::atomic<std::size_t> received{0}, bytes{0};
  constexpr std::size_t calls = 15, rounds = 3;
  ASSERT_EQ(job().size(), 2u);
  if (job().rank() == 0) EXPECT_EQ(call_return_round_trips(20), 0);
  job().barrier();
  if (job().rank() == 1) {
    std::vector<std::byte> payload(fabric::receive_reserved_bytes);
    for (std::size_t round = 0; round < rounds; ++round) {
      for (std::size_t i = 0; i < calls; ++i) {
        const std::size_t size = fabric::receive_reserved_bytes - (calls - 1 - i) * 32;
        call_buffer({0, 0}, [](std::span<std::byte> data) {
          received.fetch_add(1);
          bytes.fetch_add(data.size());
        }, std::span(payload).first(size));
      }
      fabric::flush_sends();
      job().barrier();  // process 0 has run the round; then the next
    }
  } else {
    std::size_t expected_bytes = 0;
    for (std::size_t i = 0; i < calls; ++i) expected_bytes += fabric::receive_reserved_bytes - (calls - 1 - i) * 32;
    for (std::size_t round = 0; round < rounds; ++round) {
      counting = true;
      allocations = 0;
      while (received.load() < (round + 1) * calls) rdmx::progress();
      counting = false;
      EXPECT_EQ(allocations, 0u) << "heap allocations receiving round " << round << " of " << calls << " calls";
      if (allocations != 0) backtrace_symbols_fd(first_stack, first_depth, STDERR_FILENO);
      job().barrier();
    }
    EXPECT_EQ(bytes.load(), rounds * expected_bytes);
  }
}
