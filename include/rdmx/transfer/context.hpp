// transfer::Context: the process's one UCX context (ucp_context_h). Memory is
// registered against it; every Worker is created from it.
#pragma once
#include <ucp/api/ucp.h>

namespace rdmx::transfer {

class Context {
 public:
  Context();  // features: RMA, 32/64-bit atomics, active messages, wakeup
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  ucp_context_h get() const noexcept { return handle_; }
  // Whether UCX may reach processes of this machine through shared memory
  // (a posix, sysv or xpmem transport is enabled: UCX_TLS allows one).
  bool shared_memory() const noexcept { return shared_memory_; }

 private:
  ucp_context_h handle_ = nullptr;
  bool shared_memory_ = false;
};

}  // namespace rdmx::transfer
