// Shared by the tests that check a path allocates nothing once warm: the
// global operator new and delete, replaced by ones that count the calling
// thread's heap allocations while `counting` is set and keep the first
// one's stack. Include it in exactly one source file of a test binary (it
// defines the replacement operators).
#pragma once
#include <gtest/gtest.h>

#include <execinfo.h>
#include <unistd.h>

#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <new>

#include "rdmx/fabric/job.hpp"

namespace rdmx::testing {

inline thread_local bool counting = false;
inline thread_local std::size_t allocations = 0;
// The first counted allocation's stack, printed when the count is checked.
inline thread_local void* first_stack[32];
inline thread_local int first_depth = 0;

inline void* allocate_counted(std::size_t n, std::size_t align) {
  if (counting && ++allocations == 1) {
    counting = false;  // backtrace() may allocate the first time it runs
    first_depth = backtrace(first_stack, 32);
    counting = true;
  }
  void* p = align <= alignof(std::max_align_t) ? std::malloc(n == 0 ? 1 : n)
                                               : std::aligned_alloc(align, (n + align - 1) / align * align);
  if (p == nullptr) throw std::bad_alloc();
  return p;
}

// Fewer than one allocation per hundred operations (work that is not per
// operation, seen once in thousands under load, passes); prints where the
// first came from either way.
inline void expect_none_per(std::size_t operations, const char* what) {
  if (allocations != 0) {
    std::fprintf(stderr, "%zu heap allocations during %zu %s; the first from:\n", allocations, operations, what);
    backtrace_symbols_fd(first_stack, first_depth, STDERR_FILENO);
  }
  EXPECT_LT(allocations, operations / 100) << "heap allocations during " << operations << " " << what;
}

// The shape of the "a warm round trip allocates nothing" tests:
// `round_trips(n)` makes n round trips and returns how many came back wrong.
// Run warm first, then counted between two barriers of the job; every
// process does the same, so a waiting caller also serves (and counts) its
// peer's calls. count_warm_round_trips returns the count, for a path that
// allocates a known number per round trip.
template <class RoundTrips>
std::size_t count_warm_round_trips(RoundTrips&& round_trips, int counted) {
  constexpr int warm = 200;
  Job::current().barrier();
  EXPECT_EQ(round_trips(warm), 0);  // endpoints, rings, queues, pools
  counting = true;
  allocations = 0;
  const int wrong = round_trips(counted);
  counting = false;
  Job::current().barrier();
  EXPECT_EQ(wrong, 0);
  return allocations;
}

template <class RoundTrips>
void expect_warm_round_trips_allocate_nothing(RoundTrips&& round_trips, const char* what) {
  constexpr int counted = 2000;
  count_warm_round_trips(round_trips, counted);
  expect_none_per(counted, what);
}

}  // namespace rdmx::testing

void* operator new(std::size_t n) { return rdmx::testing::allocate_counted(n, alignof(std::max_align_t)); }
void* operator new[](std::size_t n) { return rdmx::testing::allocate_counted(n, alignof(std::max_align_t)); }
void* operator new(std::size_t n, std::align_val_t a) { return rdmx::testing::allocate_counted(n, static_cast<std::size_t>(a)); }
void* operator new[](std::size_t n, std::align_val_t a) { return rdmx::testing::allocate_counted(n, static_cast<std::size_t>(a)); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
