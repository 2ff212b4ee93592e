#include "rdmx/memory/general_allocator.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "rdmx/core/error.hpp"
#include "rdmx/memory/region_table.hpp"
#include "support.hpp"

namespace rdmx::memory {
namespace {

using testing::context;
using testing::KiB;
using testing::MiB;

class General : public ::testing::Test {
 protected:
  Arena arena{context(), testing::small_arena(1 * MiB, 4 * MiB)};
};

Errc code_of(auto&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.code();
  }
  ADD_FAILURE() << "no rdmx::Error thrown";
  return Errc::transport;
}

// Holes of 1024, 512 and 2048 bytes, in that address order, each followed by
// a small block that keeps them apart.
struct Holes {
  Block a, b, c;
  explicit Holes(GeneralAllocator& g) {
    a = g.allocate(1024);
    g.allocate(64);
    b = g.allocate(512);
    g.allocate(64);
    c = g.allocate(2048);
    g.allocate(64);
    g.deallocate(a);
    g.deallocate(b);
    g.deallocate(c);
  }
};

// round_up(n, 16) used to wrap to 0 near SIZE_MAX: a block of nothing for a huge request.
TEST_F(General, HugeRequestsAreOutOfMemory) {
  GeneralAllocator g(arena);
  for (std::size_t n : {SIZE_MAX, SIZE_MAX - 15, SIZE_MAX - 63, std::size_t{1} << 62})
    EXPECT_EQ(code_of([&] { g.allocate(n); }), Errc::out_of_memory) << n;
  EXPECT_EQ(code_of([&] { g.allocate(0); }), Errc::invalid_argument);
  Block b = g.allocate(100);
  EXPECT_EQ(b.size, 100u);
}

TEST_F(General, BestFitPicksTheTightestHole) {
  GeneralAllocator g(arena, {.policy = FitPolicy::best_fit, .chunk_size = 64 * KiB});
  Holes holes(g);
  EXPECT_EQ(g.allocate(500).data, holes.b.data);
  EXPECT_EQ(g.allocate(1000).data, holes.a.data);
  EXPECT_EQ(g.allocate(1500).data, holes.c.data);
  EXPECT_EQ(g.chunk_count(), 1u);
}

TEST_F(General, FirstFitPicksTheFirstHole) {
  GeneralAllocator g(arena, {.policy = FitPolicy::first_fit, .chunk_size = 64 * KiB});
  Holes holes(g);
  EXPECT_EQ(g.allocate(500).data, holes.a.data);
  // 600 no longer fits in what is left of a (512 bytes) nor in b (512): the first that fits is c.
  EXPECT_EQ(g.allocate(600).data, holes.c.data);
  EXPECT_EQ(g.chunk_count(), 1u);
}

TEST_F(General, CoalescingLetsALargeBlockFit) {
  GeneralAllocator g(arena, {.policy = FitPolicy::best_fit, .chunk_size = 64 * KiB});
  Block q[4];
  for (auto& block : q) block = g.allocate(16 * KiB);  // fills the chunk exactly
  EXPECT_EQ(g.chunk_count(), 1u);
  g.deallocate(q[1]);
  g.deallocate(q[2]);
  Block middle = g.allocate(32 * KiB);  // only fits if q[1] and q[2] merged
  EXPECT_EQ(middle.data, q[1].data);
  EXPECT_EQ(g.chunk_count(), 1u);
  g.deallocate(q[3]);
  g.deallocate(q[0]);
  g.deallocate(middle);  // merges with both neighbours
  Block whole = g.allocate(64 * KiB);
  EXPECT_EQ(whole.data, q[0].data);
  EXPECT_EQ(g.chunk_count(), 1u);
}

TEST_F(General, HonoursAlignment) {
  GeneralAllocator g(arena, {.policy = FitPolicy::first_fit, .chunk_size = 256 * KiB});
  for (std::size_t align = 16; align <= 8192; align *= 2) {
    g.allocate(24);  // knock the next block off any lucky boundary
    Block b = g.allocate(33, align);
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(b.data) % align, 0u) << align;
    EXPECT_EQ(b.size, 33u);
    std::memset(b.data, 0x5a, b.size);
  }
  EXPECT_EQ(code_of([&] { g.allocate(8, 24); }), Errc::invalid_argument);
  EXPECT_EQ(code_of([&] { g.allocate(0); }), Errc::invalid_argument);
}

