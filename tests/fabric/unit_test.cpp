// Single-process tests of fabric pieces that need no peers.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <pthread.h>
#include <sched.h>
#include <unistd.h>

#include <vector>

#include "rdmx/core/env.hpp"
#include "rdmx/fabric/call.hpp"
#include "rdmx/fabric/function_registry.hpp"
#include "rdmx/fabric/job.hpp"

using namespace rdmx;

TEST(Layout, ParsesAndRejects) {
  Layout l = Layout::parse("2x4x8", "test");
  EXPECT_EQ(l.machines, 2u);
  EXPECT_EQ(l.processes_per_machine, 4u);
  EXPECT_EQ(l.threads_per_process, 8u);
  EXPECT_EQ(l.to_string(), "2x4x8");
  for (const char* bad : {"", "2x4", "0x1x1", "2x4x8x", "axbxc", "2*4*8"}) {
    try {
      Layout::parse(bad, "RDMX_LAYOUT");
      FAIL() << "accepted " << bad;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), Errc::invalid_argument);
      EXPECT_NE(std::string(e.what()).find("RDMX_LAYOUT"), std::string::npos);
    }
  }
}

TEST(Env, ParsesSizes) {
  EXPECT_EQ(env::parse_size("4096", "x"), 4096u);
  EXPECT_EQ(env::parse_size("64K", "x"), 65536u);
  EXPECT_EQ(env::parse_size("2M", "x"), 2u << 20);
  EXPECT_EQ(env::parse_size("1GB", "x"), 1ull << 30);
  EXPECT_THROW(env::parse_size("12Q", "x"), Error);
  EXPECT_THROW(env::parse_size("lots", "x"), Error);
  EXPECT_THROW(env::parse_size("-1", "x"), Error);
  EXPECT_EQ(env::parse_count("12", "x"), 12u);
  for (const char* bad : {"0", "-3", "4K", "two", ""}) EXPECT_THROW(env::parse_count(bad, "x"), Error) << bad;
}

TEST(FunctionRegistry, DistinctLambdasGetDistinctIds) {
  auto a = [] {};
  auto b = [x = 1] { (void)x; };
  auto ida = fabric::FunctionId<fabric::CallWrapper<decltype(a)>>::value;
  auto idb = fabric::FunctionId<fabric::CallWrapper<decltype(b)>>::value;
  EXPECT_NE(ida, idb);
  EXPECT_NE(fabric::FunctionRegistry::instance().find(ida), nullptr);
  EXPECT_EQ(fabric::FunctionRegistry::instance().find(0x1234), nullptr);
}

// Without a launcher a program is a one-process job that can call itself.
TEST(SingleProcessJob, CallsItself) {
  Job job;
  EXPECT_EQ(job.size(), 1u);
  EXPECT_EQ(job.launcher(), "none");
  static int hits = 0;
  Synchronizer sync;
  call(ThreadId{0, 0}, [] { ++hits; }, when_run(sync));
  sync.wait();
  EXPECT_EQ(hits, 1);
  EXPECT_THROW(call(ThreadId{1, 0}, [] {}), Error);
  // One NUMA zone here (or unpinned): the zone is not meaningful.
  EXPECT_EQ(job.numa_zone(0), -1);
  EXPECT_THROW(job.numa_zone(5), Error);
  job.barrier();
}

// The cores left beyond the job's worker and helper threads on this machine.
TEST(SingleProcessJob, CountsSpareCores) {
  Job job;
  const long cores = sysconf(_SC_NPROCESSORS_ONLN);
  const long threads = job.workers_per_process();
  EXPECT_EQ(static_cast<long>(job.spare_cores()), std::max(0L, cores - threads)) << cores << " cores, " << threads << " threads";
  EXPECT_EQ(job.oversubscribed(), threads > cores);
}

// RDMX_PIN=on really binds a worker thread to one core's CPUs.
TEST(Placement, PinnedWorkerThreadRunsOnOneCore) {
  const long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  if (cpus < 2) GTEST_SKIP() << "one CPU: nothing to pin to";
  auto cpus_allowed = [] {
    cpu_set_t set;
    CPU_ZERO(&set);
    EXPECT_EQ(pthread_getaffinity_np(pthread_self(), sizeof set, &set), 0);
    return CPU_COUNT(&set);
  };
  const int before = cpus_allowed();
  {
    JobOptions options;
    options.pin = "on";
    Job job(options);
    EXPECT_GE(cpus_allowed(), 1);
    EXPECT_LT(cpus_allowed(), cpus) << "thread 0 should be bound to one core";
    EXPECT_NE(job.describe().find("threads pinned"), std::string::npos) << job.describe();
  }
  EXPECT_EQ(cpus_allowed(), before) << "the thread's affinity comes back when the Job ends";
}

TEST(Placement, BadPinValueIsRejected) {
  JobOptions options;
  options.pin = "sometimes";
  try {
    Job job(options);
    FAIL() << "accepted RDMX_PIN=sometimes";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::invalid_argument);
    EXPECT_NE(std::string(e.what()).find("RDMX_PIN"), std::string::npos);
  }
}

TEST(Placement, BadHelperCountsAreRejected) {
  JobOptions options;
  options.threads = 1;
  options.helpers = 2;  // more helpers than worker threads
  try {
    Job job(options);
    FAIL() << "accepted 2 helpers for 1 thread";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::invalid_argument);
    EXPECT_NE(std::string(e.what()).find("RDMX_HELPERS"), std::string::npos) << e.what();
  }
  ::setenv("RDMX_HELPERS", "some", 1);
  try {
    Job job;
    FAIL() << "accepted RDMX_HELPERS=some";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("RDMX_HELPERS"), std::string::npos) << e.what();
  }
  ::unsetenv("RDMX_HELPERS");
}

TEST(SingleProcessJob, PayloadLargerThanTheMaximumIsRejected) {
  JobOptions options;
  options.max_message = 1024;
  Job job(options);
  std::vector<std::byte> big(2048), fits(1024);
  static int runs = 0;
  Synchronizer sync;
  try {
    call_buffer(ThreadId{0, 0}, [](std::span<std::byte>) { ++runs; }, big, when_run(sync));
    FAIL() << "a 2048-byte payload passed a 1024-byte maximum";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::message_too_large);
    EXPECT_NE(std::string(e.what()).find("RDMX_MAX_MESSAGE"), std::string::npos) << e.what();
  }
  EXPECT_EQ(sync.operations_left(), 0);
  call_buffer(ThreadId{0, 0}, [](std::span<std::byte> b) { runs += b.size() == 1024 ? 1 : 100; }, fits, when_run(sync));
  sync.wait();
  EXPECT_EQ(runs, 1);
}
