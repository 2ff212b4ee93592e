// The DSM's fault path runs inside a SIGSEGV handler, so it may interrupt
// anything: it must not allocate (the thread may have faulted inside
// malloc) and must not run calls while it waits for the network (a call
// addressed to the faulting thread could touch the block whose lock the
// fault holds). Run with either protocol pair (floating home + signatures,
// fixed home + directory), over shared memory and TCP.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <thread>

#include "../counted_allocations.hpp"
#include "rdmx/dsm/counters.hpp"
#include "rdmx/dsm/fence.hpp"
#include "rdmx/dsm/space.hpp"
#include "rdmx/fabric/call.hpp"
#include "support.hpp"

using namespace rdmx;
using dsm_test::job;
using rdmx::testing::allocations;
using rdmx::testing::counting;
using dsm_test::space;

namespace {
std::uint64_t value(std::uint64_t round, std::uint64_t block) { return (round + 1) * 0x9E3779B97F4A7C15ull ^ block; }

volatile std::uint64_t* word(std::byte* heap, std::size_t block, std::size_t at = 0) {
  return reinterpret_cast<volatile std::uint64_t*>(heap + block * space().config().block_bytes) + at;
}

void report_allocations(const char* what, std::size_t faults) {
  if (allocations != 0) {
    std::fprintf(stderr, "%zu heap allocations during %zu %s; the first from:\n", allocations, faults, what);
    backtrace_symbols_fd(rdmx::testing::first_stack, rdmx::testing::first_depth, STDERR_FILENO);
  }
  EXPECT_EQ(allocations, 0u) << "heap allocations during " << faults << " " << what;
  allocations = 0;
}
}  // namespace

// Rounds of: every block written by one process (its writer turns with the
// round, so each write faults on a block another process wrote last), a
// barrier, then every block read by all, plus blocks nobody wrote (their
// home is found through the owner word; with leases once signatures have
// overflowed). Every fault, of either kind, counted on this thread: not one
// allocation.
TEST(FaultPath, ServesFaultsWithoutAllocating) {
  const std::uint32_t procs = job().size(), rank = job().rank();
  ASSERT_GE(procs, 2u) << "one process never faults";
  constexpr std::size_t written = 96, fresh_per_round = 16, rounds = 4;
  const std::size_t bytes = space().config().block_bytes;
  auto* heap = static_cast<std::byte*>(dsm::allocate((written + rounds * fresh_per_round) * bytes, bytes));
  const dsm::Counters before = dsm::counters();
  std::size_t reads = 0, writes = 0;
  for (std::size_t round = 0; round < rounds; ++round) {
    std::size_t mine = 0;
    std::uint64_t sink = 0;
    counting = true;
    for (std::size_t b = 0; b < written; ++b) {
      if ((b + round) % procs != rank) continue;
      // Half are read first: a write to a clean copy faults again (the twin).
      if (b % 2 == 0) sink += *word(heap, b);
      *word(heap, b) = value(round, b);
      *word(heap, b, 100) = value(round, b) + 1;  // the same block: no second fault
      ++mine;
    }
    counting = false;
    EXPECT_NE(sink, 1u);  // keeps the reads
    writes += mine;
    report_allocations("write faults", mine);
    dsm::process_barrier();

    std::size_t wrong = 0, seen = 0;
    counting = true;
    for (std::size_t b = 0; b < written; ++b) {
      wrong += *word(heap, b) != value(round, b);
      wrong += *word(heap, b, 100) != value(round, b) + 1;
      ++seen;
    }
    for (std::size_t f = 0; f < fresh_per_round; ++f) {
      wrong += *word(heap, written + round * fresh_per_round + f) != 0;
      ++seen;
    }
    counting = false;
    reads += seen;
    EXPECT_EQ(wrong, 0u) << "round " << round;
    report_allocations("reads (faults, fast reads and owner lookups)", seen);
    dsm::process_barrier();
  }
  // A run of blocks of its own, written in order: write faults that make the
  // following blocks writable too (write-ahead), fetching them.
  const std::size_t run = 3 * (space().config().write_ahead + 1);
  auto* own = static_cast<std::byte*>(dsm::allocate(procs * run * bytes, bytes));
  const dsm::Counters before_run = dsm::counters();
  counting = true;
  for (std::size_t b = rank * run; b < (rank + 1) * run; ++b) *word(own, b) = value(rounds, b);
  counting = false;
  report_allocations("sequential writes (write faults and blocks made writable ahead)", run);
  dsm::process_barrier();
  for (std::size_t b = 0; b < procs * run; ++b) ASSERT_EQ(*word(own, b), value(rounds, b)) << "block " << b;
  const dsm::Counters after = dsm::counters();
  if (space().config().write_ahead > 0) EXPECT_GT(after.write_ahead - before_run.write_ahead, 0u);
  // A block fetched ahead of a sequential read miss saves that block's fault.
  const std::uint64_t read_faults = after.read_faults - before.read_faults + after.read_ahead - before.read_ahead;
  const std::uint64_t fast_reads = after.fast_reads - before.fast_reads;
  std::printf("rank %u: %llu read misses (%llu fast reads), %llu write faults, over %zu reads and %zu writes\n", rank,
              static_cast<unsigned long long>(read_faults), static_cast<unsigned long long>(fast_reads),
              static_cast<unsigned long long>(after.write_faults - before.write_faults), reads, writes);
  // Every block another process wrote in this round, and every fresh block,
  // was a read miss.
  EXPECT_GE(read_faults, rounds * (written - written / procs - 1 + fresh_per_round));
  EXPECT_GE(after.write_faults - before.write_faults, rounds * (written / procs));
  EXPECT_GT(read_faults - fast_reads, 0u) << "no read looked its home up in the owner word";
  if (space().config().invalidation == dsm::Invalidation::directory)
    EXPECT_EQ(fast_reads, 0u) << "the directory has no write notices";
  else if (space().config().notices >= written)
    EXPECT_GT(fast_reads, 0u) << "no read was served from a write notice";
  else  // each barrier's signatures overflow, which forgets every notice; reads take leases
    EXPECT_GT(after.overflows - before.overflows, 0u) << "no signature overflowed";
}

