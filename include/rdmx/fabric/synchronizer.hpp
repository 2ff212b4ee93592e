// Synchronizer: Seriema's per-call semaphore. Each call given a Synchronizer
// counts one operation up; the operation counts down when it has been sent
// (Notify::sent: the caller's buffers are reusable) or when the destination
// has executed it (Notify::consumed). wait() progresses the calling thread
// until nothing is left and rethrows the first failure (a dead peer, an
// unknown function, an exception thrown by the remote function ...).
#pragma once
#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>

#include "rdmx/core/error.hpp"

namespace rdmx {

enum class Notify { sent, consumed };

class Synchronizer {
 public:
  Synchronizer() = default;
  Synchronizer(const Synchronizer&) = delete;
  Synchronizer& operator=(const Synchronizer&) = delete;

  std::int64_t operations_left() const noexcept { return left_.load(std::memory_order_acquire); }
  void add(std::int64_t n = 1) noexcept { left_.fetch_add(n, std::memory_order_relaxed); }
  void notify() noexcept { left_.fetch_sub(1, std::memory_order_acq_rel); }
  // Counts the operation down and records why it failed (first failure wins).
  void fail(Errc code, std::string message);
  bool failed() const noexcept { return failed_.load(std::memory_order_acquire); }
  // The 8-byte count a remote process decrements with one RDMA atomic when
  // this Synchronizer lives in registered memory (invoke/remote_object.hpp).
  const void* counter() const noexcept { return &left_; }

  // Progress this thread until operations_left() == 0; throws the first failure.
  void wait();
  // Like wait() but gives up after `timeout_ms`; returns whether it finished.
  bool wait_for(int timeout_ms);

 private:
  void rethrow() const;
  std::atomic<std::int64_t> left_{0};
  std::atomic<bool> failed_{false};
  mutable std::mutex mutex_;
  Errc code_ = Errc::transport;
  std::string message_;
};

}  // namespace rdmx
