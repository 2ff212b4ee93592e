// For tests that call every worker thread of the job: threads by one global
// index (process * threads + thread), and how many calls a load test makes.
#pragma once
#include <cstdint>

#include "rdmx/fabric/job.hpp"

namespace rdmx::test {
inline Job& job() { return Job::current(); }
inline std::uint32_t global(ThreadId t) { return t.process * job().threads_per_process() + t.thread; }
inline ThreadId thread_at(std::uint32_t g) { return {g / job().threads_per_process(), g % job().threads_per_process()}; }
// Calls per sender and destination in the load tests (fewer under TSan, which is ~20x slower).
#if defined(__SANITIZE_THREAD__)
constexpr std::uint64_t load_calls = 2000;
#else
constexpr std::uint64_t load_calls = 20000;
#endif
}  // namespace rdmx::test
