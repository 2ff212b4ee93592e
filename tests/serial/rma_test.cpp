// Registered memory: RmaVector and RmaValue emit RMA chunks carrying
// their keys, and take over registered landing memory on the receiving
// side; the registration cache registers ordinary memory for pointer chunks.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "rdmx/memory/arena.hpp"
#include "rdmx/memory/region_table.hpp"
#include "rdmx/serial/registration_cache.hpp"
#include "rdmx/serial/rma_value.hpp"
#include "rdmx/serial/rma_vector.hpp"
#include "rdmx/serial/serial.hpp"
#include "rdmx/transfer/context.hpp"
#include "rdmx/transfer/memory_region.hpp"
#include "support.hpp"

namespace rdmx::serial {
namespace {

using testing::chunk_threshold;
using testing::error_of;
using testing::with_threshold;

constexpr std::size_t KiB = std::size_t{1} << 10;
constexpr std::size_t MiB = std::size_t{1} << 20;

// One UCX context for the binary (creating one costs tens of milliseconds).
transfer::Context& context() {
  static transfer::Context ctx;
  return ctx;
}

// UCX-backed arena segments, so the tests do not depend on huge-page pools.
memory::Arena::Options small_arena() {
  memory::Arena::Options options;
  options.segment_size = 4 * MiB;
  options.max_size = 16 * MiB;
  options.backing = memory::Backing::ucx;
  return options;
}

class Rma : public ::testing::Test {
 protected:
  memory::Arena arena{context(), small_arena()};
  RmaMemory memory{arena};
};

// Where `key` points in this process's registered memory.
const std::byte* address_of(RmaKey key) {
  const transfer::MemoryRegion* region = memory::RegionTable::process().get(key.region);
  return region == nullptr ? nullptr : region->data() + key.offset;
}

// Sizes near SIZE_MAX used to round up to a tiny block that was handed out.
TEST_F(Rma, HugeAllocationsAreOutOfMemory) {
  for (std::size_t n : {SIZE_MAX, SIZE_MAX - 63, std::size_t{1} << 62}) {
    std::string message;
    EXPECT_EQ(error_of([&] { memory.allocate(n); }, &message), Errc::out_of_memory) << n;
    EXPECT_NE(message.find(std::to_string(n)), std::string::npos) << message;
  }
  RmaVector<std::uint64_t> v(&memory);
  std::string message;
  EXPECT_EQ(error_of([&] { v.reserve(SIZE_MAX / 4); }, &message), Errc::out_of_memory);
  EXPECT_NE(message.find("RmaVector"), std::string::npos) << message;
  EXPECT_EQ(memory.allocate(100).size, 100u);
}

TEST_F(Rma, VectorLivesInRegisteredMemoryAndCopiesShare) {
  RmaVector<double> v(&memory);
  for (int i = 0; i < 1000; ++i) v.push_back(i * 0.5);
  EXPECT_EQ(v.size(), 1000u);
  EXPECT_GE(v.capacity(), 1000u);
  EXPECT_EQ(v[999], 499.5);
  EXPECT_NE(v.key().region, 0u);
  EXPECT_EQ(address_of(v.key()), reinterpret_cast<const std::byte*>(v.data()));
  RmaVector<double> shared = v;  // HPX semantics: a copy is another handle
  shared[0] = -1;
  EXPECT_EQ(v[0], -1);
  EXPECT_EQ(v.use_count(), 2);
  RmaVector<double> independent = v.clone();
  independent[1] = 42;
  EXPECT_EQ(v[1], 0.5);
  EXPECT_NE(independent.key(), v.key());
  v.resize(10, 7.0);
  EXPECT_EQ(shared.size(), 10u);
  v.resize(20, 7.0);
  EXPECT_EQ(v[19], 7.0);
  EXPECT_EQ(v.at(19), 7.0);
  EXPECT_THROW(v.at(20), std::out_of_range);
  RmaVector<int> list({1, 2, 3}, &memory);
  EXPECT_EQ(list.back(), 3);
}

TEST_F(Rma, VectorBecomesAnRmaChunkWithItsKey) {
  RmaVector<std::int64_t> v(2000, &memory);
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<std::int64_t>(i);
  OutputArchive ar(with_threshold(chunk_threshold));
  ar(v);
  ASSERT_EQ(ar.out_of_line_chunks().size(), 1u);
  const OutOfLineChunk& chunk = ar.out_of_line_chunks()[0];
  EXPECT_EQ(chunk.kind, ChunkKind::rma);
  EXPECT_EQ(chunk.data, reinterpret_cast<const std::byte*>(v.data()));
  EXPECT_EQ(chunk.key, v.key());
  const MessageView view(ar.flatten());
  ASSERT_EQ(view.chunk_count(), 1u);
  const ChunkDescriptor d = view.chunk(0);
  EXPECT_EQ(d.kind, ChunkKind::rma);
  EXPECT_EQ(d.key, v.key());
  EXPECT_EQ(d.size, v.size() * sizeof(std::int64_t));
  EXPECT_EQ(d.key.locator(3, d.size), (RemoteLocator{3, v.key().region, v.key().offset, d.size}));
}

TEST_F(Rma, SmallVectorTravelsInline) {
  RmaVector<int> v({1, 2, 3}, &memory);
  OutputArchive ar(with_threshold(chunk_threshold));
  ar(v);
  EXPECT_TRUE(ar.out_of_line_chunks().empty());
  InputOptions options;
  options.rma_memory = &memory;
  const auto out = decode<RmaVector<int>>(ar.flatten(), {}, options);
  EXPECT_EQ(out, v);
  EXPECT_NE(out.key(), v.key());
}

TEST_F(Rma, ArchiveKeepsTheSerializedElementsWhenTheVectorGrows) {
  RmaVector<double> v(1000, 1.0, &memory);
  OutputArchive ar(with_threshold(chunk_threshold));
  ar(v);
  const std::byte* sent = ar.out_of_line_chunks()[0].data;
  v.reserve(100000);  // moves the elements; the archive keeps the old piece
  v[0] = 2.0;
  double first;
  std::memcpy(&first, sent, sizeof first);
  EXPECT_EQ(first, 1.0);
}

TEST_F(Rma, ReceiverTakesOverRegisteredLandingMemory) {
  RmaVector<double> v(4096, 3.5, &memory);
  OutputArchive ar(with_threshold(chunk_threshold));
  ar(v);
  const auto message = ar.flatten();
  // The receiver got the chunk into registered memory of its own.
  RmaBytes landing = memory.allocate(v.size() * sizeof(double));
  std::memcpy(landing.data.get(), v.data(), landing.size);
  const ReceivedChunk received{{landing.data.get(), landing.size}, landing.data, landing.key};
  const auto out = decode<RmaVector<double>>(message, {&received, 1});
  EXPECT_EQ(reinterpret_cast<const std::byte*>(out.data()), landing.data.get());  // no copy
  EXPECT_EQ(out.key(), landing.key);
  EXPECT_EQ(out, v);
}

TEST_F(Rma, ReceiverCopiesUnregisteredLandingMemoryIntoItsPool) {
  RmaVector<float> v(3000, 0.5f, &memory);
  OutputArchive ar(with_threshold(chunk_threshold));
  ar(v);
  const auto message = ar.flatten();
  const auto chunks = testing::chunks_of(ar);  // the sender's memory, no owner
  InputOptions options;
  options.rma_memory = &memory;
  const auto out = decode<RmaVector<float>>(message, chunks, options);
  EXPECT_EQ(out, v);
  EXPECT_NE(out.data(), v.data());
  EXPECT_NE(out.key().region, 0u);
  std::string what;
  EXPECT_EQ(error_of([&] { decode<RmaVector<float>>(message, chunks); }, &what), Errc::invalid_argument);
  EXPECT_NE(what.find("set_process_default"), std::string::npos) << what;
  RmaMemory::set_process_default(&memory);
  EXPECT_EQ(decode<RmaVector<float>>(message, chunks), v);
  RmaMemory::set_process_default(nullptr);
}

struct Block {
  double values[1024];
};

}  // namespace
}  // namespace rdmx::serial

