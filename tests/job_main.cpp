// main() for multi-process GoogleTest binaries started through scripts/run:
// every process runs every test; rank 0 prints the report, the others only
// their failures (tagged with the rank), and the
// exit status is non-zero if any process had a failure.
#include <gtest/gtest.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

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

// The test each process is in, for the hang report below.
std::atomic<const ::testing::TestInfo*> running{nullptr};
class RunningTest : public ::testing::EmptyTestEventListener {
  void OnTestStart(const ::testing::TestInfo& test) override { running.store(&test); }
  void OnTestEnd(const ::testing::TestInfo&) override { running.store(nullptr); }
};

// TEST_STACKS_AFTER=S (the suite sets it a little under each test's
// timeout): a process still running after S seconds says which test it is
// in and prints every thread's stack through gdb, so that a hang seen once
// on a loaded machine leaves more behind than ctest's "Timeout". ctest's
// timeout then ends the job as before.
void report_hangs_after(unsigned rank) {
  const char* text = std::getenv("TEST_STACKS_AFTER");
  if (text == nullptr || *text == '\0') return;
  const long seconds = std::strtol(text, nullptr, 10);
  if (seconds <= 0) return;
  prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY);  // gdb, our child's child, may attach (Yama)
  std::thread([rank, seconds] {
    std::this_thread::sleep_for(std::chrono::seconds(seconds));
    const ::testing::TestInfo* test = running.load();
    std::fprintf(stderr, "[rank %u] still running after %ld s, in %s.%s; its threads' stacks:\n", rank, seconds,
                 test ? test->test_suite_name() : "(no test)", test ? test->name() : "");
    std::fflush(stderr);
    const std::string gdb = "gdb -nx -batch -p " + std::to_string(getpid()) +
                            " -ex 'thread apply all bt' </dev/null 1>&2 2>/dev/null";
    if (std::system(gdb.c_str()) != 0) std::fprintf(stderr, "[rank %u] (gdb could not print the stacks)\n", rank);
  }).detach();
}
}  // namespace

int main(int argc, char** argv) {
  rdmx::Job job(argc, argv);
  ::testing::InitGoogleTest(&argc, argv);
  ::testing::UnitTest::GetInstance()->listeners().Append(new RunningTest);
  report_hangs_after(job.rank());
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
