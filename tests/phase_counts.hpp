// Shared by the quiet() tests: after a phase of fire-and-forget calls, has
// each worker thread run exactly what every thread sent it?
#pragma once
#include <gtest/gtest.h>

#include <array>
#include <cstdint>

#include "rdmx/fabric/collective.hpp"
#include "rdmx/fabric/identity.hpp"

namespace rdmx::testing {

constexpr std::uint32_t max_workers = 16;
// made[w]: what the calling thread sent worker w (process * threads + thread) in the phase.
using Counts = std::array<std::uint64_t, max_workers>;

// A collective of every worker thread: sums everyone's `made` and checks that
// `ran`, what the calling thread ran in the phase, is what was sent to it;
// reports a test failure otherwise.
inline bool ran_what_was_sent(const Counts& made, std::uint64_t ran, ThreadId me, std::uint32_t threads, int phase) {
  const Counts total = rdmx::allreduce(made, [](Counts a, Counts b) {
    for (std::size_t i = 0; i < a.size(); ++i) a[i] += b[i];
    return a;
  });
  const std::uint64_t sent = total[me.process * threads + me.thread];
  if (ran == sent) return true;
  ADD_FAILURE() << "phase " << phase << ": thread " << to_string(me) << " ran " << ran << " calls, " << sent
                << " were sent to it";
  return false;
}

}  // namespace rdmx::testing
