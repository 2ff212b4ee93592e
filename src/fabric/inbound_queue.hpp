// Private to the fabric: the calls a worker has received and not yet run.
// Receiving sits on every call's path and may happen while the thread
// serves a DSM page fault that interrupted malloc, so nothing here
// allocates in the common case; all of it is inline for the receive path.
#pragma once
#include <algorithm>
#include <array>
#include <atomic>
#include <cstddef>
#include <cstring>
#include <memory>
#include <span>
#include <utility>
#include <vector>

#include "rdmx/fabric/call.hpp"
#include "wire.hpp"

namespace rdmx::fabric {

// A call's captures: inline up to 64 bytes (most lambdas), on the heap
// beyond, so receiving a small call allocates nothing.
class Captures {
 public:
  void assign(const std::byte* first, const std::byte* last) {
    size_ = static_cast<std::size_t>(last - first);
    if (size_ <= inline_.size()) {
      if (size_ != 0) std::memcpy(inline_.data(), first, size_);
    } else {
      heap_.assign(first, last);
    }
  }
  const std::byte* data() const noexcept { return size_ <= inline_.size() ? inline_.data() : heap_.data(); }
  std::size_t size() const noexcept { return size_; }

 private:
  std::array<std::byte, 64> inline_;
  std::vector<std::byte> heap_;
  std::size_t size_ = 0;
};

// One received call, queued until its thread executes it (FIFO per thread).
struct InboundCall {
  CallHeader header{};
  Captures closure;
  std::vector<std::byte> owned_data;  // copied or rendezvous-received payload
  void* ucx_data = nullptr;           // payload UCX lent us (released after execution)
  std::size_t ucx_length = 0;
  std::shared_ptr<std::atomic<bool>> arrived;  // rendezvous payload still on its way when false
  std::span<std::byte> data() {
    if (ucx_data != nullptr) return {static_cast<std::byte*>(ucx_data), ucx_length};
    return {owned_data.data(), owned_data.size()};
  }
};

// The calls a thread has received and not yet run, in arrival order: a ring
// of slots that are reused. (A std::deque of these ~200-byte records
// allocated and freed a block every other call.) A slot keeps its payload
// buffer when its call leaves (swapped with the running call's), and every
// slot starts with receive_reserved_bytes of it: receiving a call allocates
// nothing while the ring has room and the payload fits (fabric/call.hpp).
// The DSM counts on it: a call may arrive while its thread serves a page
// fault that interrupted malloc.
class InboundQueue {
 public:
  InboundQueue() { grow(); }
  bool empty() const noexcept { return size_ == 0; }
  InboundCall& front() noexcept { return slots_[head_]; }
  void push_back(InboundCall&& r) { emplace_back() = std::move(r); }
  // A slot at the back, emptied, for the caller to fill in place: receiving
  // a call then builds it once instead of building and moving it.
  InboundCall& emplace_back() {
    if (size_ == slots_.size()) grow();
    InboundCall& r = slots_[(head_ + size_) & (slots_.size() - 1)];
    r.header = {};
    r.owned_data.clear();  // keeps its capacity
    r.ucx_data = nullptr;
    r.ucx_length = 0;
    ++size_;
    return r;
  }
  // The first call, swapped into `out`, whose buffers the slot keeps.
  void pop_front_into(InboundCall& out) noexcept {
    using std::swap;
    swap(out, slots_[head_]);
    head_ = (head_ + 1) & (slots_.size() - 1);
    --size_;
  }
  template <class F>
  void for_each(F&& f) {
    for (std::size_t i = 0; i < size_; ++i) f(slots_[(head_ + i) & (slots_.size() - 1)]);
  }

 private:
  void grow() {
    std::vector<InboundCall> bigger(std::max<std::size_t>(16, 2 * slots_.size()));  // a power of two
    for (std::size_t i = 0; i < size_; ++i) bigger[i] = std::move(slots_[(head_ + i) & (slots_.size() - 1)]);
    for (std::size_t i = size_; i < bigger.size(); ++i) bigger[i].owned_data.reserve(receive_reserved_bytes);
    slots_.swap(bigger);
    head_ = 0;
  }
  std::vector<InboundCall> slots_;
  std::size_t head_ = 0, size_ = 0;
};

}  // namespace rdmx::fabric
