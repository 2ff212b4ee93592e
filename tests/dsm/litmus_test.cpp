// Litmus tests of the DSM's release consistency across processes: message
// passing through a barrier and a mutex, false sharing merged, a
// release-acquire chain, home migration while others read, and a
// randomized data-race-free program checked against its sequential replay.
#include <gtest/gtest.h>

#include <sys/mman.h>

#include <atomic>
#include <bit>
#include <chrono>
#include <cstdint>
#include <memory>
#include <random>
#include <thread>

#include "rdmx/core/error.hpp"
#include "rdmx/dsm/counters.hpp"
#include "rdmx/dsm/fence.hpp"
#include "rdmx/dsm/mutex.hpp"
#include "rdmx/dsm/space.hpp"
#include "rdmx/memory/arena.hpp"
#include "support.hpp"

using namespace rdmx;
using dsm_test::gather;
using dsm_test::job;

using dsm_test::space;
using dsm_test::the_space;

namespace {
std::size_t block() { return space().config().block_bytes; }
std::uint32_t rank() { return job().rank(); }
std::uint32_t procs() { return job().size(); }

std::uint64_t value(std::uint64_t round, std::uint64_t i) { return (round + 1) * 0x9E3779B97F4A7C15ull ^ (i * 7919); }
// Which write a value of the stress test came from, for failure messages.
std::string origin(std::uint64_t v, std::size_t i) {
  if (v == 0) return "the initial zero";
  for (std::uint64_t round = 0; round < 64; ++round)
    for (std::uint64_t p = 0; p < 64; ++p)
      if (value(round, i) + p == v) return "round " + std::to_string(round) + "'s write by " + std::to_string(p);
  return "an unknown value";
}
}  // namespace

// Runs first: before any Space exists, fences are a clear error.
TEST(Litmus, FenceWithoutSpaceIsAnError) {
  ASSERT_FALSE(the_space);
  try {
    dsm::process_barrier();
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::invalid_argument);
    EXPECT_NE(std::string(e.what()).find("no dsm::Space"), std::string::npos) << e.what();
  }
  EXPECT_THROW(dsm::release(), Error);
  EXPECT_THROW(dsm::Mutex(0).lock(), Error);
}

// Also before any Space: a heap address that one process cannot map is a
// clear error in every process, naming the address and the process.
TEST(Litmus, AnAddressTakenSomewhereIsAClearError) {
  ASSERT_FALSE(the_space);
  dsm::Config config = dsm::Config::from_env();
  config.heap_bytes = 1 << 20;
  config.address = 0x300000000000;
  void* squatter = nullptr;
  if (rank() == procs() - 1) {
    squatter = mmap(reinterpret_cast<void*>(config.address + 4096), 4096, PROT_READ,
                    MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
    ASSERT_NE(squatter, MAP_FAILED);
  }
  try {
    dsm::Space space(job(), config);
    FAIL() << "a Space started at an address taken in process " << procs() - 1;
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::out_of_memory);
    const std::string text = e.what();
    EXPECT_NE(text.find("0x300000000000: taken in process(es) " + std::to_string(procs() - 1)), std::string::npos)
        << text;
  }
  if (squatter != nullptr) munmap(squatter, 4096);
  // Different configurations are refused too.
  dsm::Config odd = dsm::Config::from_env();
  odd.heap_bytes = 1 << 20;
  if (rank() == 0) odd.mutexes += 1;
  if (procs() > 1) {
    try {
      dsm::Space space(job(), odd);
      FAIL() << "processes with different configurations started a Space";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("configured its space differently"), std::string::npos) << e.what();
    }
  }
}

// The home copies are one registered chunk of the heap's size: a heap
// larger than an arena segment gets a segment of its own, with no setting.
TEST(Litmus, HeapLargerThanAnArenaSegment) {
  ASSERT_FALSE(the_space);
  dsm::Config config = dsm::Config::from_env();
  config.heap_bytes = job().arena().segment_size() + (std::size_t{1} << 20);
  dsm::Space space(job(), config);
  auto* words = static_cast<volatile std::uint64_t*>(dsm::allocate(config.heap_bytes - 2 * config.block_bytes));
  const std::size_t last = (config.heap_bytes - 2 * config.block_bytes) / sizeof(std::uint64_t) - 1;
  if (rank() == procs() - 1) {
    words[0] = 7;
    words[last] = 11;
  }
  dsm::process_barrier();
  EXPECT_EQ(words[0], 7u);
  EXPECT_EQ(words[last], 11u);
  dsm::process_barrier();
}

