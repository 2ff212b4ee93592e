#include "rdmx/memory/arena.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

#include "rdmx/core/error.hpp"
#include "rdmx/memory/region_table.hpp"
#include "rdmx/transfer/memory_region.hpp"
#include "../error_from.hpp"
#include "support.hpp"

namespace rdmx::memory {
namespace {

using testing::context;
using testing::KiB;
using testing::MiB;
using testing::small_arena;

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

using rdmx::testing::error_from;

TEST(Arena, ChunksAreRegisteredAndWritable) {
  Arena arena(context(), small_arena());
  Block b = arena.allocate_chunk(1000);
  ASSERT_NE(b.data, nullptr);
  EXPECT_EQ(b.size, 1024u);  // rounded to cache lines
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(b.data) % 64, 0u);

  auto where = RegionTable::process().find(b.data, b.size);
  ASSERT_TRUE(where);
  EXPECT_EQ(where->region, b.region);
  EXPECT_EQ(where->offset, b.offset);
  const transfer::MemoryRegion* region = RegionTable::process().get(b.region);
  ASSERT_NE(region, nullptr);
  EXPECT_EQ(region->data() + b.offset, b.data);
  EXPECT_EQ(region->size(), arena.segment_size());  // the whole segment is registered once
  EXPECT_FALSE(region->packed_rkey().empty());

  std::memset(b.data, 0xab, b.size);
  EXPECT_EQ(b.data[b.size - 1], std::byte{0xab});

