#include "rdmx/transfer/worker.hpp"

#include <poll.h>
#include <unistd.h>

#include <cstring>

#include "rdmx/transfer/context.hpp"
#include "rdmx/transfer/endpoint.hpp"
#include "rdmx/transfer/status.hpp"
#include "abandon.hpp"

namespace rdmx::transfer {

Worker::Worker(Context& context, Sharing sharing) : context_(&context) {
  ucp_worker_params_t params{};
  params.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  // SERIALIZED rather than SINGLE: a worker is created on the main thread
  // and then handed to the thread that owns it.
  params.thread_mode = sharing == Sharing::shared ? UCS_THREAD_MODE_MULTI : UCS_THREAD_MODE_SERIALIZED;
  check(ucp_worker_create(context.get(), &params, &handle_), "ucp_worker_create");
  ucp_address_t* address = nullptr;
  std::size_t length = 0;
  check(ucp_worker_get_address(handle_, &address, &length), "ucp_worker_get_address");
  address_.resize(length);
  std::memcpy(address_.data(), address, length);
  ucp_worker_release_address(handle_, address);
  if (ucp_worker_get_efd(handle_, &event_fd_) != UCS_OK) event_fd_ = -1;
}

Worker::~Worker() {
  if (handle_ == nullptr) return;
  // Debian's UCX 1.13 can abort in ucp_worker_destroy ("ucp_request.c:684
  // Assertion ... got REP message") when a peer died while UCX was wiring
  // up to it over TCP: it checks the type of each wire-up message it purges
  // (later UCX does not). After a peer failure the worker is therefore left
  // to the process's exit, kept reachable so that leak checkers do not
  // report it, and so is the context it needs (context.cpp).
  if (Endpoint::any_failed()) {
    detail::abandon_until_exit(handle_);
    return;
  }
  ucp_worker_destroy(handle_);
}

bool Worker::wait(int timeout_ms) {
  if (event_fd_ < 0) {  // transports without wake-up support: nap briefly, then poll again
    usleep(timeout_ms == 0 ? 0 : 100);
    return false;
  }
  ucs_status_t status = ucp_worker_arm(handle_);
  if (status == UCS_ERR_BUSY) return true;
  check(status, "ucp_worker_arm");
  pollfd fd{event_fd_, POLLIN, 0};
  return poll(&fd, 1, timeout_ms) > 0;
}

void Worker::signal() { ucp_worker_signal(handle_); }

}  // namespace rdmx::transfer