// Directory invalidation: a release that took a block's sharers tells each
// with a byte. Process 1 releases the block (a plain release, no lock) and
// is slow to tell process 0, which still caches it; meanwhile process 2
// increments a counter in the block under a mutex, and process 0 takes the
// mutex after it. The release of process 2 must wait until process 1's byte
// has landed, or process 0 keeps its stale copy and the increment of
// process 2 is lost (the job barrier between the phases is the launcher's,
// not the DSM's: it acquires nothing).
TEST(Litmus, DirectoryReleaseWaitsForAnotherReleasersInvalidation) {
  ASSERT_FALSE(the_space);
  if (procs() < 3) GTEST_SKIP() << "needs 3 processes";
  dsm::Config config = dsm::Config::from_env();
  config.invalidation = dsm::Invalidation::directory;
  constexpr std::uint32_t stale = 0, slow = 1, other = 2;
  if (rank() == slow) config.tell_delay_us = 60'000;
  dsm::Space space(job(), config);
  auto* data = static_cast<volatile std::uint64_t*>(dsm::allocate(config.block_bytes, config.block_bytes));
  dsm::Mutex counter(3);
  dsm::process_barrier();
  for (std::uint64_t round = 0; round < 3; ++round) {
    if (rank() == stale) {
      counter.lock();
      data[0] = data[0] + 1;
      counter.unlock();
    }
    job().barrier();
    if (rank() == slow) {
      data[1] = round + 1;
      dsm::release();
    }
    if (rank() == other) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      counter.lock();
      data[0] = data[0] + 1;
      counter.unlock();
    }
    if (rank() == stale) {
      std::this_thread::sleep_for(std::chrono::milliseconds(25));
      counter.lock();
      data[0] = data[0] + 1;
      counter.unlock();
    }
    dsm::process_barrier();
    ASSERT_EQ(data[0], 3 * (round + 1)) << "round " << round;
    ASSERT_EQ(data[1], round + 1) << "round " << round;
    dsm::process_barrier();
  }
}

// NPB LU's pipeline on the DSM's API: rows handed down the chain of
// processes, each waiting for its predecessor's flag with a lock and unlock
// of mutex 0 in the loop (an OpenMP flush) and reading the predecessor's
// row after the loop with no acquire between; the flags share one block,
// which every process writes. With Config::causal_mutex 0 a miss that finds
// a newer version of the flags' block acquires through mutex 0 first, so
// the row written before the flag is there. Without it a reader may find
// the flag before it acquired the row: seen in some runs of 4 processes
// (tests/omp/pipeline.c, on 3 processes, in every run). A causal mutex the
// space does not have is refused.
TEST(Litmus, CausalMissSeesTheDataWrittenBeforeAFlag) {
  ASSERT_FALSE(the_space);
  dsm::Config config = dsm::Config::from_env();
  dsm::Config missing = config;
  missing.causal_mutex = missing.mutexes;
  try {
    dsm::Space refused(job(), missing);
    ADD_FAILURE() << "a causal mutex past the last one was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::invalid_argument);
    EXPECT_NE(std::string(e.what()).find("causal mutex"), std::string::npos) << e.what();
  }
  config.causal_mutex = 0;
  // rdmx_omp's block: three rows and the flags share one, as LU's do.
  config.block_bytes = std::max<std::size_t>(config.block_bytes, 16 << 10);
  dsm::Space space(job(), config);
  // Each process takes 4 rows in turn, as `omp for schedule(static)` deals
  // them; a row is LU class S's (845 doubles), so rows of neighbours share
  // blocks.
  constexpr std::size_t per = 4, words = 845;
  const std::size_t n = per * procs(), first = per * rank();
  // The flags and the rows in one allocation, as globals would lie.
  auto* flags = dsm::allocate_array<std::uint64_t>(n + words * n);
  auto* rows = flags + n;
  dsm::Mutex flush(0);
  const auto fence = [&] {
    flush.lock();
    flush.unlock();
  };
  dsm::process_barrier();
  std::uint64_t stale = 0;
  // Where signatures overflow every acquire drops every copy, and with a
  // directory every refetch of a block another process wrote is a causal
  // miss: each turn of a waiting loop costs several round trips more, and
  // thirty rounds take a minute over TCP.
  const bool lean = config.invalidation == dsm::Invalidation::signature && config.notices >= 64;
  const std::uint64_t rounds = lean ? 30 : 4;
  for (std::uint64_t round = 1; round <= rounds; ++round) {
    for (std::size_t row = first; row < first + per; ++row) {
      if (row > 0)
        while (flags[row - 1] == 0) fence();
      if (row + 1 < n)
        while (flags[row] == 1) fence();  // the successor has not taken the last round yet
      for (std::size_t i = 0; i < words; ++i) {
        if (row > 0) stale += rows[(row - 1) * words + i] != value(round, (row - 1) * words + i);
        if (round > 1) stale += rows[row * words + i] != value(round - 1, row * words + i);
      }
      for (std::size_t i = 0; i < words; ++i) rows[row * words + i] = value(round, row * words + i);
      if (row > 0) flags[row - 1] = 0;
      if (row + 1 < n) flags[row] = 1;
      fence();
    }
  }
  dsm::process_barrier();
  EXPECT_EQ(stale, 0u) << "stale words read after a flag; " << dsm::to_string(dsm::counters());
}

