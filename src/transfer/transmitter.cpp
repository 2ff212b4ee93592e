#include "rdmx/transfer/transmitter.hpp"

#include <memory>

#include "rdmx/core/backoff.hpp"
#include "rdmx/core/env.hpp"
#include "rdmx/transfer/endpoint.hpp"
#include "rdmx/transfer/status.hpp"
#include "rdmx/transfer/worker.hpp"

namespace rdmx::transfer {
namespace {

unsigned default_u_max() {
  static const unsigned value = static_cast<unsigned>(env::get_count("RDMX_U_MAX", 64));  // at most 2^20
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

Transmitter::Transmitter(Endpoint& endpoint, unsigned u_max, ProgressHook progress)
    : endpoint_(&endpoint), ep_(endpoint.get()), u_max_(u_max != 0 ? u_max : default_u_max()), until_flush_(u_max_),
      hook_(progress) {
  if (u_max_ == 0) throw Error(Errc::invalid_argument, "u_max must be at least 1");
  if (hook_.fn == nullptr) hook_ = {[](void* w) { return static_cast<Worker*>(w)->progress(); }, &endpoint.worker()};
}

bool Transmitter::progress() {
  endpoint_->check_alive();
  return hook_();
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
  // No callback: done at once (shared memory copies inside the call), or a
  // request of UCX's own that is polled here and then freed.
  void* request = ucp_get_nbx(ep_, destination, length, source.address, source.rkey, &unsignaled_);
  if (request == nullptr) return;
  if (UCS_PTR_IS_ERR(request)) throw_status(UCS_PTR_STATUS(request), "get from " + endpoint_->peer_name());
  ucs_status_t status = UCS_INPROGRESS;
  try {
    Backoff backoff;
    while ((status = ucp_request_check_status(request)) == UCS_INPROGRESS) backoff(progress());
  } catch (...) {
    ucp_request_free(request);  // a failed endpoint: UCX completes it with an error and releases it
    throw;
  }
  ucp_request_free(request);
  if (status != UCS_OK) throw_status(status, "get from " + endpoint_->peer_name());
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
