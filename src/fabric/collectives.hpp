// Private to the fabric: the process's state of the worker collectives
// (rdmx/fabric/collective.hpp), kept by the Runtime and worked by
// collective.cpp.
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <span>
#include <vector>

#include "rdmx/fabric/collective.hpp"

namespace rdmx::fabric::detail {

// The root's open accumulators (process 0), released results waiting for
// this process's threads, and each worker's count of collectives.
class Collectives {
 public:
  explicit Collectives(std::uint32_t workers) : epochs_(workers, 0) {}
  std::uint64_t& epoch_of(std::uint32_t worker) { return epochs_.at(worker); }
  void fold(const Ticket& ticket, std::span<const std::byte> value, Combine combine);
  void release(std::uint64_t epoch, bool mismatch, std::span<const std::byte> result);
  // Copies collective `epoch`'s result once released (false before); the
  // last of `waiters` threads to take it frees it. Throws when the threads
  // met in different collectives.
  bool take(std::uint64_t epoch, std::span<std::byte> result, std::uint32_t waiters, const char* what);

 private:
  struct Open {
    std::uint32_t arrived = 0;
    std::vector<std::byte> acc;
    Combine combine = nullptr;
  };
  struct Released {
    bool mismatch = false;
    std::vector<std::byte> bytes;
    std::uint32_t taken = 0;
  };
  std::mutex mutex_;
  std::map<std::uint64_t, Open> open_;
  std::map<std::uint64_t, Released> released_;
  // The latest epoch released here: a waiter polls this, not the mutex
  // (a server waiting in a barrier checks once per progress round). Epochs
  // are released in order: one starts only after every thread took the last.
  std::atomic<std::uint64_t> released_up_to_{0};
  std::vector<std::uint64_t> epochs_;
};

}  // namespace rdmx::fabric::detail
