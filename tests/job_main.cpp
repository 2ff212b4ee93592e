// main() for multi-process GoogleTest binaries started through scripts/run:
// every process runs every test; rank 0 prints the report, the others only
// their failures (tagged with the rank), and the
// exit status is non-zero if any process had a failure.
#include <gtest/gtest.h>

#include <cstdio>

#include "rdmx/fabric/job.hpp"

namespace {
// Ranks other than 0 print only their failures, tagged with the rank, so a
// test failing on one process is seen (not only its effect on the others).
class FailurePrinter : public ::testing::EmptyTestEventListener {
 public:
  explicit FailurePrinter(unsigned rank) : rank_(rank) {}
  void OnTestPartResult(const ::testing::TestPartResult& r) override {
    if (!r.failed()) return;
    const auto* test = ::testing::UnitTest::GetInstance()->current_test_info();
    std::fprintf(stderr, "[rank %u] FAILED %s.%s at %s:%d\n%s\n", rank_, test ? test->test_suite_name() : "?",
                 test ? test->name() : "?", r.file_name() ? r.file_name() : "?", r.line_number(), r.summary());
  }

 private:
  unsigned rank_;
};
}  // namespace

int main(int argc, char** argv) {
  rdmx::Job job(argc, argv);
  ::testing::InitGoogleTest(&argc, argv);
  if (job.rank() != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new FailurePrinter(job.rank()));
  }
  int failed = RUN_ALL_TESTS() != 0 ? 1 : 0;
  std::vector<std::byte> mine{static_cast<std::byte>(failed)};
  int any = 0;
  for (auto& v : job.allgather(mine)) any |= static_cast<int>(v.at(0));
  if (job.rank() == 0) std::printf("[rdmx] %u processes: %s\n", job.size(), any ? "FAILED on some process" : "all passed");
  return failed || any ? 1 : 0;
}
