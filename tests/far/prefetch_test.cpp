// far::Array's prefetcher and dereference futures, in one process over the
// in-process device, with caches far smaller than the data.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "../error_from.hpp"
#include "array_scans.hpp"
#include "rdmx/far/pointer.hpp"
#include "rdmx/far/prefetcher.hpp"

using namespace rdmx;
using namespace rdmx::far;
using scans::Elements;

namespace {
Config cache_of(std::size_t cache, std::size_t prefetch_depth = 16) {
  Config c;
  c.cache_bytes = cache;
  c.region_bytes = 16 << 20;
  c.prefetch_depth = prefetch_depth;
  return c;
}
constexpr std::size_t elements = 512 * 1024;  // 4 MiB, 1024 chunks: 8 times a 512 KiB cache
Errc error_of(auto&& f) { return rdmx::testing::error_from(f).code(); }
}  // namespace

TEST(FarPrefetch, PatternDetectsStridesAndNothingElse) {
  far::detail::AccessPattern p;
  std::size_t ahead[far::detail::AccessPattern::max_depth];
  bool hit = false;
  EXPECT_EQ(p.access(10, 100, 4, ahead, hit), 0u);
  EXPECT_EQ(p.access(13, 100, 4, ahead, hit), 0u);  // one stride seen: not yet
  ASSERT_EQ(p.access(16, 100, 4, ahead, hit), 4u);  // the same stride twice
  EXPECT_EQ(ahead[0], 19u);
  EXPECT_EQ(ahead[3], 28u);
  for (std::size_t k = 0; k < 4; ++k) p.fetched(ahead[k]);
  EXPECT_EQ(p.access(16, 100, 4, ahead, hit), 0u);  // the same chunk again
  EXPECT_EQ(p.access(19, 100, 4, ahead, hit), 0u);  // 3 still ahead: more than half
  EXPECT_TRUE(hit);
  ASSERT_EQ(p.access(22, 100, 4, ahead, hit), 2u);  // topped up to 4 ahead
  EXPECT_TRUE(hit);
  EXPECT_EQ(ahead[0], 31u);
  EXPECT_EQ(ahead[1], 34u);
  // The stride breaks: nothing until a new one repeats, and what was
  // fetched along the old one is no longer a hit.
  EXPECT_EQ(p.access(50, 100, 4, ahead, hit), 0u);
  EXPECT_EQ(p.access(25, 100, 4, ahead, hit), 0u);
  EXPECT_FALSE(hit);
  // Backwards, and bounded by the array's ends.
  EXPECT_EQ(p.access(4, 100, 4, ahead, hit), 0u);
  ASSERT_EQ(p.access(2, 100, 4, ahead, hit), 0u);  // stride -2 once (25 -> 4 was -21)
  ASSERT_EQ(p.access(0, 100, 4, ahead, hit), 0u);  // stride -2 twice, but nothing below 0
  far::detail::AccessPattern q;
  q.access(9, 100, 8, ahead, hit);
  q.access(8, 100, 8, ahead, hit);
  ASSERT_EQ(q.access(7, 100, 8, ahead, hit), 7u);  // 6 ... 0
  EXPECT_EQ(ahead[6], 0u);
}

// Sequential, strided and backward scans through at(), with eviction
// running (the cache an eighth of the array, the evacuator on): every value
// is the shadow's, and most chunks were fetched ahead of their use.
TEST(FarPrefetch, StridedScansHitWhatWasFetchedAhead) {
  Manager manager(make_local_device(2, 16 << 20), cache_of(512 * 1024));
  Elements a(elements);
  std::vector<std::uint64_t> shadow;
  scans::fill(a, shadow);
  struct Case {
    std::size_t first;
    std::int64_t stride;
  };
  const std::size_t chunks = elements / scans::per_chunk;
  for (const Case& c : {Case{0, 1}, Case{1, 3}, Case{chunks - 1, -1}, Case{chunks - 2, -3}, Case{5, 7}}) {
    const Stats before = manager.stats();
    const std::size_t visited = scans::strided_scan(a, shadow, c.first, c.stride, 17);
    const Stats after = manager.stats();
    const auto hits = after.prefetch_hits - before.prefetch_hits;
    // All but the first few chunks (before the stride repeats) come ahead.
    EXPECT_GE(hits, visited * 3 / 4) << "stride " << c.stride << ": " << hits << " hits over " << visited << " chunks";
    EXPECT_LE(hits, after.prefetched - before.prefetched);
    EXPECT_LE(after.peak_resident_bytes, after.cache_bytes);
  }
  EXPECT_GT(manager.stats().evictions, chunks);
  scans::check_all(a, shadow);
}

