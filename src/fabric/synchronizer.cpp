#include "rdmx/fabric/synchronizer.hpp"

#include <chrono>

#include "rdmx/core/backoff.hpp"
#include "rdmx/fabric/job.hpp"

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

void Synchronizer::wait() {
  Backoff backoff;
  while (operations_left() > 0) backoff(progress() != 0);
  if (failed()) rethrow();
}

bool Synchronizer::wait_for(int timeout_ms) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  Backoff backoff;
  while (operations_left() > 0) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    backoff(progress() != 0);
  }
  if (failed()) rethrow();
  return true;
}

}  // namespace rdmx
