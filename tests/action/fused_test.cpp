// The fused small-parcel path (src/action/parcel_path.cpp): on the one-sided
// path, a parcel message of up to fused_limit bytes with its header travels
// as a one-sided record of its own; a larger one as a call_buffer. Every
// size across that bound arrives intact, the sizes that went fused are
// exactly those below one bound, and a flood of small actions into a
// destination that does not poll for a while (a ring that fills, when run
// with a small RDMX_CHUNK_SIZE) runs each action exactly once.
//
// TEST_FUSED_BOUND (set by tests/action/CMakeLists.txt) says where the
// bound must lie: the most bytes of flattened arguments that go fused, up to
// 64 bytes of archive header either side (0: none go fused, as over TCP,
// where parcels are send-based calls).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "rdmx/action/action.hpp"
#include "rdmx/fabric/job.hpp"
#include "rdmx/fabric/quiet.hpp"

using namespace rdmx;

namespace {

Job& job() { return Job::current(); }

std::vector<char> echo(std::vector<char> v) { return v; }

// The flood: what process 1 received from each sender, by sequence number.
constexpr std::uint64_t flood = 20000;
std::vector<std::atomic<std::uint8_t>> seen;  // [sender * flood + i]
void tally(std::uint32_t sender, std::uint64_t i) {
  if (sender < job().size() && i < flood) seen[sender * flood + i].fetch_add(1, std::memory_order_relaxed);
}
std::uint64_t tally_async(std::uint32_t sender, std::uint64_t i) {
  tally(sender, i);
  return i * 3;
}

long expected_bound() {
  const char* v = std::getenv("TEST_FUSED_BOUND");
  if (v == nullptr) ADD_FAILURE() << "TEST_FUSED_BOUND is not set";
  return v == nullptr ? 0 : std::atol(v);
}

}  // namespace

TEST(Fused, SizesAcrossTheBoundArriveIntactAndOnlyTheSmallGoFused) {
  const ThreadId to{(job().rank() + 1) % job().size(), 0};
  const long bound = expected_bound();
  // One caller at a time: this thread's count of fused parcels then moves
  // only with its own requests, not with replies it sends while it waits.
  for (std::uint32_t turn = 0; turn < job().rank(); ++turn) job().barrier();
  long largest_fused = -1, smallest_not_fused = -1;
  for (std::size_t n = 0; n <= 2200; n += n < 900 ? 61 : (n < 1900 ? 17 : 1)) {
    std::vector<char> v(n);
    for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<char>(n + 7 * i);
    const std::uint64_t before = parcel::stats().fused;
    std::vector<char> back = async(action<&echo>, to, v).get();
    const bool fused = parcel::stats().fused != before;
    ASSERT_EQ(back, v) << n << " bytes came back changed";
    if (fused) {
      largest_fused = static_cast<long>(n);
      EXPECT_EQ(smallest_not_fused, -1) << n << " bytes went fused after " << smallest_not_fused << " did not";
    } else if (smallest_not_fused == -1) {
      smallest_not_fused = static_cast<long>(n);
    }
  }
  if (bound == 0) {
    EXPECT_EQ(largest_fused, -1) << "no parcel should go fused here, " << largest_fused << " bytes did";
  } else {
    EXPECT_GE(largest_fused, bound - 64) << "the largest fused argument";
    EXPECT_LE(largest_fused, bound) << "the largest fused argument";
    EXPECT_NE(smallest_not_fused, -1) << "the largest arguments should not go fused";
  }
  for (std::uint32_t turn = job().rank(); turn < job().size(); ++turn) job().barrier();
}

TEST(Fused, AFloodIntoADestinationThatWaitsRunsEveryActionOnce) {
  const std::uint32_t n = job().size();
  seen = std::vector<std::atomic<std::uint8_t>>(std::size_t{n} * flood);
  job().barrier();
  const ThreadId dest{1, 0};
  if (job().rank() == 1) {
    // Not progressing: the senders' rings to it fill, and they must wait for
    // room (serving their own calls), not drop or overwrite anything.
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
  } else {
    std::vector<Future<std::uint64_t>> window;
    for (std::uint64_t i = 0; i < flood; ++i) {
      if (i % 4 == 0) {
        window.push_back(async(action<&tally_async>, dest, job().rank(), i));
      } else {
        post(action<&tally>, dest, job().rank(), i);
      }
      if (window.size() == 64) {
        for (std::size_t k = 0; k < window.size(); ++k) {
          const std::uint64_t got = window[k].get();
          ASSERT_EQ(got % 3, 0u);
        }
        window.clear();
      }
    }
    for (auto& f : window) EXPECT_EQ(f.get() % 3, 0u);
  }
  quiet();
  job().barrier();
  if (job().rank() == 1) {
    for (std::uint32_t s = 0; s < n; ++s) {
      if (s == 1) continue;
      std::uint64_t missing = 0, repeated = 0;
      for (std::uint64_t i = 0; i < flood; ++i) {
        const unsigned times = seen[s * flood + i].load();
        missing += times == 0;
        repeated += times > 1;
      }
      EXPECT_EQ(missing, 0u) << "actions of process " << s << " never ran";
      EXPECT_EQ(repeated, 0u) << "actions of process " << s << " ran more than once";
    }
  }
  job().barrier();
}
