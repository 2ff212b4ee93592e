// RmaVector and RmaValue inside a Job need no set-up: the Job provides
// their registered memory (the action layer installs it as RmaMemory's
// default source), an RmaMemory the program installs still overrides it,
// and a thread that is no worker of the job gets a clear error.
#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <numeric>
#include <string>
#include <thread>

#include "rdmx/action/action.hpp"
#include "rdmx/core/error.hpp"
#include "rdmx/fabric/job.hpp"
#include "rdmx/serial/rma_memory.hpp"
#include "rdmx/serial/rma_value.hpp"
#include "rdmx/serial/rma_vector.hpp"

using namespace rdmx;
using serial::RmaMemory;
using serial::RmaValue;
using serial::RmaVector;

namespace {

using Block = std::array<std::uint64_t, 16384>;  // 128 KiB: above the zero-copy threshold

RmaVector<std::uint64_t> doubled(RmaVector<std::uint64_t> v) {
  for (auto& x : v) x *= 2;
  return v;
}
std::uint64_t block_sum(RmaValue<Block> b) { return std::accumulate(b->begin(), b->end(), std::uint64_t{0}); }

ThreadId next(ThreadId me) { return ThreadId{(me.process + 1) % Job::current().size(), me.thread}; }

}  // namespace

TEST(RmaJob, VectorsAndObjectsNeedNoSetUp) {
  ASSERT_EQ(RmaMemory::process_default(), nullptr);
  Job::current().run([](ThreadId me) {
    RmaVector<std::uint64_t> v(std::size_t{1} << 16);  // 512 KiB, no RmaMemory named or installed
    std::iota(v.begin(), v.end(), std::uint64_t{1});
    EXPECT_NE(v.key().region, 0u);
    for (int i = 0; i < 1000; ++i) v.push_back(7);  // growing takes the same memory
    EXPECT_NE(v.key().region, 0u);
    RmaVector<std::uint64_t> back = async(action<&doubled>, next(me), v).get();
    ASSERT_EQ(back.size(), v.size());
    EXPECT_EQ(back[0], 2u);
    EXPECT_EQ(back[(std::size_t{1} << 16) - 1], std::uint64_t{2} << 16);
    EXPECT_EQ(back[back.size() - 1], 14u);
    EXPECT_EQ(v[0], 1u);  // the destination doubled its own copy

    auto block = RmaValue<Block>::make();
    std::iota(block->begin(), block->end(), std::uint64_t{0});
    EXPECT_NE(block.key().region, 0u);
    EXPECT_EQ(async(action<&block_sum>, next(me), block).get(), std::uint64_t{16383} * 16384 / 2);
  });
}

TEST(RmaJob, AnInstalledDefaultOverridesTheJobs) {
  // The thread that made the Job acts as worker 0 outside Job::run too.
  RmaMemory& jobs = RmaMemory::resolve(nullptr, "test");
  RmaMemory mine(Job::current().arena());
  RmaMemory named(Job::current().arena());
  RmaMemory::set_process_default(&mine);
  Job::current().run([&](ThreadId) {
    EXPECT_EQ(&RmaMemory::resolve(nullptr, "test"), &mine);
    EXPECT_EQ(&RmaMemory::resolve(&named, "test"), &named);  // a container's own memory comes first
  });
  RmaMemory::set_process_default(nullptr);
  EXPECT_EQ(&RmaMemory::resolve(nullptr, "test"), &jobs);
}

TEST(RmaJob, AThreadOutsideTheJobIsToldWhy) {
  std::string what;
  std::thread outsider([&] {
    try {
      RmaVector<int> v(10);
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), Errc::invalid_argument);
      what = e.what();
    }
  });
  outsider.join();
  EXPECT_NE(what.find("worker thread of a Job"), std::string::npos) << what;
}