// A call addressed to this thread is pending when it faults on a block that
// the call reads too. The fault must not run the call while it waits for the
// block (the call's own fault would wait for the lock this fault holds, for
// ever); the call runs after the fault, at the thread's next poll.
TEST(FaultPath, RunsNoCallWhileItWaits) {
  const std::uint32_t procs = job().size(), rank = job().rank();
  ASSERT_GE(procs, 2u);
  const std::size_t bytes = space().config().block_bytes;
  constexpr std::size_t tries = 8;
  auto* heap = static_cast<std::byte*>(dsm::allocate(tries * procs * bytes, bytes));
  // A deadlock would hang the test: say so and end it instead.
  std::atomic<bool> done{false};
  std::thread watchdog([&done] {
    for (auto until = std::chrono::steady_clock::now() + std::chrono::seconds(90);
         !done.load() && std::chrono::steady_clock::now() < until;)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    if (!done.load()) {
      std::fprintf(stderr, "FAILED: FaultPath.RunsNoCallWhileItWaits: no progress in 90 s (the fault ran the call?)\n");
      std::fflush(stderr);
      std::_Exit(1);
    }
  });
  for (std::size_t t = 0; t < tries; ++t) {
    // Each process writes a block of its own; then each reads the block of
    // the next process, a miss served from another process.
    *word(heap, t * procs + rank) = value(t, rank);
    dsm::process_barrier();
    const std::uint32_t other = (rank + 1) % procs;
    const std::size_t block = t * procs + other;
    struct Seen {
      bool ran = false;
      bool after_fault = false;
      std::uint64_t value = 0;
    } seen;
    bool fault_returned = false;
    volatile std::uint64_t* target = word(heap, block);
    call(this_thread(), [target, s = &seen, f = &fault_returned] {
      s->after_fault = *f;
      s->value = *target;  // the same block
      s->ran = true;
    });
    const std::uint64_t read = *target;  // the fault
    fault_returned = true;
    EXPECT_FALSE(seen.ran) << "try " << t << ": the call ran inside the fault";
    EXPECT_EQ(read, value(t, other));
    for (auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
         !seen.ran && std::chrono::steady_clock::now() < until;)
      progress();
    ASSERT_TRUE(seen.ran) << "try " << t << ": the call never ran";
    EXPECT_TRUE(seen.after_fault) << "try " << t;
    EXPECT_EQ(seen.value, value(t, other)) << "try " << t;
    dsm::process_barrier();
  }
  done.store(true);
  watchdog.join();
}
