// main() for multi-process GoogleTest binaries started through scripts/run:
// every process runs every test; only rank 0 prints the report, and the
// exit status is non-zero if any process had a failure.
#include <gtest/gtest.h>

#include <cstdio>

#include "rdmx/fabric/job.hpp"

int main(int argc, char** argv) {
  rdmx::Job job(argc, argv);
  ::testing::InitGoogleTest(&argc, argv);
  if (job.rank() != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
  }
  int failed = RUN_ALL_TESTS() != 0 ? 1 : 0;
  std::vector<std::byte> mine{static_cast<std::byte>(failed)};
  int any = 0;
  for (auto& v : job.allgather(mine)) any |= static_cast<int>(v.at(0));
  if (job.rank() == 0) std::printf("[rdmx] %u processes: %s\n", job.size(), any ? "FAILED on some process" : "all passed");
  return failed || any ? 1 : 0;
}
