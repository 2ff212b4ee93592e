// A small send-based round trip allocates nothing once warm: no heap
// allocation on the calling thread, which also serves its peer's calls while
// it waits (so both the caller's and the callee's side are counted). Each
// malloc/free pair costs tens of nanoseconds, a sizable part of a
// sub-microsecond round trip (docs/results/latency.md).
#include <gtest/gtest.h>

#include <array>
#include <cstdlib>
#include <new>

#include "rdmx/fabric/call.hpp"
#include "rdmx/fabric/job.hpp"

namespace {
thread_local bool counting = false;
thread_local std::size_t allocations = 0;

void* allocate(std::size_t n, std::size_t align) {
  if (counting) ++allocations;
  void* p = align <= alignof(std::max_align_t) ? std::malloc(n == 0 ? 1 : n)
                                               : std::aligned_alloc(align, (n + align - 1) / align * align);
  if (p == nullptr) throw std::bad_alloc();
  return p;
}
}  // namespace

void* operator new(std::size_t n) { return allocate(n, alignof(std::max_align_t)); }
void* operator new[](std::size_t n) { return allocate(n, alignof(std::max_align_t)); }
void* operator new(std::size_t n, std::align_val_t a) { return allocate(n, static_cast<std::size_t>(a)); }
void* operator new[](std::size_t n, std::align_val_t a) { return allocate(n, static_cast<std::size_t>(a)); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }

using namespace rdmx;

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
  EXPECT_EQ(allocations, 0u) << "heap allocations during 2000 call_return round trips (and serving the peer's)";
}

TEST(CallAllocations, ConsumedCallRoundTripAllocatesNothing) {
  job().barrier();
  consumed_round_trips(200);
  counting = true;
  allocations = 0;
  consumed_round_trips(2000);
  counting = false;
  job().barrier();
  EXPECT_EQ(allocations, 0u) << "heap allocations during 2000 consumed round trips (and serving the peer's)";
}
