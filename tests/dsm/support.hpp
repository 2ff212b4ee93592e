// Shared helpers of the DSM tests.
#pragma once
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <vector>

#include "rdmx/dsm/space.hpp"
#include "rdmx/fabric/job.hpp"

namespace dsm_test {

inline rdmx::Job& job() { return rdmx::Job::current(); }

// The Space the tests of a binary share: made by the first test that asks
// (every process runs the same tests, so all construct it together), and
// destroyed after the last test, before the Job.
inline std::unique_ptr<rdmx::dsm::Space> the_space;
inline rdmx::dsm::Space& space() {
  if (!the_space) the_space = std::make_unique<rdmx::dsm::Space>(job());
  return *the_space;
}
class SpaceEnvironment : public ::testing::Environment {
 public:
  void TearDown() override { the_space.reset(); }
};
inline const auto* const space_environment = ::testing::AddGlobalTestEnvironment(new SpaceEnvironment);

template <class T>
std::vector<T> gather(const T& mine) {
  std::vector<T> out;
  for (const auto& bytes : job().allgather(std::as_bytes(std::span(&mine, 1)))) {
    T v;
    std::memcpy(&v, bytes.data(), sizeof v);
    out.push_back(v);
  }
  return out;
}

}  // namespace dsm_test