TEST(Litmus, HeapAndAllocationsHaveOneAddress) {
  space();
  auto* heap = space().heap().data();
  auto* p = dsm::allocate(100);
  auto* q = dsm::allocate_array<std::uint64_t>(3);
  const auto heaps = gather(reinterpret_cast<std::uintptr_t>(heap));
  const auto ps = gather(reinterpret_cast<std::uintptr_t>(p));
  for (std::uint32_t r = 0; r < procs(); ++r) {
    EXPECT_EQ(heaps[r], heaps[0]);
    EXPECT_EQ(ps[r], ps[0]);
  }
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(q) % alignof(std::uint64_t), 0u);
  EXPECT_GE(reinterpret_cast<std::byte*>(q), static_cast<std::byte*>(p) + 100);
  dsm::process_barrier();
}

TEST(Litmus, BadRequestsAreClearErrors) {
  space();
  try {
    dsm::allocate(space().heap().size() + 1);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::out_of_memory);
    EXPECT_NE(std::string(e.what()).find("do not fit the shared heap"), std::string::npos) << e.what();
  }
  EXPECT_THROW(dsm::allocate(64, 3), Error);
  EXPECT_THROW(dsm::allocate(64, block() * 2), Error);
  EXPECT_THROW(dsm::Mutex(space().config().mutexes).lock(), Error);
  // Unlocking a mutex nobody holds.
  EXPECT_THROW(dsm::Mutex(rank()).unlock(), Error);
  dsm::process_barrier();
}

// A bad request on one process only fails the allocation on every process,
// naming that process, and the next allocation, the same on all, starts in
// step and gives every process the same address.
TEST(Litmus, ABadRequestOnOneProcessFailsOnAll) {
  space();
  const std::size_t alignment = rank() == procs() - 1 ? 3 : 8;
  try {
    dsm::allocate(64, alignment);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::invalid_argument);
    const std::string named = "process " + std::to_string(procs() - 1) + " asked for alignment 3";
    EXPECT_NE(std::string(e.what()).find(named), std::string::npos) << e.what();
  }
  auto* p = static_cast<std::uint64_t*>(dsm::allocate(64, 8));
  const auto where = job().allgather(reinterpret_cast<std::uintptr_t>(p));
  for (const auto w : where) EXPECT_EQ(w, where[0]);
  dsm::process_barrier();
}

