// transfer::Worker: one ucp_worker_h, the seed's per-thread communication
// context (a queue pair's CQ in verbs terms). Owned by one thread unless made
// shared (UCS_THREAD_MODE_MULTI), then UCX serializes access itself.
#pragma once
#include <ucp/api/ucp.h>

#include <cstddef>
#include <vector>

#include "rdmx/transfer/detail/ucx_opaque.hpp"

namespace rdmx::transfer {

class Context;

class Worker {
 public:
  enum class Sharing { single_thread, shared };
  Worker(Context& context, Sharing sharing = Sharing::single_thread);
  ~Worker();
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  ucp_worker_h get() const noexcept { return handle_; }
  Context& context() const noexcept { return *context_; }
  // The packed address peers need to create endpoints to this worker.
  const std::vector<std::byte>& address() const noexcept { return address_; }

  // Drive UCX: returns true when something happened.
  bool progress() {
    const detail::InsideUcx inside;  // TSan builds: UCX's own copies are not checked
    return ucp_worker_progress(handle_) != 0;
  }
  // Block until there is work or `timeout_ms` passes (-1: forever); returns
  // whether it woke for work. Progress must have been drained before calling.
  bool wait(int timeout_ms);
  // Make a blocked wait() return early (any thread).
  void signal();

 private:
  Context* context_;
  ucp_worker_h handle_ = nullptr;
  std::vector<std::byte> address_;
  int event_fd_ = -1;
};

}  // namespace rdmx::transfer
