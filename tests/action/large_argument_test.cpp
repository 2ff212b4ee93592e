// Pointer chunks larger than an arena segment (run with a small
// RDMX_ARENA_SEGMENT): a SerializeBuffer or std::vector argument, and a
// result, that the receiver's arena could never hold arrive intact, land in
// memory of their own, and stay intact while the receiver keeps them and
// more arrive, within the arena's limit. Before, the pull failed with "does
// not fit in a segment".
// Rank r calls rank r+1's thread 0.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "rdmx/action/action.hpp"
#include "rdmx/fabric/job.hpp"
#include "rdmx/memory/arena.hpp"

using namespace rdmx;
namespace serial = rdmx::serial;

namespace {

Job& job() { return Job::current(); }
ThreadId next_rank() { return {(job().rank() + 1) % job().size(), 0}; }

std::uint32_t value(std::uint32_t seed, std::size_t i) { return static_cast<std::uint32_t>(i * 2654435761u) ^ seed; }

serial::SerializeBuffer<std::uint32_t> pattern(std::uint32_t seed, std::size_t n) {
  std::vector<std::uint32_t> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = value(seed, i);
  return serial::SerializeBuffer<std::uint32_t>(std::move(v));
}

// The index of the first element that is not value(seed, i), or n when all are.
template <class Range>
std::size_t first_wrong(const Range& r, std::uint32_t seed) {
  std::size_t i = 0;
  for (; i < r.size(); ++i)
    if (r[i] != value(seed, i)) break;
  return i;
}

// Received buffers the destination keeps (thread 0's own).
std::vector<serial::SerializeBuffer<std::uint32_t>> kept;

std::size_t check_buffer(serial::SerializeBuffer<std::uint32_t> b, std::uint32_t seed, bool keep) {
  const std::size_t wrong = first_wrong(b, seed);
  if (keep) kept.push_back(b);
  return wrong;
}
std::size_t check_vector(const std::vector<std::uint32_t>& v, std::uint32_t seed) { return first_wrong(v, seed); }
// Every buffer kept so far still holds its pattern (seed = its index).
bool kept_intact() {
  for (std::size_t k = 0; k < kept.size(); ++k)
    if (first_wrong(kept[k], static_cast<std::uint32_t>(k)) != kept[k].size()) return false;
  return true;
}
void forget_kept() { kept.clear(); }
serial::SerializeBuffer<std::uint32_t> make(std::uint32_t seed, std::size_t n) { return pattern(seed, n); }

// Elements of a buffer of `segments` arena segments and a bit (never a whole number of pages).
std::size_t beyond_segment(double segments) {
  const std::size_t segment = job().arena().segment_size();
  return static_cast<std::size_t>(static_cast<double>(segment) * segments) / sizeof(std::uint32_t) + 3;
}

TEST(LargeArgument, TheTestRunsWithChunksLargerThanASegment) {
  // Else nothing here would take the path under test.
  EXPECT_LE(job().arena().segment_size(), std::size_t{8} << 20) << "run with a small RDMX_ARENA_SEGMENT";
}

TEST(LargeArgument, SerializeBufferLargerThanASegmentArrivesIntact) {
  const std::size_t n = beyond_segment(2.5);
  auto buffer = pattern(7, n);
  EXPECT_EQ(async(action<&check_buffer>, next_rank(), buffer, 7u, false).get(), n);
  job().barrier();
}

TEST(LargeArgument, StdVectorLargerThanASegmentArrivesIntact) {
  const std::size_t n = beyond_segment(1.5);
  std::vector<std::uint32_t> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = value(11, i);
  EXPECT_EQ(async(action<&check_vector>, next_rank(), v, 11u).get(), n);
  job().barrier();
}

TEST(LargeArgument, KeptBuffersStayIntactWhileLargerAndSmallerOnesArrive) {
  // The destination keeps each buffer: the memory it landed in must never
  // serve the next one. Sizes go up and down, so a spare mapping is both
  // reused and replaced.
  const double sizes[] = {1.5, 3.0, 1.25, 3.5, 2.0};
  for (std::uint32_t k = 0; k < 5; ++k) {
    const std::size_t n = beyond_segment(sizes[k]);
    EXPECT_EQ(async(action<&check_buffer>, next_rank(), pattern(k, n), k, true).get(), n) << "buffer " << k;
  }
  EXPECT_TRUE(async(action<&kept_intact>, next_rank()).get());
  async(action<&forget_kept>, next_rank()).get();
  // Released: the next ones land in the spare and are still intact.
  for (std::uint32_t k = 0; k < 3; ++k) {
    const std::size_t n = beyond_segment(k == 1 ? 3.0 : 1.5);
    EXPECT_EQ(async(action<&check_buffer>, next_rank(), pattern(20 + k, n), 20 + k, false).get(), n);
  }
  job().barrier();
}

TEST(LargeArgument, ResultLargerThanASegmentArrivesIntact) {
  const std::size_t n = beyond_segment(2.25);
  auto result = async(action<&make>, next_rank(), 5u, n).get();
  ASSERT_EQ(result.size(), n);
  EXPECT_EQ(first_wrong(result, 5), n);
  job().barrier();
}

TEST(LargeArgument, LandedChunksBeyondTheArenaLimitAreAClearError) {
  // The receiver keeps what it received; the mappings it landed in are
  // bounded like the arena (RDMX_ARENA_MAX), so one of these must fail,
  // cleanly, and after they are let go the next one lands again.
  const std::size_t limit = job().arena().max_size();
  if (limit > (std::size_t{256} << 20)) GTEST_SKIP() << "run with a small RDMX_ARENA_MAX";
  const std::size_t n = beyond_segment(3.5);
  const std::size_t sends = limit / (n * sizeof(std::uint32_t)) + 2;
  bool refused = false;
  for (std::uint32_t k = 0; k < sends && !refused; ++k) {
    try {
      EXPECT_EQ(async(action<&check_buffer>, next_rank(), pattern(k, n), k, true).get(), n);
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), Errc::out_of_memory) << e.what();
      EXPECT_NE(std::string(e.what()).find("RDMX_ARENA_MAX"), std::string::npos) << e.what();
      refused = true;
    }
  }
  EXPECT_TRUE(refused) << sends << " chunks of " << n * sizeof(std::uint32_t) << " bytes kept within " << limit;
  EXPECT_TRUE(async(action<&kept_intact>, next_rank()).get());
  async(action<&forget_kept>, next_rank()).get();
  EXPECT_EQ(async(action<&check_buffer>, next_rank(), pattern(3, n), 3u, false).get(), n);
  job().barrier();
}

TEST(LargeArgument, BeyondTheMessageLimitIsAClearError) {
  // RDMX_MAX_MESSAGE still bounds what a receiver pulls, here too.
  if (job().max_message() > (std::size_t{64} << 20)) GTEST_SKIP() << "run with a small RDMX_MAX_MESSAGE";
  const std::size_t n = job().max_message() / sizeof(std::uint32_t) + 1;
  try {
    async(action<&check_buffer>, next_rank(), pattern(1, n), 1u, false).get();
    ADD_FAILURE() << "a chunk above RDMX_MAX_MESSAGE was pulled";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::message_too_large) << e.what();
  }
  job().barrier();
}

}  // namespace