TEST(FarPrefetch, OffFetchesNothingAhead) {
  {
    Manager manager(make_local_device(2, 16 << 20), cache_of(512 * 1024, 0));  // Config::prefetch_depth 0
    Elements a(elements);
    std::vector<std::uint64_t> shadow;
    scans::fill(a, shadow);
    scans::strided_scan(a, shadow, 0, 1, 3);
    scans::strided_scan(a, shadow, 1000, -3, 4);
    EXPECT_EQ(manager.stats().prefetched, 0u);
    EXPECT_EQ(manager.stats().prefetch_hits, 0u);
    scans::check_all(a, shadow);
  }
  Manager manager(make_local_device(2, 16 << 20), cache_of(512 * 1024));
  Elements a(elements);
  a.set_prefetch_depth(0);  // the array's own setting
  std::vector<std::uint64_t> shadow;
  scans::fill(a, shadow);
  scans::strided_scan(a, shadow, 0, 2, 5);
  EXPECT_EQ(manager.stats().prefetched, 0u);
  EXPECT_EQ(manager.stats().prefetch_hits, 0u);
}

// Off unless asked for (a program correct without it could deadlock with
// it, docs/far-structures.md): a default Config fetches nothing ahead, and
// an array that asks for a depth does.
TEST(FarPrefetch, OffByDefaultOnWhenAsked) {
  Config c;
  EXPECT_EQ(c.prefetch_depth, 0u);  // RDMX_FAR_PREFETCH is not set here
  c.cache_bytes = 512 * 1024;
  c.region_bytes = 16 << 20;
  Manager manager(make_local_device(2, 16 << 20), c);
  Elements a(elements);
  std::vector<std::uint64_t> shadow;
  scans::fill(a, shadow);
  scans::strided_scan(a, shadow, 0, 1, 3);
  EXPECT_EQ(manager.stats().prefetched, 0u);
  a.set_prefetch_depth(16);
  scans::strided_scan(a, shadow, 0, 1, 3);
  EXPECT_GT(manager.stats().prefetch_hits, 0u);
  scans::check_all(a, shadow);
}

TEST(FarPrefetch, RandomAccessFetchesLittleAhead) {
  Manager manager(make_local_device(2, 16 << 20), cache_of(512 * 1024));
  Elements a(elements);
  std::vector<std::uint64_t> shadow;
  scans::fill(a, shadow);
  const std::size_t reads = scans::random_reads(a, shadow, 20000, 99);
  // A stride repeats by chance once in about a thousand accesses here.
  EXPECT_LE(manager.stats().prefetched, reads / 50) << manager.stats().prefetched << " prefetched";
}

