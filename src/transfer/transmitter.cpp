#include "rdmx/transfer/transmitter.hpp"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>

#include "rdmx/core/backoff.hpp"
#include "settings.hpp"
#include "rdmx/transfer/endpoint.hpp"
#include "rdmx/transfer/status.hpp"
#include "rdmx/transfer/worker.hpp"

namespace rdmx::transfer {
namespace {

unsigned default_u_max() {
  static const unsigned value = static_cast<unsigned>(rdmx_transfer_settings.number("RDMX_U_MAX"));  // at most 2^20
  return value;
}

// Completion of a future-returning operation. Owned by UCX between issue and
// callback; `scratch` holds atomic operands that must outlive the call.
template <class T>
struct Pending {
  Promise<T> promise;
  std::uint64_t scratch = 0;
  std::uint64_t reply = 0;
  explicit Pending(ProgressHook hook) : promise(hook) {}
};

template <class T>
void complete(Pending<T>* op, ucs_status_t status, const char* what) {
  if (status != UCS_OK) {
    op->promise.set_error(errc_of(status), std::string(what) + " failed: " + ucs_status_string(status));
  } else if constexpr (std::is_void_v<T>) {
    op->promise.set_value();
  } else {
    op->promise.set_value(op->reply);
  }
}

// Issue `op` through `issue(param)`; resolve now or from UCX's callback.
template <class T, class Issue>
Future<T> issue_with_future(ProgressHook hook, const char* what, Issue&& issue) {
  auto op = std::make_unique<Pending<T>>(hook);
  Future<T> future = op->promise.get_future();
  ucp_request_param_t param{};
  param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
  param.cb.send = [](void* request, ucs_status_t status, void* user) {
    const detail::OutOfUcx visible;  // UCX calls this from progress (TSan builds)
    std::unique_ptr<Pending<T>> owned(static_cast<Pending<T>*>(user));
    complete(owned.get(), status, "one-sided operation");
    ucp_request_free(request);
  };
  param.user_data = op.get();
  void* result = issue(param, *op);
  if (UCS_PTR_IS_PTR(result)) {
    op.release();  // the callback owns it now
  } else {
    complete(op.get(), UCS_PTR_STATUS(result), what);
  }
  return future;
}

}  // namespace

Transmitter::Transmitter(Endpoint& endpoint, unsigned u_max, ProgressHook progress, ProgressHook transport)
    : endpoint_(&endpoint), ep_(endpoint.get()), u_max_(u_max != 0 ? u_max : default_u_max()), until_flush_(u_max_),
      hook_(progress), transport_(transport) {
  if (u_max_ == 0) throw Error(Errc::invalid_argument, "u_max must be at least 1");
  const ProgressHook worker{[](void* w) { return static_cast<Worker*>(w)->progress(); }, &endpoint.worker()};
  if (hook_.fn == nullptr) hook_ = worker;
  if (transport_.fn == nullptr) transport_ = worker;
}

bool Transmitter::progress() {
  endpoint_->check_alive();
  return hook_();
}

void Transmitter::wait_blocking(void* request, const char* what) {
  if (request == nullptr) return;
  if (UCS_PTR_IS_ERR(request)) throw_status(UCS_PTR_STATUS(request), what + std::string(" towards ") + endpoint_->peer_name());
  // No callback: a request of UCX's own, polled here and then freed.
  ucs_status_t status = UCS_INPROGRESS;
  Backoff backoff;
  while ((status = ucp_request_check_status(request)) == UCS_INPROGRESS) {
    if (endpoint_->failed()) [[unlikely]] {
      status = drain(request, what);
      break;
    }
    backoff(transport_());
  }
  ucp_request_free(request);
  endpoint_->check_alive();
  if (status != UCS_OK) throw_status(status, what + std::string(" towards ") + endpoint_->peer_name());
}

ucs_status_t Transmitter::drain(void* request, const char* what) {
  // The operation's buffers (an atomic's operand and reply live on the
  // caller's stack) stay UCX's until it completes, so the wait cannot just
  // end. UCX completes the requests of a peer whose connection is gone with
  // an error, at once over TCP when the process died; a failure only rdmx
  // knows of (a peer on this host seen gone) finds operations that either
  // complete or are failed by UCX soon after.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  ucs_status_t status = UCS_INPROGRESS;
  while ((status = ucp_request_check_status(request)) == UCS_INPROGRESS) {
    if (std::chrono::steady_clock::now() > deadline) {
      std::fprintf(stderr,
                   "rdmx: a blocking %s towards %s is still in flight 10 s after the peer failed; its buffers "
                   "cannot be given back, ending the process\n",
                   what, endpoint_->peer_name().c_str());
      std::abort();
    }
    if (!transport_()) std::this_thread::yield();
  }
  return status;
}

void Transmitter::not_immediate(void* status_ptr, const char* what) {
  if (UCS_PTR_IS_ERR(status_ptr)) throw_status(UCS_PTR_STATUS(status_ptr), std::string(what) + " to " + endpoint_->peer_name());
  ucp_request_free(status_ptr);  // completion is learnt from the epoch's flush
}

void Transmitter::flush_done(void* request, ucs_status_t status, void* self) {
  const detail::OutOfUcx visible;  // UCX calls this from progress (TSan builds)
  auto* tx = static_cast<Transmitter*>(self);
  // Flushes may complete in any order: when k have completed, one of them
  // closed an epoch >= k, so every epoch <= k is complete.
  if (status == UCS_OK) tx->epoch_.mark_completed(tx->flushes_done_.fetch_add(1, std::memory_order_acq_rel) + 1);
  if (request != nullptr) ucp_request_free(request);
}

void Transmitter::fence() {
  // UCX fences per worker (all its endpoints); on ordered transports
  // (shared memory, TCP) it costs next to nothing.
  const ucs_status_t status = ucp_worker_fence(endpoint_->worker().get());
  if (status != UCS_OK) throw_status(status, "fence towards " + endpoint_->peer_name());
}

void Transmitter::start_flush() {
  endpoint_->check_alive();
  epoch_.close();
  ucp_request_param_t param{};
  param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
  param.cb.send = &Transmitter::flush_done;
  param.user_data = this;
  void* request = ucp_ep_flush_nbx(endpoint_->get(), &param);
  if (UCS_PTR_IS_ERR(request)) throw_status(UCS_PTR_STATUS(request), "flush to " + endpoint_->peer_name());
  if (!UCS_PTR_IS_PTR(request)) flush_done(nullptr, UCS_OK, this);
}

void Transmitter::flush() {
  std::uint64_t target = epoch_.current();
  start_flush();
  while (epoch_.completed() < target) progress();
}

Future<void> Transmitter::put(const void* source, std::size_t length, RemoteAddress target) {
  endpoint_->check_alive();
  return issue_with_future<void>(hook_, "put", [&](ucp_request_param_t& param, Pending<void>&) {
    const detail::InsideUcx inside;  // as post_put: a put to this worker is copied inside the call
    return ucp_put_nbx(endpoint_->get(), source, length, target.address, target.rkey, &param);
  });
}

Future<void> Transmitter::get(void* destination, std::size_t length, RemoteAddress source) {
  endpoint_->check_alive();
  return issue_with_future<void>(hook_, "get", [&](ucp_request_param_t& param, Pending<void>&) {
    return ucp_get_nbx(endpoint_->get(), destination, length, source.address, source.rkey, &param);
  });
}

void Transmitter::blocking_get(void* destination, std::size_t length, RemoteAddress source) {
  endpoint_->check_alive();
  // Done at once over shared memory (UCX copies inside the call).
  wait_blocking(ucp_get_nbx(ep_, destination, length, source.address, source.rkey, &unsignaled_), "get");
}

std::uint64_t Transmitter::blocking_fetch_add(RemoteAddress target, std::uint64_t value) {
  endpoint_->check_alive();
  // The operand and the reply live on this stack until the wait returns.
  std::uint64_t operand = value, reply = 0;
  ucp_request_param_t param{};
  param.op_attr_mask = UCP_OP_ATTR_FIELD_DATATYPE | UCP_OP_ATTR_FIELD_REPLY_BUFFER;
  param.datatype = ucp_dt_make_contig(sizeof(std::uint64_t));
  param.reply_buffer = &reply;
  wait_blocking(ucp_atomic_op_nbx(ep_, UCP_ATOMIC_OP_ADD, &operand, 1, target.address, target.rkey, &param), "fetch_add");
  return reply;
}

std::uint64_t Transmitter::blocking_compare_swap(RemoteAddress target, std::uint64_t expected, std::uint64_t desired) {
  endpoint_->check_alive();
  std::uint64_t compare = expected, swap = desired;  // UCX: the old value comes back in `swap`
  ucp_request_param_t param{};
  param.op_attr_mask = UCP_OP_ATTR_FIELD_DATATYPE | UCP_OP_ATTR_FIELD_REPLY_BUFFER;
  param.datatype = ucp_dt_make_contig(sizeof(std::uint64_t));
  param.reply_buffer = &swap;
  wait_blocking(ucp_atomic_op_nbx(ep_, UCP_ATOMIC_OP_CSWAP, &compare, 1, target.address, target.rkey, &param),
                "compare_swap");
  return swap;
}

Future<std::uint64_t> Transmitter::fetch_add(RemoteAddress target, std::uint64_t value) {
  endpoint_->check_alive();
  return issue_with_future<std::uint64_t>(hook_, "fetch_add", [&](ucp_request_param_t& param, Pending<std::uint64_t>& op) {
    op.scratch = value;
    param.op_attr_mask |= UCP_OP_ATTR_FIELD_DATATYPE | UCP_OP_ATTR_FIELD_REPLY_BUFFER;
    param.datatype = ucp_dt_make_contig(sizeof(std::uint64_t));
    param.reply_buffer = &op.reply;
    return ucp_atomic_op_nbx(endpoint_->get(), UCP_ATOMIC_OP_ADD, &op.scratch, 1, target.address, target.rkey, &param);
  });
}

Future<std::uint64_t> Transmitter::compare_swap(RemoteAddress target, std::uint64_t expected, std::uint64_t desired) {
  endpoint_->check_alive();
  return issue_with_future<std::uint64_t>(hook_, "compare_swap", [&](ucp_request_param_t& param, Pending<std::uint64_t>& op) {
    op.scratch = expected;  // UCX: compare with `buffer`, swap in `reply_buffer`, old value returned there
    op.reply = desired;
    param.op_attr_mask |= UCP_OP_ATTR_FIELD_DATATYPE | UCP_OP_ATTR_FIELD_REPLY_BUFFER;
    param.datatype = ucp_dt_make_contig(sizeof(std::uint64_t));
    param.reply_buffer = &op.reply;
    return ucp_atomic_op_nbx(endpoint_->get(), UCP_ATOMIC_OP_CSWAP, &op.scratch, 1, target.address, target.rkey, &param);
  });
}

}  // namespace rdmx::transfer