template <>
struct rdmx::serial::is_bitwise_serializable<rdmx::serial::Block> : std::true_type {};

namespace rdmx::serial {
namespace {

TEST_F(Rma, ObjectBecomesAnRmaChunkAndCanBeNull) {
  RmaValue<Block> object(memory);
  object->values[1023] = 8.0;
  EXPECT_EQ(address_of(object.key()), reinterpret_cast<const std::byte*>(object.get()));
  OutputArchive ar(with_threshold(chunk_threshold));
  ar(object, RmaValue<Block>());
  ASSERT_EQ(ar.out_of_line_chunks().size(), 1u);
  EXPECT_EQ(ar.out_of_line_chunks()[0].kind, ChunkKind::rma);
  EXPECT_EQ(ar.out_of_line_chunks()[0].key, object.key());
  const auto message = ar.flatten();
  const auto chunks = testing::chunks_of(ar);
  InputOptions options;
  options.rma_memory = &memory;
  auto [got, null] = decode<RmaValue<Block>, RmaValue<Block>>(message, chunks, options);
  ASSERT_TRUE(got);
  EXPECT_EQ(got->values[1023], 8.0);
  EXPECT_NE(got.get(), object.get());
  EXPECT_FALSE(null);
}

// ---- registration cache ----

// Page-aligned memory of our own, so the tests control which pages are used.
struct Pages {
  explicit Pages(std::size_t n) : size(n * page()) {
    void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw std::bad_alloc();
    data = static_cast<std::byte*>(p);
  }
  ~Pages() {
    if (data != nullptr) munmap(data, size);
  }
  static std::size_t page() { return static_cast<std::size_t>(sysconf(_SC_PAGESIZE)); }
  std::byte* page_at(std::size_t i) const { return data + i * page(); }
  std::byte* data = nullptr;
  std::size_t size;
};

RegistrationCache::Options budget(std::size_t bytes) {
  RegistrationCache::Options options;
  options.budget_bytes = bytes;
  return options;
}

TEST(RegistrationCache, SubRangesOfARegistrationAreHits) {
  RegistrationCache cache(context(), budget(1 * MiB));
  Pages pages(4);
  const auto whole = cache.acquire(pages.data + 100, 3 * Pages::page());
  EXPECT_EQ(whole->begin(), pages.data);  // widened to whole pages
  EXPECT_EQ(whole->size(), 4 * Pages::page());
  EXPECT_FALSE(whole->packed_rkey().empty());
  EXPECT_TRUE(whole->region().contains(pages.data + 100, 3 * Pages::page()));
  const auto part = cache.acquire(pages.page_at(2) + 8, 64);
  EXPECT_EQ(part, whole);
  const auto stats = cache.stats();
  EXPECT_EQ(stats.misses, 1u);
  EXPECT_EQ(stats.hits, 1u);
  EXPECT_EQ(stats.entries, 1u);
  EXPECT_EQ(stats.pinned_bytes, 4 * Pages::page());
}

TEST(RegistrationCache, EvictsTheLeastRecentlyUsedToStayWithinTheBudget) {
  RegistrationCache cache(context(), budget(3 * Pages::page()));
  Pages pages(8);
  for (std::size_t i = 0; i < 3; ++i) cache.acquire(pages.page_at(2 * i), 1);  // released at once
  cache.acquire(pages.page_at(0), 1);                                          // page 0 is now the most recent
  cache.acquire(pages.page_at(6), 1);  // a fourth page: page 2 (least recent) goes
  auto stats = cache.stats();
  EXPECT_EQ(stats.evictions, 1u);
  EXPECT_EQ(stats.entries, 3u);
  EXPECT_EQ(stats.pinned_bytes, 3 * Pages::page());
  const std::uint64_t misses = stats.misses;
  cache.acquire(pages.page_at(0), 1);
  EXPECT_EQ(cache.stats().misses, misses);  // still cached
  cache.acquire(pages.page_at(2), 1);
  EXPECT_EQ(cache.stats().misses, misses + 1);  // was evicted
}

TEST(RegistrationCache, RegistrationsInUseAreNeverEvicted) {
  RegistrationCache cache(context(), budget(2 * Pages::page()));
  Pages pages(4);
  const auto a = cache.acquire(pages.page_at(0), 1);
  const auto b = cache.acquire(pages.page_at(1), 1);
  std::string what;
  EXPECT_EQ(error_of([&] { cache.acquire(pages.page_at(3), 1); }, &what), Errc::out_of_memory);
  EXPECT_NE(what.find("in use"), std::string::npos) << what;
  EXPECT_NE(what.find("RDMX_REG_CACHE_BYTES"), std::string::npos) << what;
  EXPECT_EQ(cache.stats().evictions, 0u);
}

TEST(RegistrationCache, ARangeLargerThanTheBudgetIsAClearError) {
  RegistrationCache cache(context(), budget(64 * KiB));
  std::vector<std::byte> big(256 * KiB);
  std::string what;
  EXPECT_EQ(error_of([&] { cache.acquire(big.data(), big.size()); }, &what), Errc::out_of_memory);
  EXPECT_NE(what.find("exceeds the budget"), std::string::npos) << what;
  EXPECT_NE(what.find("RDMX_REG_CACHE_BYTES"), std::string::npos) << what;
  EXPECT_EQ(error_of([&] { cache.acquire(big.data(), 0); }), Errc::invalid_argument);
}

TEST(RegistrationCache, BudgetFromTheEnvironment) {
  ASSERT_EQ(setenv("RDMX_REG_CACHE_BYTES", "32M", 1), 0);
  EXPECT_EQ(RegistrationCache::Options().budget_bytes, 32 * MiB);
  ASSERT_EQ(setenv("RDMX_REG_CACHE_BYTES", "plenty", 1), 0);
  EXPECT_EQ(error_of([] { RegistrationCache::Options(); }), Errc::invalid_argument);
  ASSERT_EQ(unsetenv("RDMX_REG_CACHE_BYTES"), 0);
  EXPECT_EQ(RegistrationCache::Options().budget_bytes, 256 * MiB);
  EXPECT_EQ(error_of([] { RegistrationCache cache(context(), budget(0)); }), Errc::invalid_argument);
}

TEST(RegistrationCache, UnmappedMemoryDropsItsRegistrations) {
  RegistrationCache cache(context(), budget(1 * MiB));
  if (!cache.tracks_unmaps()) GTEST_SKIP() << "UCX memory events are off (UCX_MEM_EVENTS=no)";
  std::optional<Pages> pages(std::in_place, 2);
  std::byte* address = pages->data;
  const auto first = cache.acquire(address, 100);
  pages.reset();  // munmap
  EXPECT_EQ(cache.stats().entries, 1u);  // noticed on the next call
  // New memory at the same address must not be served by the old registration.
  void* again = mmap(address, 2 * Pages::page(), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
  ASSERT_EQ(again, static_cast<void*>(address));
  const auto second = cache.acquire(address, 100);
  EXPECT_NE(second, first);
  EXPECT_EQ(cache.stats().invalidations, 1u);
  EXPECT_EQ(cache.stats().misses, 2u);
  munmap(again, 2 * Pages::page());
}

TEST(RegistrationCache, InvalidateByHand) {
  RegistrationCache cache(context(), budget(1 * MiB));
  Pages pages(2);
  const auto held = cache.acquire(pages.data, 10);
  cache.invalidate(pages.data, 1);
  EXPECT_EQ(cache.stats().entries, 0u);
  EXPECT_FALSE(held->packed_rkey().empty());  // the holder's registration stays valid
  EXPECT_NE(cache.acquire(pages.data, 10), held);
}

TEST(RegistrationCache, PointerChunksGetTheirRkeys) {
  RegistrationCache cache(context(), budget(16 * MiB));
  std::vector<double> data(100000, 1.0);
  const std::string small = "small";
  OutputArchive ar(with_threshold(chunk_threshold));
  ar(small, data);
  register_pointer_chunks(ar, cache);
  const auto handle = cache.acquire(data.data(), 8);  // a hit: the archive's registration
  EXPECT_EQ(cache.stats().hits, 1u);
  const MessageView view(ar.flatten());
  ASSERT_EQ(view.chunk_count(), 1u);
  const ChunkDescriptor d = view.chunk(0);
  EXPECT_EQ(d.address, reinterpret_cast<std::uintptr_t>(data.data()));
  ASSERT_EQ(d.packed_rkey.size(), handle->packed_rkey().size());
  EXPECT_EQ(std::memcmp(d.packed_rkey.data(), handle->packed_rkey().data(), d.packed_rkey.size()), 0);
  EXPECT_EQ(error_of([&] { ar.attach_rkey(0, handle->packed_rkey(), handle); }), Errc::invalid_argument);
  const auto chunks = testing::chunks_of(ar);
  auto [s, v] = decode<std::string, std::vector<double>>(ar.flatten(), chunks);
  EXPECT_EQ(s, small);
  EXPECT_EQ(v, data);
}

}  // namespace
}  // namespace rdmx::serial
