// Seriema 4.1's flush number. Operations are issued unsignaled; every u_max
// operations one flush is issued and, when it completes, every operation
// issued before it is complete. A buffer used by an operation carries the
// EpochTag read just *after* that operation was issued, and is reusable once
// completed() has reached the tag: one atomic load frees any number of
// buffers. Issuing and tagging are wait-free for threads sharing an endpoint.
#pragma once
#include <atomic>
#include <cstdint>

namespace rdmx::transfer {

class FlushEpoch {
 public:
  // Epoch that operations issued now belong to.
  std::uint64_t current() const noexcept { return current_.load(std::memory_order_acquire); }
  // Every operation tagged <= completed() has completed remotely.
  std::uint64_t completed() const noexcept { return completed_.load(std::memory_order_acquire); }
  // Close the current epoch; returns its number (the caller then issues a flush for it).
  std::uint64_t close() noexcept { return current_.fetch_add(1, std::memory_order_acq_rel); }
  // The flush for `epoch` completed.
  void mark_completed(std::uint64_t epoch) noexcept {
    std::uint64_t seen = completed_.load(std::memory_order_relaxed);
    while (seen < epoch && !completed_.compare_exchange_weak(seen, epoch, std::memory_order_acq_rel)) {
    }
  }

 private:
  std::atomic<std::uint64_t> current_{1};
  std::atomic<std::uint64_t> completed_{0};
};

struct EpochTag {
  const FlushEpoch* epoch = nullptr;
  std::uint64_t value = 0;
  bool is_free() const noexcept { return epoch == nullptr || epoch->completed() >= value; }
};

}  // namespace rdmx::transfer
