#include "rdmx/fabric/synchronizer.hpp"

#include <chrono>

#include "rdmx/core/backoff.hpp"
#include "rdmx/fabric/job.hpp"
#include "runtime.hpp"

namespace rdmx {

void Synchronizer::fail(Errc code, std::string message) {
  {
    std::lock_guard lock(mutex_);
    if (!failed_.load(std::memory_order_relaxed)) {
      code_ = code;
      message_ = std::move(message);
      failed_.store(true, std::memory_order_release);
    }
  }
  notify();
}

void Synchronizer::rethrow() const {
  std::lock_guard lock(mutex_);
  throw Error(code_, message_);
}

Errc Synchronizer::error_code() const {
  std::lock_guard lock(mutex_);
  return code_;
}

std::string Synchronizer::error_message() const {
  std::lock_guard lock(mutex_);
  return message_;
}

void Synchronizer::expect_rdma_answer_from(std::uint32_t process) {
  if (process < 64) {
    const std::uint64_t bit = std::uint64_t{1} << process;
    if ((rdma_answerers_.load(std::memory_order_relaxed) & bit) == 0) rdma_answerers_.fetch_or(bit, std::memory_order_relaxed);
    return;
  }
  std::lock_guard lock(mutex_);
  for (std::uint32_t p : more_rdma_answerers_)
    if (p == process) return;
  more_rdma_answerers_.push_back(process);
  has_more_rdma_answerers_.store(true, std::memory_order_release);
}

void Synchronizer::check_rdma_answerers() {
  std::uint64_t mask = rdma_answerers_.load(std::memory_order_relaxed);
  const bool more = has_more_rdma_answerers_.load(std::memory_order_acquire);
  if (mask == 0 && !more) return;
  auto& rt = fabric::Runtime::current();
  auto check = [&](std::uint32_t p) {
    if (!rt.process_failed(p)) return;
    std::string why = rt.failure_of(p) + " (it owed this Synchronizer answers by RDMA atomic)";
    {
      std::lock_guard lock(mutex_);
      if (!failed_.load(std::memory_order_relaxed)) {
        code_ = Errc::peer_failed;
        message_ = std::move(why);
        failed_.store(true, std::memory_order_release);
      }
    }
    rethrow();
  };
  for (; mask != 0; mask &= mask - 1) check(static_cast<std::uint32_t>(__builtin_ctzll(mask)));
  if (more) {
    std::vector<std::uint32_t> listed;
    {
      std::lock_guard lock(mutex_);
      listed = more_rdma_answerers_;
    }
    for (std::uint32_t p : listed) check(p);
  }
}

void Synchronizer::wait() { wait(Backoff::idle_spins()); }

void Synchronizer::wait(unsigned idle_spins) {
  Backoff backoff(idle_spins);
  while (operations_left() > 0) {
    const bool busy = progress() != 0;
    // The poll that completes the wait often runs no call (a send-based
    // reply only completes a count), so it looks idle: backing off after it
    // gave the core away, when threads outnumber cores, at the one moment
    // this thread has work again, once per round trip.
    if (operations_left() == 0) break;
    if (!busy) check_rdma_answerers();
    backoff(busy);
  }
  if (failed()) rethrow();
}

bool Synchronizer::wait_for(int timeout_ms) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  Backoff backoff;
  while (operations_left() > 0) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    const bool busy = progress() != 0;
    if (operations_left() == 0) break;  // no back-off once complete (wait above)
    if (!busy) check_rdma_answerers();
    backoff(busy);
  }
  if (failed()) rethrow();
  return true;
}

}  // namespace rdmx