TEST_F(General, BlocksAreNamedRegisteredMemory) {
  GeneralAllocator g(arena);
  Block b = g.allocate(3000);
  auto where = RegionTable::process().find(b.data, b.size);
  ASSERT_TRUE(where);
  EXPECT_EQ(where->region, b.region);
  EXPECT_EQ(where->offset, b.offset);
}

TEST_F(General, DoubleFreeAndForeignPointersAreInvalidArgument) {
  GeneralAllocator g(arena);
  Block b = g.allocate(100);
  Block keep = g.allocate(100);
  g.deallocate(b);
  EXPECT_EQ(code_of([&] { g.deallocate(b); }), Errc::invalid_argument);
  EXPECT_EQ(code_of([&] { g.deallocate(b.data); }), Errc::invalid_argument);
  EXPECT_EQ(code_of([&] { g.deallocate(keep.data + 16); }), Errc::invalid_argument);  // inside a block
  int local = 0;
  EXPECT_EQ(code_of([&] { g.deallocate(&local); }), Errc::invalid_argument);
  g.deallocate(keep.data);  // by pointer
  EXPECT_EQ(g.used_bytes(), 0u);
}

TEST_F(General, OversizeRequestGetsItsOwnChunkBackOnFree) {
  GeneralAllocator g(arena, {.policy = FitPolicy::best_fit, .chunk_size = 64 * KiB});
  g.allocate(100);
  const std::size_t arena_used = arena.used_bytes();
  Block big = g.allocate(200 * KiB);
  EXPECT_EQ(g.chunk_count(), 2u);
  std::memset(big.data, 1, big.size);
  g.deallocate(big);
  EXPECT_EQ(g.chunk_count(), 1u);
  EXPECT_EQ(arena.used_bytes(), arena_used);
  EXPECT_EQ(code_of([&] { g.allocate(8 * MiB); }), Errc::out_of_memory);  // beyond a segment
}

TEST_F(General, ConcurrentStressKeepsBlocksDisjoint) {
  GeneralAllocator g(arena, {.policy = FitPolicy::best_fit, .chunk_size = 256 * KiB});
  std::atomic<int> corrupted{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(1234 + t);
      struct Live {
        Block block;
        unsigned char pattern;
      };
      std::vector<Live> live;
      auto check_and_free = [&](std::size_t i) {
        const Live item = live[i];
        for (std::size_t k = 0; k < item.block.size; ++k) {
          if (static_cast<unsigned char>(item.block.data[k]) != item.pattern) {
            corrupted.fetch_add(1);
            break;
          }
        }
        g.deallocate(item.block);
        live[i] = live.back();
        live.pop_back();
      };
      for (int i = 0; i < 3000; ++i) {
        if (live.empty() || (live.size() < 32 && rng() % 2 == 0)) {
          const std::size_t size = 1 + rng() % 4096;
          const std::size_t align = std::size_t{16} << (rng() % 5);
          Block b = g.allocate(size, align);
          if (reinterpret_cast<std::uintptr_t>(b.data) % align != 0) corrupted.fetch_add(1);
          const auto pattern = static_cast<unsigned char>(t * 61 + i);
          std::memset(b.data, pattern, b.size);
          live.push_back({b, pattern});
        } else {
          check_and_free(rng() % live.size());
        }
      }
      while (!live.empty()) check_and_free(live.size() - 1);
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(corrupted.load(), 0);
  EXPECT_EQ(g.used_bytes(), 0u);
}

}  // namespace
}  // namespace rdmx::memory