// A thread locking a mutex it holds would wait for its own unlock for ever:
// an error instead, and the mutex stays held (try_lock: false) until the
// holder unlocks it, after which another process takes it as usual.
TEST(Litmus, MutexLockedAgainByItsHolderIsAClearError) {
  space();
  dsm::Mutex m(rank());
  m.lock();
  try {
    m.lock();
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::invalid_argument);
    EXPECT_NE(std::string(e.what()).find("already held by this thread"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(m.try_lock());
  m.unlock();
  dsm::process_barrier();
  dsm::Mutex next((rank() + 1) % procs());
  next.lock();
  next.unlock();
  dsm::process_barrier();
}

TEST(Litmus, MessagePassingThroughBarrier) {
  space();
  const std::size_t n = 4 * block() / sizeof(std::uint64_t);
  auto* data = dsm::allocate_array<std::uint64_t>(n);
  for (std::uint32_t round = 0; round < 2 * procs(); ++round) {
    const std::uint32_t writer = round % procs();
    if (rank() == writer)
      for (std::size_t i = 0; i < n; ++i) data[i] = value(round, i);
    dsm::process_barrier();
    for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(data[i], value(round, i)) << "round " << round << " word " << i;
    dsm::process_barrier();
  }
  const dsm::Counters c = dsm::counters();
  EXPECT_GT(c.read_faults + c.write_faults, 0u) << dsm::to_string(c);
  EXPECT_GT(c.merges, 0u) << dsm::to_string(c);
  // Each writer released 4 blocks: a signature of fewer notices overflowed.
  if (space().config().notices < 4 && procs() > 1) EXPECT_GT(c.overflows, 0u) << dsm::to_string(c);
  if (space().config().notices >= 4) EXPECT_EQ(c.overflows, 0u) << dsm::to_string(c);
}

TEST(Litmus, MessagePassingThroughMutex) {
  space();
  auto* flag = dsm::allocate_array<std::uint64_t>(1);
  auto* data = static_cast<std::uint64_t*>(dsm::allocate(block(), block()));
  const std::size_t n = block() / sizeof(std::uint64_t);
  dsm::process_barrier();
  dsm::Mutex m(1);
  if (rank() == 0) {
    m.lock();
    for (std::size_t i = 0; i < n; ++i) data[i] = value(77, i);
    *flag = 1;
    m.unlock();
  } else {
    for (bool seen = false; !seen;) {
      m.lock();
      if (*flag == 1) {
        seen = true;
        for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(data[i], value(77, i)) << i;
      }
      m.unlock();
    }
  }
  dsm::process_barrier();
}

// A block moves from home to home through processes 1, 2, ... in turn,
// each taking it under a mutex; process 0 takes no part and then reads it
// after a barrier. Its probable owner is the block's first home: where no
// write notice tells it the last one (leases only, or a directory), it
// follows the links each previous home left, and finds every write.
TEST(Litmus, HomeFoundThroughProbableOwnerLinks) {
  space();
  // Of P blocks, the one that starts at home in process 0 (block mod P).
  auto* blocks = static_cast<std::byte*>(dsm::allocate(procs() * block(), block()));
  const std::size_t first = static_cast<std::size_t>(blocks - space().heap().data()) / block();
  auto* data = reinterpret_cast<std::uint64_t*>(blocks + (procs() - first % procs()) % procs() * block());
  ASSERT_EQ(static_cast<std::size_t>(reinterpret_cast<std::byte*>(data) - space().heap().data()) / block() % procs(),
            0u);
  dsm::process_barrier();
  dsm::Mutex m(3);
  if (rank() != 0) {
    for (bool done = false; !done;) {
      m.lock();
      if (data[0] == rank() - 1) {  // data[0]: whose turn was last
        data[rank()] = value(5, rank());
        data[0] = rank();
        done = true;
      }
      m.unlock();
    }
  }
  dsm::process_barrier();
  const dsm::Counters before = dsm::counters();
  EXPECT_EQ(data[0], procs() - 1);
  for (std::uint32_t p = 1; p < procs(); ++p) EXPECT_EQ(data[p], value(5, p)) << "process " << p << "'s write";
  const dsm::Config& c = space().config();
  const bool told = c.invalidation == dsm::Invalidation::signature && c.notices > 0;
  if (rank() == 0 && c.home == dsm::HomePolicy::floating && !told && procs() >= 3)
    EXPECT_GE(dsm::counters().links_followed - before.links_followed, procs() - 1u)
        << "the block's first home links to its second, and so on";
  dsm::process_barrier();
}

TEST(Litmus, MutexCountsEveryIncrement) {
  space();
  auto* counter = static_cast<std::uint64_t*>(dsm::allocate(block(), block()));
  dsm::process_barrier();
  constexpr int rounds = 20;
  dsm::Mutex m(2);
  for (int i = 0; i < rounds; ++i) {
    m.lock();
    *counter += 1;
    m.unlock();
  }
  dsm::process_barrier();
  EXPECT_EQ(*counter, std::uint64_t{rounds} * procs());
  dsm::process_barrier();
}

TEST(Litmus, TwoWritersOfOneBlockAreMerged) {
  space();
  auto* bytes = static_cast<std::uint8_t*>(dsm::allocate(block(), block()));
  for (int round = 0; round < 3; ++round) {
    for (std::size_t i = rank(); i < block(); i += procs()) bytes[i] = static_cast<std::uint8_t>(round * 16 + i % 251 + 1);
    dsm::process_barrier();
    for (std::size_t i = 0; i < block(); ++i)
      ASSERT_EQ(bytes[i], static_cast<std::uint8_t>(round * 16 + i % 251 + 1)) << "round " << round << " byte " << i;
    dsm::process_barrier();
  }
}

// Process r waits for its turn under a mutex, checks every earlier process's
// part (written under the mutex before it, through a chain of processes),
// writes its own and passes the turn on.
TEST(Litmus, ReleaseAcquireChain) {
  space();
  const std::size_t part = block() / sizeof(std::uint64_t);
  auto* data = static_cast<std::uint64_t*>(dsm::allocate(procs() * block(), block()));
  auto* turn = static_cast<std::uint64_t*>(dsm::allocate(block(), block()));
  dsm::process_barrier();
  dsm::Mutex m(3);
  for (bool done = false; !done;) {
    m.lock();
    if (*turn == rank()) {
      for (std::uint32_t r = 0; r < rank(); ++r)
        for (std::size_t i = 0; i < part; ++i) ASSERT_EQ(data[r * part + i], value(r, i)) << "part " << r << " word " << i;
      for (std::size_t i = 0; i < part; ++i) data[rank() * part + i] = value(rank(), i);
      *turn = rank() + 1;
      done = true;
    }
    m.unlock();
  }
  dsm::process_barrier();
  for (std::uint32_t r = 0; r < procs(); ++r)
    for (std::size_t i = 0; i < part; ++i) ASSERT_EQ(data[r * part + i], value(r, i));
  dsm::process_barrier();
}

// The writer of a block changes every round (its home follows), while the
// others read the block's stable bytes in the same epochs.
TEST(Litmus, HomeMigrationWhileOthersRead) {
  space();
  auto* words = static_cast<std::uint64_t*>(dsm::allocate(block(), block()));
  constexpr std::size_t stable = 16;
  if (rank() == 0)
    for (std::size_t i = 0; i < stable; ++i) words[i] = value(1000, i);
  dsm::process_barrier();
  const std::size_t n = block() / sizeof(std::uint64_t);
  for (std::uint32_t round = 0; round < 3 * procs(); ++round) {
    const std::uint32_t writer = round % procs();
    for (int pass = 0; pass < 3; ++pass) {
      if (rank() == writer)
        for (std::size_t i = stable; i < n; ++i) words[i] = value(round * 3 + pass, i);
      else
        for (std::size_t i = 0; i < stable; ++i) ASSERT_EQ(words[i], value(1000, i));
      if (rank() == writer) dsm::release();  // migrates the home here mid-epoch
    }
    dsm::process_barrier();
    for (std::size_t i = stable; i < n; ++i) ASSERT_EQ(words[i], value(round * 3 + 2, i)) << "round " << round;
    dsm::process_barrier();
  }
  const auto migrations = gather(dsm::counters().migrations);
  std::uint64_t total = 0;
  for (auto m : migrations) total += m;
  if (space().config().home == dsm::HomePolicy::floating && procs() > 1) EXPECT_GT(total, 0u);
  if (space().config().home == dsm::HomePolicy::fixed) EXPECT_EQ(total, 0u);  // homes never move
}

// With signatures too small for the writes (RDMX_DSM_NOTICES < 3), acquirers
// fall back to logical leases: a leased copy of a block nobody wrote stays
// cached, while every written block is still seen.
TEST(Litmus, LeasesKeepBlocksNobodyWrote) {
  space();
  const std::size_t words = block() / sizeof(std::uint64_t);
  // `kept` after `written` and out of read-ahead's reach: a sequential read
  // miss fetches the following blocks too, which must fetch neither `kept`
  // (it would not fault where the test expects it to) nor, from `kept`,
  // `written` (a lease there would push the writer's clock past `kept`'s).
  auto* written = static_cast<std::uint64_t*>(dsm::allocate(4 * block(), block()));
  dsm::allocate((space().config().read_ahead + 4) * block(), block());
  auto* kept = static_cast<std::uint64_t*>(dsm::allocate(block(), block()));
  // Nobody writes `kept`: every process fetches it by owner lookup, with a
  // lease (a copy that came by fast read has none).
  ASSERT_EQ(kept[0], 0u);
  dsm::process_barrier();
  const dsm::Counters before = dsm::counters();
  if (rank() == procs() - 1)
    for (std::size_t b = 0; b < 4; ++b) written[b * words] = value(5, b);
  dsm::process_barrier();
  for (std::size_t b = 0; b < 4; ++b) ASSERT_EQ(written[b * words], value(5, b)) << "block " << b;
  const dsm::Counters middle = dsm::counters();
  ASSERT_EQ(kept[0], 0u);
  const dsm::Counters after = dsm::counters();
  const bool small = space().config().notices < 3 && procs() > 1 && rank() != procs() - 1;
  if (small) EXPECT_GT(after.overflows, before.overflows) << dsm::to_string(after);
  // Still cached: no second fault (without leases, an overflow drops it).
  if (space().config().lease > 0)
    EXPECT_EQ(after.read_faults, middle.read_faults) << dsm::to_string(after);
  else if (small)
    EXPECT_GT(after.read_faults, middle.read_faults) << dsm::to_string(after);
  dsm::process_barrier();
}

// Blocks read in order: the miss on the block after the thread's previous
// miss fetches the following uncached blocks too, so a run of them faults
// once per Config::read_ahead + 1 blocks, and every value is the written
// one. Read-ahead stops at a block already cached.
TEST(Litmus, SequentialReadsFetchAhead) {
  space();
  const std::uint32_t ahead = space().config().read_ahead;
  if (ahead == 0) GTEST_SKIP() << "RDMX_DSM_READ_AHEAD=0";
  const std::size_t words = block() / sizeof(std::uint64_t), n = 4 * (ahead + 1) + 2;
  auto* data = static_cast<std::uint64_t*>(dsm::allocate(n * block(), block()));
  if (rank() == procs() - 1)
    for (std::size_t b = 0; b < n; ++b) data[b * words] = value(7, b);
  dsm::process_barrier();
  if (rank() == 0) {
    const std::size_t cached = 2 * (ahead + 1) + 1;  // fetched alone first: read-ahead must stop before it
    ASSERT_EQ(data[cached * words], value(7, cached));
    const dsm::Counters before = dsm::counters();
    for (std::size_t b = 0; b < n; ++b) ASSERT_EQ(data[b * words], value(7, b)) << "block " << b;
    const dsm::Counters after = dsm::counters();
    const std::uint64_t faults = after.read_faults - before.read_faults;
    const std::uint64_t fetched_ahead = after.read_ahead - before.read_ahead;
    // Every block but `cached` once, and past the end what the last run fetched ahead.
    EXPECT_GE(faults + fetched_ahead, n - 1) << dsm::to_string(after);
    EXPECT_LE(faults + fetched_ahead, n - 1 + ahead) << dsm::to_string(after);
    EXPECT_LE(faults, 2 + (n - 1 + ahead) / (ahead + 1)) << dsm::to_string(after);
    EXPECT_GT(fetched_ahead, 0u) << dsm::to_string(after);
  }
  dsm::process_barrier();
}

// Blocks written in order: the write fault on the block after the thread's
// previous one makes the following blocks writable too, so a run of them
// faults about once per Config::write_ahead + 1 blocks once the run has
// ramped up, stopping at a block already dirty. A block made writable ahead and left unwritten is not
// merged: another process's write to it is what everyone reads.
TEST(Litmus, SequentialWritesMakeBlocksWritableAhead) {
  space();
  const std::uint32_t ahead = space().config().write_ahead;
  if (ahead == 0) GTEST_SKIP() << "RDMX_DSM_WRITE_AHEAD=0";
  const std::size_t words = block() / sizeof(std::uint64_t), n = 4 * (ahead + 1) + 2;
  // A spacer first: an earlier test's write-ahead past its own blocks must
  // not reach these (with RDMX_DSM_KEEP > 1 they would still be writable).
  // Then `n` blocks written in order, and `ahead` that write-ahead may take past them.
  dsm::allocate(ahead * block(), block());
  auto* data = static_cast<std::uint64_t*>(dsm::allocate((n + ahead) * block(), block()));
  const std::uint32_t writer = procs() - 1;
  dsm::process_barrier();
  if (rank() == writer) {
    const std::size_t dirty = ahead + 4;  // inside the second run: written alone first
    data[dirty * words] = value(9, dirty);
    const dsm::Counters before = dsm::counters();
    for (std::size_t b = 0; b < n; ++b) data[b * words] = value(9, b);
    const dsm::Counters after = dsm::counters();
    const std::uint64_t faults = after.write_faults - before.write_faults;
    const std::uint64_t made_ahead = after.write_ahead - before.write_ahead;
    // Every block but `dirty` once, and past the end what the last run took.
    EXPECT_GE(faults + made_ahead, n - 1) << dsm::to_string(after);
    EXPECT_LE(faults + made_ahead, n - 1 + ahead) << dsm::to_string(after);
    // Each run ramps up (1, 2, 4, ... blocks ahead); the dirty block breaks it once.
    EXPECT_LE(faults, 2 * (2 + std::bit_width(ahead)) + n / (ahead + 1)) << dsm::to_string(after);
    EXPECT_GT(made_ahead, 0u) << dsm::to_string(after);
  }
  dsm::process_barrier();
  // Past the end: left unwritten by the writer, written by another process.
  const std::uint32_t other = procs() > 1 ? 0 : writer;
  if (rank() == other)
    for (std::size_t b = n; b < n + ahead; ++b) data[b * words] = value(10, b);
  dsm::process_barrier();
  for (std::size_t b = 0; b < n; ++b) ASSERT_EQ(data[b * words], value(9, b)) << "block " << b;
  for (std::size_t b = n; b < n + ahead; ++b) ASSERT_EQ(data[b * words], value(10, b)) << "block " << b;
  dsm::process_barrier();
}

// A block one process writes in every interval: the fast release (floating
// home) merges it at each barrier but keeps it writable, so it takes one
// write fault in all, not one per interval, and no write of any interval is
// lost (every process checks every value after each barrier).
TEST(Litmus, BlockWrittenEveryIntervalKeepsEveryWrite) {
  space();
  const std::size_t words = block() / sizeof(std::uint64_t);
  auto* data = static_cast<std::uint64_t*>(dsm::allocate(block(), block()));
  constexpr std::size_t rounds = 24;
  ASSERT_LE(rounds + 1, words);
  dsm::process_barrier();
  const dsm::Counters before = dsm::counters();
  // One barrier a round: the readers' reads of words 0 .. round and the
  // writer's next write (word round + 1) are different bytes, no race.
  for (std::size_t round = 0; round < rounds; ++round) {
    if (rank() == 0) data[round] = value(round, round);
    dsm::process_barrier();
    for (std::size_t r = 0; r <= round; ++r) ASSERT_EQ(data[r], value(r, r)) << "round " << round << " word " << r;
  }
  dsm::process_barrier();
  const dsm::Counters after = dsm::counters();
  if (rank() == 0 && procs() > 1 && space().config().home == dsm::HomePolicy::floating &&
      space().config().keep >= 1) {
    EXPECT_LE(after.write_faults - before.write_faults, 2u) << dsm::to_string(after);
    EXPECT_GE(after.fast_releases - before.fast_releases, rounds) << dsm::to_string(after);
  }
  if (space().config().home == dsm::HomePolicy::fixed || space().config().keep == 0) {
    EXPECT_EQ(after.fast_releases, 0u);
    if (rank() == 0 && procs() > 1) EXPECT_EQ(after.write_faults - before.write_faults, rounds);
  }
  dsm::process_barrier();
}

// Every process writes one block in turn under a mutex (a read-modify-write
// of a shared count and a word of its own) and, between barriers, one
// process per round writes it alone: a block kept writable by one releaser
// is invalidated by the next one's notice, merged first, and nothing is lost.
TEST(Litmus, BlockKeptWritableWrittenInTurn) {
  space();
  const std::size_t words = block() / sizeof(std::uint64_t);
  auto* data = static_cast<std::uint64_t*>(dsm::allocate(block(), block()));
  constexpr std::size_t rounds = 12;
  const std::size_t solo = 1 + procs();  // data[solo + round]: the round's lone writer
  ASSERT_LE(solo + rounds, words);
  dsm::process_barrier();
  dsm::Mutex m(5);
  for (std::size_t round = 0; round < rounds; ++round) {
    for (int twice = 0; twice < 2; ++twice) {
      m.lock();
      data[0] += 1;
      data[1 + rank()] = round * 2 + twice + 1;
      m.unlock();
    }
    if (round % procs() == rank()) data[solo + round] = value(round, rank());
    dsm::process_barrier();
    ASSERT_EQ(data[0], (round + 1) * 2 * procs()) << "round " << round;
    for (std::uint32_t p = 0; p < procs(); ++p) ASSERT_EQ(data[1 + p], round * 2 + 2) << "round " << round << " process " << p;
    for (std::size_t r = 0; r <= round; ++r)
      ASSERT_EQ(data[solo + r], value(r, r % procs())) << "round " << round << " word " << solo + r;
    dsm::process_barrier();
  }
}

// A random data-race-free program: every round, each word is written by at
// most one process (chosen by a seeded generator every process shares) and
// words nobody writes are read; after each barrier every process checks
// the whole array against the same program replayed sequentially.
TEST(Litmus, RandomizedDrfStressMatchesSequentialReplay) {
  space();
  const std::size_t n = 6 * block() / sizeof(std::uint64_t) + 13;
  auto* data = dsm::allocate_array<std::uint64_t>(n);
  std::vector<std::uint64_t> replay(n, 0);
  std::mt19937_64 shared(12345);
  std::mt19937_64 local(777 + rank());
  dsm::process_barrier();
  for (int round = 0; round < 12; ++round) {
    std::vector<std::int32_t> writer(n, -1);
    const std::uint64_t density = shared() % 4;  // 0: few writes ... 3: many
    for (std::size_t i = 0; i < n; ++i)
      if (shared() % 8 <= density) writer[i] = static_cast<std::int32_t>(shared() % procs());
    for (std::size_t k = 0; k < n; ++k) {
      const std::size_t i = local() % n;
      if (writer[i] == static_cast<std::int32_t>(rank())) data[i] = value(round, i) + rank();
      if (writer[i] < 0) ASSERT_EQ(data[i], replay[i]) << "round " << round << " word " << i;
    }
    for (std::size_t i = 0; i < n; ++i)
      if (writer[i] == static_cast<std::int32_t>(rank())) data[i] = value(round, i) + rank();
    for (std::size_t i = 0; i < n; ++i)
      if (writer[i] >= 0) replay[i] = value(round, i) + static_cast<std::uint64_t>(writer[i]);
    dsm::process_barrier();
    for (std::size_t i = 0; i < n; ++i)
      ASSERT_EQ(data[i], replay[i]) << "round " << round << " word " << i << " (block "
                                    << (reinterpret_cast<std::byte*>(data + i) - space().heap().data()) / block()
                                    << ") written by " << writer[i] << " on process " << rank() << "; "
                                    << dsm::to_string(dsm::counters()) << "; holds " << origin(data[i], i);
    dsm::process_barrier();  // the next round's writes must not race with these reads
  }
  dsm::process_barrier();
}

// Several threads per process share the cache: they fault on the same
// blocks at once and write disjoint words of shared blocks.
TEST(Litmus, ThreadsShareTheCache) {
  space();
  const std::uint32_t threads = job().threads_per_process();
  const std::size_t n = 4 * block() / sizeof(std::uint64_t);
  auto* data = dsm::allocate_array<std::uint64_t>(n);
  dsm::process_barrier();
  const std::uint64_t writers = std::uint64_t{procs()} * threads;
  std::atomic<int> failures{0};
  job().run([&](ThreadId me) {
    const std::uint64_t id = std::uint64_t{me.process} * threads + me.thread;
    for (int round = 0; round < 3; ++round) {
      for (std::size_t i = id; i < n; i += writers) data[i] = value(round, i);
      dsm::barrier();
      for (std::size_t i = 0; i < n; ++i)
        if (data[i] != value(round, i)) failures.fetch_add(1);
      dsm::barrier();
    }
  });
  EXPECT_EQ(failures.load(), 0);
  dsm::process_barrier();
}

// Inside Job::run dsm::process_barrier belongs to worker thread 0 (peers send it
// their signatures there); another thread gets a clear error at once.
TEST(Litmus, ThreadsBarrierOnlyFromThreadZero) {
  space();
  std::atomic<int> refused{0}, other{0};
  job().run([&](ThreadId me) {
    if (me.thread == 0) return;
    try {
      dsm::process_barrier();
      other.fetch_add(1);
    } catch (const Error& e) {
      if (e.code() == Errc::invalid_argument && std::string(e.what()).find("worker thread 0") != std::string::npos)
        refused.fetch_add(1);
      else
        other.fetch_add(1);
    }
  });
  EXPECT_EQ(refused.load(), static_cast<int>(job().threads_per_process()) - 1);
  EXPECT_EQ(other.load(), 0);
  dsm::process_barrier();
}

// Threads of several processes take one mutex in turn: every increment counts.
TEST(Litmus, ThreadsCountUnderAMutex) {
  space();
  auto* counter = static_cast<std::uint64_t*>(dsm::allocate(block(), block()));
  dsm::process_barrier();
  constexpr int rounds = 10;
  job().run([&](ThreadId) {
    dsm::Mutex m(4);
    for (int i = 0; i < rounds; ++i) {
      m.lock();
      *counter += 1;
      m.unlock();
    }
    dsm::barrier();
  });
  dsm::process_barrier();
  EXPECT_EQ(*counter, std::uint64_t{rounds} * procs() * job().threads_per_process());
  dsm::process_barrier();
}

// Worker threads keep writing one block (each its own words, every process
// its own) while thread 0 of each process releases again and again: a fast
// release merges the block while it is being written, and a write that lands
// during the merge must still be published by a later release.
TEST(Litmus, ThreadsWriteWhileAnotherReleases) {
  space();
  const std::uint32_t threads = job().threads_per_process();
  if (threads < 2) GTEST_SKIP() << "needs --rdmx-threads of 2 or more";
  const std::size_t words = block() / sizeof(std::uint64_t);
  auto* data = static_cast<std::uint64_t*>(dsm::allocate(block(), block()));
  const std::size_t writers = std::size_t{procs()} * (threads - 1);
  const std::size_t per = words / writers;  // words per writer thread, interleaved
  ASSERT_GE(per, 1u);
  constexpr std::uint64_t passes = 300;
  dsm::process_barrier();
  std::atomic<std::uint32_t> done{0};
  std::atomic<int> failures{0};
  job().run([&](ThreadId me) {
    if (me.thread == 0) {
      while (done.load() < threads - 1) dsm::release();
    } else {
      const std::size_t id = std::size_t{me.process} * (threads - 1) + (me.thread - 1);
      for (std::uint64_t pass = 1; pass <= passes; ++pass)
        for (std::size_t k = 0; k < per; ++k) data[k * writers + id] = pass * 1000003 + id;
      done.fetch_add(1);
    }
    dsm::barrier();
    for (std::size_t i = 0; i < per * writers; ++i)
      if (data[i] != passes * 1000003 + i % writers) failures.fetch_add(1);
    dsm::barrier();
  });
  EXPECT_EQ(failures.load(), 0);
  dsm::process_barrier();
}
