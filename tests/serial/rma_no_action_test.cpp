// A program that uses RmaVector inside a Job but no action at all: the
// Job's default memory for it must still be there. (With rdmx a static
// library, nothing of this program refers to the action layer, which
// installs that default, so the linker would leave it out.)
#include <gtest/gtest.h>

#include <cstdint>
#include <numeric>

#include "rdmx/fabric/job.hpp"
#include "rdmx/serial/rma_memory.hpp"
#include "rdmx/serial/rma_vector.hpp"

using namespace rdmx;

TEST(RmaNoAction, VectorsNeedNoSetUpWithoutActions) {
  ASSERT_EQ(serial::RmaMemory::process_default(), nullptr);
  Job::current().run([](ThreadId) {
    serial::RmaVector<std::uint64_t> v(4096);
    std::iota(v.begin(), v.end(), std::uint64_t{1});
    EXPECT_NE(v.key().region, 0u);
    EXPECT_EQ(v[4095], 4096u);
  });
}
