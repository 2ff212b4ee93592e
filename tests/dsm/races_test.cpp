// Checking mode (RDMX_DSM_CHECK_RACES=1): two processes write the same byte
// between the same synchronizations; the later releaser reports the block
// and offset.
#include <gtest/gtest.h>

#include <cstdint>

#include "rdmx/dsm/counters.hpp"
#include "rdmx/dsm/fence.hpp"
#include "rdmx/dsm/space.hpp"
#include "support.hpp"

using namespace rdmx;

TEST(Races, BytesBothWritersChangedAreReported) {
  dsm::Space space(dsm_test::job());
  ASSERT_TRUE(space.config().check_races) << "run with RDMX_DSM_CHECK_RACES=1";
  auto* bytes = static_cast<std::uint8_t*>(dsm::allocate(space.config().block_bytes, space.config().block_bytes));
  ASSERT_EQ(bytes, reinterpret_cast<std::uint8_t*>(space.heap().data()));  // block 0
  const std::uint32_t rank = dsm_test::job().rank();
  if (rank < 2) {
    bytes[100] = static_cast<std::uint8_t>(rank + 1);  // the race
    bytes[200 + rank] = 9;                             // not a race: different bytes
  }
  // Both write before either releases (an rdmx barrier orders execution,
  // not memory): a write made after the other's release would see it in
  // its twin, and the checker reports only writes the protocol found concurrent.
  dsm_test::job().barrier();
  dsm::process_barrier();
  std::uint64_t total = 0;
  for (auto r : dsm_test::gather(dsm::counters().races)) total += r;
  EXPECT_EQ(total, 1u);
  EXPECT_EQ(bytes[201], 9);
  EXPECT_EQ(bytes[200], 9);
}