// The depth is bounded by a sixteenth of the cache; with every frame but
// the one an access needs pinned, the prefetcher finds no room and skips,
// without failing or waiting.
TEST(FarPrefetch, NeverPinsPastTheBudget) {
  Manager manager(make_local_device(2, 16 << 20), cache_of(256 * 1024));  // 64 chunk frames; depth 4
  Elements a(elements / 4);
  Elements pinned(63 * scans::per_chunk);
  pinned.set_prefetch_depth(0);
  std::vector<std::uint64_t> shadow;
  scans::fill(a, shadow);
  {
    DerefScope hold;  // 63 of the 64 frames
    for (std::size_t c = 0; c < 63; ++c) pinned.at_mut(hold, c * scans::per_chunk) = c;
    const Stats before = manager.stats();
    const auto started = std::chrono::steady_clock::now();
    const std::size_t visited = scans::strided_scan(a, shadow, 0, 1, 8);
    EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(60));
    const Stats after = manager.stats();
    EXPECT_EQ(visited, elements / 4 / scans::per_chunk);
    EXPECT_LE(after.peak_resident_bytes, after.cache_bytes);
    EXPECT_EQ(after.prefetched, before.prefetched);
  }
  // With the frames free again, the same scan prefetches.
  const Stats before = manager.stats();
  scans::strided_scan(a, shadow, 0, 1, 9);
  EXPECT_GT(manager.stats().prefetch_hits - before.prefetch_hits, 200u);
  scans::check_all(a, shadow);
  DerefScope scope;
  for (std::size_t c = 0; c < 63; ++c) EXPECT_EQ(pinned.at(scope, c * scans::per_chunk), c);
}

// Threads scanning one array at once, each with its own pattern, while a
// third rewrites elements: the readers read even elements (never written),
// the writer odd ones; a chunk one thread prefetches and another needs is
// waited for, never read half-landed.
TEST(FarPrefetch, ThreadsShareAnArray) {
  Manager manager(make_local_device(2, 16 << 20), cache_of(512 * 1024));
  Elements a(elements);
  std::vector<std::uint64_t> shadow;
  scans::fill(a, shadow);
  const std::size_t chunks = elements / scans::per_chunk;
  std::atomic<std::size_t> wrong{0};
  auto reader = [&](std::size_t first, std::int64_t stride) {
    for (int round = 0; round < 2; ++round)
      for (auto c = static_cast<std::int64_t>(first); c >= 0 && c < static_cast<std::int64_t>(chunks); c += stride)
        for (std::size_t k = 0; k < scans::per_chunk; k += 128) {
          const std::size_t i = static_cast<std::size_t>(c) * scans::per_chunk + k;
          DerefScope scope;
          wrong += a.at(scope, i) != scans::value_of(i);
        }
  };
  std::vector<std::uint64_t> odd(elements / 2);
  auto writer = [&] {
    for (std::int64_t c = static_cast<std::int64_t>(chunks) - 1; c >= 0; c -= 2)
      for (std::size_t k = 1; k < scans::per_chunk; k += 64) {
        const std::size_t i = static_cast<std::size_t>(c) * scans::per_chunk + k;
        DerefScope scope;
        a.at_mut(scope, i) += 1;
        odd[i / 2] += 1;
      }
  };
  std::thread t1(reader, 0, 1), t2(reader, chunks - 1, -2), t3(writer);
  t1.join();
  t2.join();
  t3.join();
  EXPECT_EQ(wrong.load(), 0u);
  for (std::size_t i = 1; i < elements; i += 2) shadow[i] += odd[i / 2];
  scans::check_all(a, shadow);
  EXPECT_GT(manager.stats().prefetch_hits, chunks / 2);
}

// A scope that ends with prefetches in flight lands them: nothing stays
// busy, so another thread reaches those chunks, and the array can be freed.
TEST(FarPrefetch, ScopeEndLandsWhatIsInFlight) {
  Manager manager(make_local_device(1, 16 << 20), cache_of(512 * 1024));
  auto a = std::make_unique<Elements>(elements);
  std::vector<std::uint64_t> shadow;
  scans::fill(*a, shadow);
  {
    DerefScope scope;
    for (std::size_t c = 100; c < 103; ++c) EXPECT_EQ(a->at(scope, c * scans::per_chunk), shadow[c * scans::per_chunk]);
    EXPECT_GT(manager.stats().prefetched, 0u);
  }
  std::thread other([&] {
    DerefScope scope;
    for (std::size_t c = 103; c < 112; ++c) EXPECT_EQ(a->at_nt(scope, c * scans::per_chunk), shadow[c * scans::per_chunk]);
  });
  other.join();
  a.reset();  // frees every chunk: none is busy or pinned
  EXPECT_EQ(manager.stats().objects, 0u);
}