  Block c = arena.allocate_chunk(4096);
  EXPECT_EQ(c.region, b.region);  // same segment, same registration
  EXPECT_TRUE(c.data >= b.data + b.size || c.data + c.size <= b.data);
  EXPECT_EQ(arena.segment_count(), 1u);
  EXPECT_EQ(arena.used_bytes(), 1024u + 4096u);
}

TEST(Arena, MapsSegmentsLazily) {
  Arena arena(context(), small_arena());
  EXPECT_EQ(arena.segment_count(), 0u);
  EXPECT_EQ(arena.page_kind(), PageKind::unknown);
  EXPECT_TRUE(contains(arena.describe(), "nothing mapped")) << arena.describe();
}

TEST(Arena, ExhaustionNamesSizesAndVariable) {
  Arena arena(context(), small_arena(1 * MiB, 2 * MiB));
  arena.allocate_chunk(768 * KiB);
  arena.allocate_chunk(768 * KiB);  // second segment
  Error full = error_from([&] { arena.allocate_chunk(768 * KiB); });
  EXPECT_EQ(full.code(), Errc::out_of_memory);
  EXPECT_TRUE(contains(full.what(), "RDMX_ARENA_MAX")) << full.what();
  EXPECT_TRUE(contains(full.what(), "768 KiB")) << full.what();
  EXPECT_TRUE(contains(full.what(), "2 MiB")) << full.what();

  Error large = error_from([&] { arena.allocate_chunk(3 * MiB); });
  EXPECT_EQ(large.code(), Errc::out_of_memory);
  EXPECT_TRUE(contains(large.what(), "RDMX_ARENA_MAX")) << large.what();
  EXPECT_TRUE(contains(large.what(), "3 MiB")) << large.what();
  EXPECT_TRUE(contains(large.what(), "2 MiB")) << large.what();
}

// A registered buffer larger than a segment (a DSM heap, a far-memory
// region) must not need RDMX_ARENA_SEGMENT raised: it gets a segment of its
// own, counted against the maximum, and its room is reused once released.
TEST(Arena, ChunkLargerThanASegmentGetsASegmentOfItsOwn) {
  Arena arena(context(), small_arena(1 * MiB, 8 * MiB));
  Block small = arena.allocate_chunk(4 * KiB);
  Block large = arena.allocate_chunk(3 * MiB + 100);
  ASSERT_NE(large.data, nullptr);
  EXPECT_EQ(arena.segment_count(), 2u);
  EXPECT_GE(arena.mapped_bytes(), 1 * MiB + 3 * MiB + 100);
  EXPECT_NE(large.region, small.region);
  std::memset(large.data, 0x5a, large.size);  // all of it is mapped and writable
  EXPECT_TRUE(contains(arena.describe(), "1 large")) << arena.describe();
  const auto* registered = RegionTable::process().get(large.region);
  ASSERT_NE(registered, nullptr);
  EXPECT_TRUE(registered->contains(large.data, large.size));

  arena.release_chunk(large);
  Block again = arena.allocate_chunk(2 * MiB);  // fits the released room: nothing new mapped
  EXPECT_EQ(again.region, large.region);
  EXPECT_EQ(arena.segment_count(), 2u);
  Block other = arena.allocate_chunk(3 * MiB);  // the large segment is taken: another
  EXPECT_EQ(arena.segment_count(), 3u);
  Error full = error_from([&] { arena.allocate_chunk(3 * MiB); });  // 1 + 4 + 3 mapped, 3 more > 8
  EXPECT_EQ(full.code(), Errc::out_of_memory);
  EXPECT_TRUE(contains(full.what(), "RDMX_ARENA_MAX")) << full.what();
  arena.release_chunk(other);
  arena.release_chunk(again);
  arena.release_chunk(small);
  EXPECT_EQ(arena.used_bytes(), 0u);
}

TEST(Arena, BadNumaNodeIsInvalidArgument) {
  for (int node : {4095, -2}) {
    auto options = small_arena();
    options.numa_node = node;
    Error e = error_from([&] { Arena arena(context(), options); });
    EXPECT_EQ(e.code(), Errc::invalid_argument) << node;
    EXPECT_TRUE(contains(e.what(), "NUMA node")) << e.what();
  }
}

TEST(Arena, BindsToAnExistingNode) {
  auto options = small_arena();
  options.numa_node = 0;  // every machine has node 0
  Arena arena(context(), options);
  Block b = arena.allocate_chunk(64 * KiB);
  std::memset(b.data, 1, b.size);
  EXPECT_EQ(arena.numa_node(), 0);
  EXPECT_EQ(arena.describe().rfind("arena node 0:", 0), 0u) << arena.describe();
}

TEST(Arena, InconsistentSizesAreInvalidArgument) {
  EXPECT_EQ(error_from([] { Arena a(context(), small_arena(2 * MiB, 1 * MiB)); }).code(), Errc::invalid_argument);
  EXPECT_EQ(error_from([] { Arena a(context(), small_arena(0, 1 * MiB)); }).code(), Errc::invalid_argument);
}

TEST(Arena, ReleasedChunksAreReusedAndCoalesced) {
  Arena arena(context(), small_arena(1 * MiB, 1 * MiB));
  Block a = arena.allocate_chunk(64 * KiB);
  arena.release_chunk(a);
  Block b = arena.allocate_chunk(64 * KiB);
  EXPECT_EQ(b.data, a.data);
  arena.release_chunk(b);

  // Four quarters fill the only segment; once all are back, the whole
  // segment is one chunk again (neighbours coalesced), with no new segment.
  Block q[4];
  for (auto& chunk : q) chunk = arena.allocate_chunk(256 * KiB);
  EXPECT_EQ(arena.segment_count(), 1u);
  EXPECT_EQ(error_from([&] { arena.allocate_chunk(64); }).code(), Errc::out_of_memory);
  for (int i : {1, 3, 0, 2}) arena.release_chunk(q[i]);
  Block whole = arena.allocate_chunk(1 * MiB);
  EXPECT_EQ(whole.data, q[0].data);
  EXPECT_EQ(arena.segment_count(), 1u);
}

TEST(Arena, DoubleReleaseIsInvalidArgument) {
  Arena arena(context(), small_arena());
  Block a = arena.allocate_chunk(4 * KiB);
  arena.release_chunk(a);
  EXPECT_EQ(error_from([&] { arena.release_chunk(a); }).code(), Errc::invalid_argument);
  Block foreign{a.data, a.size, a.region + 1000, a.offset};
  EXPECT_EQ(error_from([&] { arena.release_chunk(foreign); }).code(), Errc::invalid_argument);
}

TEST(Arena, HonoursAlignment) {
  Arena arena(context(), small_arena());
  arena.allocate_chunk(64);  // so the next chunk does not start the segment by luck
  Block b = arena.allocate_chunk(100, 4096);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(b.data) % 4096, 0u);
  EXPECT_EQ(error_from([&] { arena.allocate_chunk(100, 3); }).code(), Errc::invalid_argument);
  EXPECT_EQ(error_from([&] { arena.allocate_chunk(0); }).code(), Errc::invalid_argument);
}

TEST(Arena, DescribeReportsWhatItGot) {
  Arena arena(context(), small_arena());
  arena.allocate_chunk(4 * KiB);
  const std::string text = arena.describe();
  EXPECT_TRUE(contains(text, "1 segment x 1 MiB")) << text;
  EXPECT_TRUE(contains(text, "ucx-allocated")) << text;
  EXPECT_TRUE(contains(text, "pages")) << text;
  EXPECT_EQ(arena.backing(), Backing::ucx);
  EXPECT_NE(arena.page_kind(), PageKind::unknown);
  EXPECT_EQ(arena.mapped_bytes(), 1 * MiB);
}

TEST(Arena, AutoBackingResolvesToARealOne) {
  auto options = small_arena(2 * MiB, 2 * MiB);
  options.backing = Backing::automatic;
  Arena arena(context(), options);
  Block b = arena.allocate_chunk(4 * KiB);
  std::memset(b.data, 7, b.size);
  EXPECT_NE(arena.backing(), Backing::automatic);
  EXPECT_TRUE(RegionTable::process().find(b.data, b.size));
  if (arena.backing() == Backing::hugetlb) {
    EXPECT_TRUE(arena.page_kind() == PageKind::huge_2m || arena.page_kind() == PageKind::huge_1g);
  }
  std::printf("auto: %s\n", arena.describe().c_str());
}

