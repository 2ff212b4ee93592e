#include "rdmx/memory/region_table.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "rdmx/core/error.hpp"
#include "rdmx/transfer/memory_region.hpp"
#include "support.hpp"

namespace rdmx::memory {
namespace {

using testing::context;

TEST(RegionTable, AddGetFindRemove) {
  RegionTable table(8);
  std::vector<std::byte> a(8192), b(4096);
  transfer::MemoryRegion ra(context(), a.data(), a.size());
  transfer::MemoryRegion rb(context(), b.data(), b.size());
  const std::uint32_t ia = table.add(ra);
  const std::uint32_t ib = table.add(rb);
  EXPECT_NE(ia, RegionTable::no_region);
  EXPECT_NE(ia, ib);
  EXPECT_EQ(table.get(ia), &ra);
  EXPECT_EQ(table.get(ib), &rb);
  EXPECT_EQ(table.get(RegionTable::no_region), nullptr);  // a zeroed locator names nothing
  EXPECT_EQ(table.get(7), nullptr);                       // never added
  EXPECT_EQ(table.get(100000), nullptr);                  // beyond capacity

  auto in_a = table.find(a.data() + 100, 50);
  ASSERT_TRUE(in_a);
  EXPECT_EQ(*in_a, (RegionTable::Location{ia, 100}));
  auto all_b = table.find(b.data(), b.size());
  ASSERT_TRUE(all_b);
  EXPECT_EQ(*all_b, (RegionTable::Location{ib, 0}));
  EXPECT_FALSE(table.find(b.data() + 4000, 200));  // runs past the end of b
  int local = 0;
  EXPECT_FALSE(table.find(&local, sizeof local));

  table.remove(ia);
  EXPECT_EQ(table.get(ia), nullptr);
  EXPECT_FALSE(table.find(a.data(), 1));
  EXPECT_TRUE(table.find(b.data(), 1));
  // Indices are never reused: a stale locator cannot meet new memory.
  const std::uint32_t again = table.add(ra);
  EXPECT_GT(again, ib);
  table.remove(12345);  // unknown: ignored
}

TEST(RegionTable, FullTableIsOutOfMemory) {
  RegionTable table(4);  // index 0 is reserved: 3 usable
  std::vector<std::byte> memory(4096);
  transfer::MemoryRegion region(context(), memory.data(), memory.size());
  for (int i = 0; i < 3; ++i) table.add(region);
  try {
    table.add(region);
    FAIL() << "a full table accepted a region";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::out_of_memory);
    EXPECT_NE(std::string(e.what()).find("region table full"), std::string::npos) << e.what();
  }
}

TEST(RegionTable, ConcurrentAddsGetDistinctIndices) {
  RegionTable table(1 + 4 * 16);
  std::vector<std::byte> memory(4096);
  transfer::MemoryRegion region(context(), memory.data(), memory.size());
  std::mutex mutex;
  std::vector<std::uint32_t> indices;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 16; ++i) {
        const std::uint32_t index = table.add(region);
        // A reader must see the region as soon as add() returns.
        EXPECT_EQ(table.get(index), &region);
        std::lock_guard lock(mutex);
        indices.push_back(index);
      }
    });
  }
  for (auto& t : threads) t.join();
  std::set<std::uint32_t> distinct(indices.begin(), indices.end());
  EXPECT_EQ(distinct.size(), 64u);
  EXPECT_EQ(distinct.count(RegionTable::no_region), 0u);
}

TEST(RegionTable, ProcessTableIsOneObject) { EXPECT_EQ(&RegionTable::process(), &RegionTable::process()); }

}  // namespace
}  // namespace rdmx::memory
