// Shared helpers of the DSM tests.
#pragma once
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

#include "rdmx/fabric/job.hpp"

namespace dsm_test {

inline rdmx::Job& job() { return rdmx::Job::current(); }

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