TEST(Arena, ThpBackingIsRegisteredAndReportsItsPages) {
  auto options = small_arena(4 * MiB, 4 * MiB);
  options.backing = Backing::thp;
  Arena arena(context(), options);
  Block b = arena.allocate_chunk(64 * KiB);
  std::memset(b.data, 3, b.size);
  EXPECT_TRUE(RegionTable::process().find(b.data, b.size));
  EXPECT_EQ(arena.backing(), Backing::thp);
  // Whether the kernel gave huge pages depends on its THP settings.
  const PageKind kind = arena.page_kind();
  EXPECT_TRUE(kind == PageKind::transparent || kind == PageKind::regular) << to_string(kind);
  EXPECT_TRUE(contains(arena.describe(), "MADV_HUGEPAGE")) << arena.describe();
  std::printf("thp: %s\n", arena.describe().c_str());
}

long long free_2m_pages() {
  std::ifstream in("/sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages");
  long long n = 0;
  in >> n;
  return n;
}

TEST(Arena, HugetlbWithoutPoolFailsWithAdvice) {
  if (free_2m_pages() > 0) GTEST_SKIP() << "this machine has a 2 MiB hugetlb pool";
  auto options = small_arena(2 * MiB, 2 * MiB);
  options.backing = Backing::hugetlb;
  Arena arena(context(), options);
  Error e = error_from([&] { arena.allocate_chunk(4 * KiB); });
  EXPECT_EQ(e.code(), Errc::out_of_memory);
  EXPECT_TRUE(contains(e.what(), "nr_hugepages")) << e.what();
}

TEST(Arena, DestroyedArenaLeavesTheRegionTable) {
  std::uint32_t index = 0;
  const std::byte* data = nullptr;
  {
    Arena arena(context(), small_arena());
    Block b = arena.allocate_chunk(4 * KiB);
    index = b.region;
    data = b.data;
    ASSERT_NE(RegionTable::process().get(index), nullptr);
  }
  EXPECT_EQ(RegionTable::process().get(index), nullptr);
  EXPECT_FALSE(RegionTable::process().find(data, 1));
}

// Restores the variables it touches, so other tests see the real environment.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old, had_ = true;
    ::setenv(name, value, 1);
  }
  ~ScopedEnv() {
    if (had_) {
      ::setenv(name_, old_.c_str(), 1);
    } else {
      ::unsetenv(name_);
    }
  }

 private:
  const char* name_;
  std::string old_;
  bool had_ = false;
};

// round_up(bytes, 64) used to wrap to 0 near SIZE_MAX and hand out a 0-byte chunk.
TEST(Arena, HugeChunkSizesAreOutOfMemoryNamingTheSize) {
  Arena arena(context(), small_arena());
  for (std::size_t bytes : {SIZE_MAX, SIZE_MAX - 63, SIZE_MAX - 10, std::size_t{1} << 62}) {
    Error e = error_from([&] { arena.allocate_chunk(bytes); });
    EXPECT_EQ(e.code(), Errc::out_of_memory) << bytes;
    EXPECT_TRUE(contains(e.what(), std::to_string(bytes))) << e.what();
  }
  EXPECT_EQ(arena.used_bytes(), 0u);
  EXPECT_EQ(error_from([&] { arena.allocate_chunk(0); }).code(), Errc::invalid_argument);
  Block b = arena.allocate_chunk(64);  // still serves ordinary requests
  EXPECT_EQ(b.size, 64u);
}

TEST(Arena, SegmentSizeNearTheTopIsInvalidArgument) {
  for (std::size_t segment : {SIZE_MAX, SIZE_MAX - 10}) {
    Error e = error_from([&] { Arena arena(context(), small_arena(segment, SIZE_MAX)); });
    EXPECT_EQ(e.code(), Errc::invalid_argument);
    EXPECT_TRUE(contains(e.what(), "RDMX_ARENA_SEGMENT")) << e.what();
  }
}

TEST(ArenaOptions, DefaultsComeFromTheEnvironment) {
  {
    ScopedEnv segment("RDMX_ARENA_SEGMENT", "2M");
    ScopedEnv max("RDMX_ARENA_MAX", "8M");
    ScopedEnv backing("RDMX_ARENA_BACKING", "thp");
    Arena::Options options;
    EXPECT_EQ(options.segment_size, 2 * MiB);
    EXPECT_EQ(options.max_size, 8 * MiB);
    EXPECT_EQ(options.backing, Backing::thp);
    EXPECT_EQ(options.numa_node, -1);
  }
  {
    ScopedEnv backing("RDMX_ARENA_BACKING", "bogus");
    Error e = error_from([] { Arena::Options options; });
    EXPECT_EQ(e.code(), Errc::invalid_argument);
    EXPECT_TRUE(contains(e.what(), "RDMX_ARENA_BACKING")) << e.what();
  }
  if (!std::getenv("RDMX_ARENA_SEGMENT")) {
    Arena::Options options;
    EXPECT_EQ(options.segment_size, 64 * MiB);
  }
}

}  // namespace
}  // namespace rdmx::memory
