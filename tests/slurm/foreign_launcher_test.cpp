// Bootstrap::create in a process that a launcher started without PMIx:
// a clear error, never a job of one process per task.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "../error_from.hpp"
#include "rdmx/fabric/bootstrap.hpp"

namespace rdmx::fabric {
namespace {

// Sets the variables for one test and removes them after it, so that each
// test sees only its own launcher.
class Env : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* v : kAll) unsetenv(v);
  }
  void TearDown() override {
    for (const char* v : kAll) unsetenv(v);
  }
  static void set(const char* name, const char* value) { setenv(name, value, 1); }
  static constexpr const char* kAll[] = {"PMIX_NAMESPACE", "PMI_FD", "PMI_PORT", "PMI_RANK",
                                          "PMI_SIZE", "SLURM_STEP_NUM_TASKS"};
};

TEST_F(Env, NoLauncherIsAOneProcessJob) {
  auto boot = Bootstrap::create();
  EXPECT_EQ(boot->size(), 1u);
  EXPECT_EQ(boot->launcher(), "none");
}

TEST_F(Env, OneSrunTaskIsAOneProcessJob) {
  set("SLURM_STEP_NUM_TASKS", "1");
  EXPECT_EQ(Bootstrap::create()->size(), 1u);
}

// What srun --mpi=pmi2 gives every task.
TEST_F(Env, Pmi2IsRefusedWithWhatToUseInstead) {
  set("PMI_FD", "11");
  set("PMI_RANK", "0");
  set("PMI_SIZE", "2");
  set("SLURM_STEP_NUM_TASKS", "2");
  Error e = testing::error_from([] { Bootstrap::create(); });
  EXPECT_EQ(e.code(), Errc::bootstrap);
  EXPECT_NE(std::string(e.what()).find("PMIx only: use srun --mpi=pmix"), std::string::npos) << e.what();
}

// MPICH's Hydra (PMI-1 over a port).
TEST_F(Env, Pmi1IsRefused) {
  set("PMI_PORT", "host:1234");
  set("PMI_RANK", "1");
  set("PMI_SIZE", "4");
  EXPECT_EQ(testing::error_from([] { Bootstrap::create(); }).code(), Errc::bootstrap);
}

// A PMI descriptor without a size: the job's size is unknown, so it is not
// taken for one.
TEST_F(Env, PmiWithoutASizeIsRefused) {
  set("PMI_FD", "5");
  EXPECT_EQ(testing::error_from([] { Bootstrap::create(); }).code(), Errc::bootstrap);
}

// srun --mpi=pmi2 -n 1: nothing to exchange with anyone.
TEST_F(Env, OnePmiTaskIsAOneProcessJob) {
  set("PMI_FD", "11");
  set("PMI_RANK", "0");
  set("PMI_SIZE", "1");
  set("SLURM_STEP_NUM_TASKS", "1");
  EXPECT_EQ(Bootstrap::create()->size(), 1u);
}

// What srun --mpi=none gives: task numbers and nothing to exchange through.
TEST_F(Env, SrunWithoutPmiIsRefused) {
  set("SLURM_STEP_NUM_TASKS", "3");
  Error e = testing::error_from([] { Bootstrap::create(); });
  EXPECT_EQ(e.code(), Errc::bootstrap);
  EXPECT_NE(std::string(e.what()).find("one of 3 tasks without PMIx"), std::string::npos) << e.what();
}

}  // namespace
}  // namespace rdmx::fabric
