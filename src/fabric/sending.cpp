// Sending send-based calls and replies as UCX active messages: the
// per-thread pool of header buffers both use (UCX 1.13 does not copy an
// active message's header), the flow control that bounds what UCX queues,
// and the call family's entry points (send_call, broadcast_call).
// Receiving and running them is receiving.cpp's job.
#include <atomic>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "rdmx/core/log.hpp"
#include "rdmx/core/tsan.hpp"
#include "rdmx/transfer/status.hpp"
#include "runtime.hpp"

namespace rdmx::fabric {
namespace {

// What a send needs until UCX completes it: what to notify, and the header
// bytes (UCX 1.13 does not copy an active message's header). Recycled
// through a per-thread pool, so a send allocates nothing.
struct SendBuffer {
  static constexpr std::size_t capacity = 4096 + sizeof(CallHeader);
  Synchronizer* sync = nullptr;       // counted down when sent, if set
  std::atomic<bool>* done = nullptr;  // set when sent, if set
  ThreadContext* queued_on = nullptr;  // counted in this context's queued sends (flow control)
  std::uint32_t process = 0;           // to this process
  std::vector<std::byte> large;       // a reply too large for bytes (a big call_return result)
  alignas(8) std::byte bytes[capacity];
};

struct SendPool {
  std::vector<std::unique_ptr<SendBuffer>> free;
  std::unique_ptr<SendBuffer> take() {
    if (free.empty()) return std::make_unique_for_overwrite<SendBuffer>();
    auto b = std::move(free.back());
    free.pop_back();
    return b;
  }
  void give(std::unique_ptr<SendBuffer> b) {
    std::vector<std::byte>().swap(b->large);  // pooled buffers stay small
    if (free.size() < 256) free.push_back(std::move(b));
  }
};
thread_local SendPool send_pool;

std::unique_ptr<SendBuffer> take_send_buffer() {
  auto b = send_pool.take();
  b->sync = nullptr;
  b->done = nullptr;
  b->queued_on = nullptr;
  return b;
}

// Flow control: a thread with this many sends queued inside UCX progresses
// (serving its own incoming calls) until fewer are queued, so a sender far
// faster than its receiver holds bounded memory in UCX's pending queues.
constexpr std::size_t max_queued_sends = 64;

void finish_send(std::unique_ptr<SendBuffer> buffer, ucs_status_t status) {
  if (buffer->sync != nullptr) {
    if (status == UCS_OK)
      buffer->sync->notify();
    else
      buffer->sync->fail(transfer::errc_of(status), std::string("send failed: ") + ucs_status_string(status));
  }
  if (buffer->done != nullptr) buffer->done->store(true, std::memory_order_release);
  if (buffer->queued_on != nullptr) buffer->queued_on->send_left(buffer->process);
  send_pool.give(std::move(buffer));
}

void send_completed(void* request, ucs_status_t status, void* user) {
  const transfer::detail::OutOfUcx visible;  // UCX calls this from progress (TSan builds)
  finish_send(std::unique_ptr<SendBuffer>(static_cast<SendBuffer*>(user)), status);
  ucp_request_free(request);
}


}  // namespace

void ThreadContext::send(const Outgoing& c, std::uint64_t token, ThreadId destination, CallKind kind) {
  CallHeader header{};
  header.function = c.function;
  header.token = token;
  header.source_process = id_.process;
  header.source_thread = id_.thread;
  header.destination_thread = destination.thread;
  header.kind = kind;
  header.version = wire_version;
  message_sent();
  transmit(header, c, destination);
}

void ThreadContext::forward_broadcast(const Outgoing& c, const CallHeader& original, ThreadId child) {
  CallHeader header = original;  // the originator stays the source: acknowledgements go straight to it
  header.destination_thread = service_thread;
  message_sent();
  transmit(header, c, child);
}

void ThreadContext::transmit(CallHeader header, const Outgoing& c, ThreadId destination) {
  if (c.closure_size > runtime_.max_closure())
    throw Error(Errc::message_too_large, "a call's captures take " + std::to_string(c.closure_size) +
                                             " bytes; the limit is " + std::to_string(runtime_.max_closure()) +
                                             " (pass bulk data with call_buffer)");
  if (c.data.size() > runtime_.max_message())
    throw Error(Errc::message_too_large, "call_buffer payload of " + std::to_string(c.data.size()) +
                                             " bytes exceeds the maximum of " + std::to_string(runtime_.max_message()) +
                                             " (RDMX_MAX_MESSAGE)");
  transfer::Endpoint& ep = endpoint(destination.process, runtime_.worker_of(destination.thread));
  header.closure_size = static_cast<std::uint16_t>(c.closure_size);
  auto record = take_send_buffer();
  std::memcpy(record->bytes, &header, sizeof header);
  if (c.closure_size != 0) std::memcpy(record->bytes + sizeof header, c.closure, c.closure_size);
  if (c.sync != nullptr && c.notify == Notify::sent) record->sync = c.sync;
  // A payload sent without a Synchronizer must be reusable when we return.
  std::atomic<bool> done{false};
  const bool wait_here = !c.data.empty() && c.sync == nullptr;
  if (wait_here) record->done = &done;

  ucp_request_param_t param{};
  param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
  param.cb.send = &send_completed;
  param.user_data = record.get();
  void* request = ucp_am_send_nbx(ep.get(), am_call, record->bytes, sizeof header + c.closure_size,
                                  c.data.data(), c.data.size(), &param);
  if (UCS_PTR_IS_ERR(request)) {
    send_pool.give(std::move(record));
    transfer::throw_status(UCS_PTR_STATUS(request), "call to " + to_string(destination));
  }
  if (!UCS_PTR_IS_PTR(request)) {
    finish_send(std::move(record), UCS_OK);
    return;
  }
  // Only this thread runs a non-shared worker's callbacks, and only inside
  // progress: counting after the send returned cannot race with completion.
  if (!shared_) {
    record->queued_on = this;
    record->process = destination.process;
    ++queued_to_[destination.process];
    if (!written_off_[destination.process]) ++queued_sends_;
  }
  SendBuffer* const sent = record.release();  // owned by the completion callback now
  if (!shared_)
    while (queued_sends_ > max_queued_sends) {
      ep.check_alive();
      progress();
      write_off_failed();  // sends queued to a process that died never leave
    }
  if (wait_here) {
    while (!done.load(std::memory_order_acquire)) {
      ep.check_alive();
      // A peer on this host that died is seen by its pid, not by its
      // endpoint: the send may never complete. Nothing is waited for any
      // more (this thread alone runs the callback); UCX drops the request
      // when the endpoint closes, and until then a payload to a dead
      // process has no reader.
      if (!shared_ && runtime_.process_failed(destination.process)) {
        sent->done = nullptr;
        throw Error(Errc::peer_failed, "call to " + to_string(destination) + ": " + runtime_.failure_of(destination.process));
      }
      if (shared_ && current_context == this) {
        // The service thread itself, forwarding a broadcast's payload: it is
        // the one that progresses this worker. Only UCX's progress, not
        // poll(): running calls here would re-enter the call being executed.
        if (!worker_.progress()) std::this_thread::yield();
      } else if (shared_) {
        worker_.signal();
        std::this_thread::yield();
      } else {
        progress();
      }
    }
  }
}

void ThreadContext::send_reply(ThreadId destination, std::uint64_t token, const Error* failure,
                               std::span<const std::byte> result) {
  std::string text;
  ReplyHeader header{token, 0, 0};
  message_sent();
  if (failure != nullptr) {
    header.error = 1 + static_cast<std::uint32_t>(failure->code());
    text = failure->what();
    result = std::as_bytes(std::span(text));
  }
  transfer::Endpoint* ep = nullptr;
  try {
    ep = &endpoint(destination.process, runtime_.worker_of(destination.thread));
  } catch (const Error& e) {
    rdmx::log(rdmx::LogLevel::error, "%s: cannot reply to %s: %s\n", to_string(id_).c_str(), to_string(destination).c_str(), e.what());
    return;
  }
  auto record = take_send_buffer();
  std::memcpy(record->bytes, &header, sizeof header);
  // Replies are usually small: copy them next to the header; a large one
  // (a big call_return result) gets a buffer of its own.
  const std::size_t length = result.size();
  std::byte* data = record->bytes + sizeof header;
  if (length > SendBuffer::capacity - sizeof header) {
    record->large.assign(result.begin(), result.end());
    data = record->large.data();
  } else if (length != 0) {
    std::memcpy(data, result.data(), length);
  }
  ucp_request_param_t param{};
  param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
  param.cb.send = &send_completed;
  param.user_data = record.get();
  void* request = ucp_am_send_nbx(ep->get(), am_reply, record->bytes, sizeof header, data, length, &param);
  if (UCS_PTR_IS_PTR(request)) {
    record.release();
  } else {
    send_pool.give(std::move(record));
    if (UCS_PTR_IS_ERR(request))
      rdmx::log(rdmx::LogLevel::error, "reply to %s failed: %s\n", to_string(destination).c_str(),
                   ucs_status_string(UCS_PTR_STATUS(request)));
  }
}

namespace {

// Count the call on its Synchronizer and, for when_run, register the
// reply(ies) it waits for; undo both if sending throws.
void issue(const Outgoing& c, ThreadId destination, CallKind kind, std::uint32_t reply_process, std::int64_t replies) {
  Runtime& rt = Runtime::current();
  ThreadContext& ctx = rt.calling_context();
  std::uint64_t token = 0;
  if (c.sync != nullptr) c.sync->add();
  try {
    if (c.sync != nullptr && c.notify == Notify::consumed)
      token = rt.pending().add(reply_process, replies, PendingReplies::Waiter{c.sync, c.result, c.result_size});
    ctx.send(c, token, destination, kind);
  } catch (...) {
    if (c.sync != nullptr) c.sync->add(-1);
    if (token != 0) rt.pending().cancel(token);
    throw;
  }
}

}  // namespace

bool ThreadContext::send_would_wait() {
  if (shared_ || queued_sends_ < max_queued_sends) return false;
  write_off_failed();
  return queued_sends_ >= max_queued_sends;
}

void ThreadContext::flush_sends() {
  if (shared_) return;  // not counted: its sends are not this thread's alone
  write_off_failed();
  while (queued_sends_ != 0) {
    progress();
    write_off_failed();
  }
}

void flush_sends() { Runtime::current().calling_context().flush_sends(); }

void ThreadContext::send_left(std::uint32_t process) noexcept {
  --queued_to_[process];
  if (!written_off_[process]) --queued_sends_;
}

void ThreadContext::write_off_failed() {
  const std::uint32_t failures = runtime_.failure_count();
  if (failures == failures_seen_) [[likely]]
    return;
  failures_seen_ = failures;
  for (std::uint32_t p = 0; p < runtime_.size(); ++p)
    if (!written_off_[p] && runtime_.process_failed(p)) {
      written_off_[p] = true;
      queued_sends_ -= queued_to_[p];
    }
}

bool send_would_wait() { return Runtime::current().calling_context().send_would_wait(); }

void send_call(const Outgoing& c) {
  Runtime::current().validate(c.destination);
  issue(c, c.destination, c.kind, c.destination.process, 1);
}

std::size_t max_captures() { return Runtime::current().max_closure(); }

void broadcast_call(const Outgoing& c) {
  Runtime& rt = Runtime::current();
  // The root of the tree is this process's service thread; every worker
  // thread of the job acknowledges.
  issue(c, ThreadId{rt.rank(), service_thread}, CallKind::broadcast, ~0u, std::int64_t{rt.size()} * rt.threads());
}

}  // namespace rdmx::fabric
