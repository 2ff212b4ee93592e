// Synchronizer: Seriema's per-call semaphore. Each call given one (through
// rdmx::when_sent or rdmx::when_run, fabric/completion.hpp) counts one
// operation up; the operation counts down when it has been sent (the
// caller's buffers are reusable) or when the destination has run it.
// wait() progresses the calling thread until nothing is left and rethrows
// the first failure (a dead peer, an unknown function, an exception thrown
// by the remote function ...).
#pragma once
#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "rdmx/core/error.hpp"

namespace rdmx {

class Synchronizer {
 public:
  Synchronizer() = default;
  Synchronizer(const Synchronizer&) = delete;
  Synchronizer& operator=(const Synchronizer&) = delete;

  std::int64_t operations_left() const noexcept { return left_.load(std::memory_order_acquire); }
  void add(std::int64_t n = 1) noexcept { left_.fetch_add(n, std::memory_order_relaxed); }
  void notify() noexcept {
    // Read before counting down: the last count down may let a waiter
    // destroy this Synchronizer (one with a hook has no waiter).
    const auto done = on_done_.load(std::memory_order_relaxed);
    void* const arg = on_done_arg_.load(std::memory_order_relaxed);
    if (left_.fetch_sub(1, std::memory_order_acq_rel) == 1 && done != nullptr) done(*this, arg);
  }
  // Counts the operation down and records why it failed (first failure wins).
  void fail(Errc code, std::string message);
  bool failed() const noexcept { return failed_.load(std::memory_order_acquire); }
  // The 8-byte count a remote process decrements with one RDMA atomic when
  // this Synchronizer lives in registered memory (invoke/remote_object.hpp).
  const void* counter() const noexcept { return &left_; }
  // `process` will answer by RDMA atomic on counter(). Such answers bypass
  // the caller's bookkeeping, so should `process` fail while operations are
  // left, wait() cannot tell which answers it still owed: it fails instead
  // of waiting for ever.
  void expect_rdma_answer_from(std::uint32_t process);

  // The first failure's code and text (once failed()).
  Errc error_code() const;
  std::string error_message() const;
  // `done(*this, arg)` runs, on the thread that counts it down, each time
  // operations_left() drops to 0: for an operation whose completion is
  // pushed elsewhere (a future's state). It may destroy the Synchronizer.
  void on_done(void (*done)(Synchronizer&, void*), void* arg) noexcept {
    on_done_arg_.store(arg, std::memory_order_relaxed);
    on_done_.store(done, std::memory_order_relaxed);
  }

  // Progress this thread until operations_left() == 0; throws the first failure.
  void wait();
  // The same, yielding the core after `idle_spins` idle polls instead of the
  // process's setting (Backoff): for a wait on work that another process's
  // thread does on this machine's CPUs (an offloaded computation), which
  // may be waiting for this very core.
  void wait(unsigned idle_spins);
  // Like wait() but gives up after `timeout_ms`; returns whether it finished.
  bool wait_for(int timeout_ms);

 private:
  void rethrow() const;
  // Throws peer_failed if a process that answers by RDMA atomic has failed.
  void check_rdma_answerers();
  std::atomic<std::int64_t> left_{0};
  std::atomic<void (*)(Synchronizer&, void*)> on_done_{nullptr};
  std::atomic<void*> on_done_arg_{nullptr};
  std::atomic<bool> failed_{false};
  mutable std::mutex mutex_;
  Errc code_ = Errc::transport;
  std::string message_;
  // Processes answering by RDMA atomic: processes below 64 by bit, the rest listed.
  std::atomic<std::uint64_t> rdma_answerers_{0};
  std::vector<std::uint32_t> more_rdma_answerers_;  // under mutex_
  std::atomic<bool> has_more_rdma_answerers_{false};
};

}  // namespace rdmx
