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
  // GoogleTest reports a part result while holding the UnitTest's mutex, so
  // asking it for the current test here would deadlock: remember it instead.
  void OnTestStart(const ::testing::TestInfo& test) override { test_ = &test; }
  void OnTestEnd(const ::testing::TestInfo&) override { test_ = nullptr; }
  void OnTestPartResult(const ::testing::TestPartResult& r) override {
    if (!r.failed()) return;
    std::fprintf(stderr, "[rank %u] FAILED %s.%s at %s:%d\n%s\n", rank_, test_ ? test_->test_suite_name() : "?",
                 test_ ? test_->name() : "?", r.file_name() ? r.file_name() : "?", r.line_number(), r.summary());
  }

 private:
  unsigned rank_;
  const ::testing::TestInfo* test_ = nullptr;
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
