// The send-based call path: sending, receiving, executing and replying.
#include <cstdio>
#include <cstring>

#include "rdmx/core/log.hpp"
#include "rdmx/transfer/status.hpp"
#include "rdmx/core/tsan.hpp"
#include "runtime.hpp"

namespace rdmx::fabric {
namespace {

// Header buffers must outlive ucp_am_send_nbx until it completes (UCX 1.13
// does not copy them), so they come from a per-thread pool.
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

Error make_error(std::uint32_t code, std::span<const std::byte> text) {
  return Error(static_cast<Errc>(code - 1), std::string(reinterpret_cast<const char*>(text.data()), text.size()));
}

}  // namespace

// ---- PendingReplies ----

void PendingReplies::Waiter::finish(const Error* failure, std::span<const std::byte> bytes) const {
  if (failure != nullptr) return sync->fail(failure->code(), failure->what());
  if (result != nullptr) {
    if (bytes.size() != result_size)
      return sync->fail(Errc::protocol, "call_return: the reply has " + std::to_string(bytes.size()) + " bytes, expected " +
                                            std::to_string(result_size));
    std::memcpy(result, bytes.data(), result_size);
  }
  sync->notify();
}

TokenTable<PendingReplies::Entry>::Added PendingReplies::take_entry(std::uint32_t dest_process, std::int64_t replies) {
  if (!failed_.empty()) {
    auto dead = dest_process == ~0u ? failed_.begin() : failed_.find(dest_process);
    if (dead != failed_.end()) throw Error(Errc::peer_failed, dead->second);
  }
  auto added = entries_.add();
  added.value.dest_process = dest_process;
  added.value.replies = replies;
  return added;
}

std::uint64_t PendingReplies::add(std::uint32_t dest_process, std::int64_t replies, Waiter waiter) {
  std::lock_guard lock(mutex_);
  auto added = take_entry(dest_process, replies);
  added.value.waiter = waiter;
  return added.token;
}

std::uint64_t PendingReplies::add(std::uint32_t dest_process, std::int64_t replies, Completion done) {
  std::lock_guard lock(mutex_);
  auto added = take_entry(dest_process, replies);
  added.value.done = std::move(done);
  return added.token;
}

void PendingReplies::complete(std::uint64_t token, const Error* failure, std::span<const std::byte> result) {
  Entry done;
  {
    std::lock_guard lock(mutex_);
    Entry* e = entries_.find(token);
    if (e == nullptr) {
      rdmx::log(rdmx::LogLevel::warn, "ignoring a reply with an unknown token %#llx\n", static_cast<unsigned long long>(token));
      return;
    }
    if (failure == nullptr && --e->replies > 0) return;
    done.waiter = e->waiter;
    done.done = std::move(e->done);
    entries_.erase(token);
  }
  done.finish(failure, result);
}

void PendingReplies::cancel(std::uint64_t token) {
  std::lock_guard lock(mutex_);
  entries_.erase(token);
}

void PendingReplies::fail_process(std::uint32_t process, const std::string& why) {
  std::vector<Entry> failed;
  {
    std::lock_guard lock(mutex_);
    failed_.emplace(process, why);
    entries_.for_each([&](std::uint64_t token, Entry& e) {
      if (e.dest_process != process && e.dest_process != ~0u) return;
      failed.push_back(std::move(e));
      entries_.erase(token);
    });
  }
  Error error(Errc::peer_failed, why);
  for (const Entry& e : failed) e.finish(&error, {});
}

// ---- sending ----

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
  transfer::Endpoint& ep = endpoint(destination.process, runtime_.slot_of(destination.thread));
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
    ep = &endpoint(destination.process, runtime_.slot_of(destination.thread));
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

// Count the call on its Synchronizer and, for Notify::consumed, register the
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

void broadcast_call(const Outgoing& c) {
  Runtime& rt = Runtime::current();
  // The root of the tree is this process's service thread; every worker
  // thread of the job acknowledges.
  issue(c, ThreadId{rt.rank(), service_thread}, CallKind::broadcast, ~0u, std::int64_t{rt.size()} * rt.threads());
}

// ---- receiving ----

ucs_status_t ThreadContext::on_call(void* arg, const void* header, std::size_t header_length, void* data,
                                    std::size_t length, const ucp_am_recv_param_t* param) {
  const transfer::detail::OutOfUcx visible;  // UCX calls this from progress (TSan builds)
  auto* self = static_cast<ThreadContext*>(arg);
  CallHeader h{};
  if (header_length < sizeof h) {
    self->runtime_.report_dropped(h, "a call header of " + std::to_string(header_length) + " bytes is truncated");
    return UCS_OK;
  }
  std::memcpy(&h, header, sizeof h);
  if (h.version != wire_version || header_length != sizeof h + h.closure_size) {
    self->runtime_.report_dropped(h, "malformed call header (version " + std::to_string(h.version) + ", " +
                                         std::to_string(header_length) + " bytes)");
    return UCS_OK;
  }
  const bool for_me = h.kind == CallKind::broadcast ? self->id_.is_service() : h.destination_thread == self->id_.thread;
  if (!for_me) {
    self->runtime_.report_dropped(h, "delivered to " + to_string(self->id_) + " but addressed to thread " +
                                         std::to_string(h.destination_thread));
    return UCS_OK;
  }
  // Filled in place: built once, not built and then moved into the queue.
  InboundCall& r = self->ready_.emplace_back();
  r.header = h;
  auto* closure = static_cast<const std::byte*>(header) + sizeof h;
  r.closure.assign(closure, closure + h.closure_size);
  ucs_status_t status = UCS_OK;
  if (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) {
    r.owned_data.resize(length);
    r.arrived = std::make_shared<std::atomic<bool>>(false);
    ucp_request_param_t p{};
    p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
    p.cb.recv_am = [](void* request, ucs_status_t, std::size_t, void* user) {
      const transfer::detail::OutOfUcx visible;  // UCX calls this from progress (TSan builds)
      auto* flag = static_cast<std::shared_ptr<std::atomic<bool>>*>(user);
      (*flag)->store(true, std::memory_order_release);
      delete flag;
      ucp_request_free(request);
    };
    auto* flag = new std::shared_ptr<std::atomic<bool>>(r.arrived);
    p.user_data = flag;
    void* request = ucp_am_recv_data_nbx(self->worker_.get(), data, r.owned_data.data(), length, &p);
    if (!UCS_PTR_IS_PTR(request)) {
      delete flag;
      r.arrived->store(true, std::memory_order_release);
    }
  } else if (length == 0) {
    // Nothing to keep (the captures travel in the header): holding UCX's
    // buffer would cost a retained descriptor and a release per call.
  } else if (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_DATA) {
    r.ucx_data = data;  // keep UCX's buffer until the call has run
    r.ucx_length = length;
    status = UCS_INPROGRESS;
  } else {
    auto* bytes = static_cast<const std::byte*>(data);
    r.owned_data.assign(bytes, bytes + length);
  }
  return status;
}

ucs_status_t ThreadContext::on_reply(void* arg, const void* header, std::size_t header_length, void* data,
                                     std::size_t length, const ucp_am_recv_param_t* param) {
  const transfer::detail::OutOfUcx visible;  // UCX calls this from progress (TSan builds)
  auto* self = static_cast<ThreadContext*>(arg);
  ReplyHeader h{};
  if (header_length != sizeof h) {
    rdmx::log(rdmx::LogLevel::error, "%s: dropping a malformed reply\n", to_string(self->id_).c_str());
    return UCS_OK;
  }
  std::memcpy(&h, header, sizeof h);
  if (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) {
    // A large result comes by rendezvous: fetch it, then complete.
    struct Fetch {
      ThreadContext* self;
      ReplyHeader h;
      std::vector<std::byte> bytes;
    };
    auto* fetch = new Fetch{self, h, std::vector<std::byte>(length)};
    ucp_request_param_t p{};
    p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
    p.cb.recv_am = [](void* request, ucs_status_t status, std::size_t, void* user) {
      const transfer::detail::OutOfUcx visible;  // UCX calls this from progress (TSan builds)
      std::unique_ptr<Fetch> f(static_cast<Fetch*>(user));
      f->self->complete_reply(f->h, status, f->bytes);
      ucp_request_free(request);
    };
    p.user_data = fetch;
    void* request = ucp_am_recv_data_nbx(self->worker_.get(), data, fetch->bytes.data(), length, &p);
    if (!UCS_PTR_IS_PTR(request)) {
      std::unique_ptr<Fetch> f(fetch);
      self->complete_reply(h, UCS_PTR_STATUS(request), f->bytes);
    }
    return UCS_OK;
  }
  self->complete_reply(h, UCS_OK, std::span(static_cast<const std::byte*>(data), length));
  return UCS_OK;
}

void ThreadContext::complete_reply(ReplyHeader h, ucs_status_t status, std::span<const std::byte> bytes) {
  message_received();
  if (status != UCS_OK) {
    Error failure(transfer::errc_of(status), std::string("receiving a reply failed: ") + ucs_status_string(status));
    return runtime_.pending().complete(h.token, &failure, {});
  }
  if (h.error != 0) {
    if (h.error - 1 > static_cast<std::uint32_t>(Errc::remote_exception)) h.error = 1 + static_cast<std::uint32_t>(Errc::protocol);
    Error failure = make_error(h.error, bytes);
    runtime_.pending().complete(h.token, &failure, {});
  } else {
    runtime_.pending().complete(h.token, nullptr, bytes);
  }
}

void ThreadContext::deliver(InboundCall call) {
  {
    std::lock_guard lock(inbox_mutex_);
    inbox_.push_back(std::move(call));
  }
  inbox_nonempty_.store(true, std::memory_order_release);
}

namespace {
struct ReplyState {
  bool replied = false;
  Captures result;  // inline up to 64 bytes: a small call_return result allocates nothing
};
}  // namespace

void ThreadContext::execute(InboundCall& r) {
  message_received();
  const CallHeader& h = r.header;
  const ThreadId source{h.source_process, h.source_thread};
  // UCX lent us its receive buffer (UCS_INPROGRESS); give it back on every path.
  struct Release {
    ucp_worker_h worker;
    InboundCall& r;
    ~Release() {
      if (r.ucx_data != nullptr) ucp_am_data_release(worker, r.ucx_data);
      r.ucx_data = nullptr;
    }
  } release{worker_.get(), r};
  if (h.kind == CallKind::broadcast && id_.is_service()) {
    // Forward down the binomial tree rooted at the originating process, then
    // hand a copy to every local worker thread.
    const std::uint32_t n = runtime_.size();
    const std::uint32_t relative = (id_.process + n - h.source_process) % n;
    for (std::uint32_t step = 1; step < n; step <<= 1) {
      if (relative < step && relative + step < n) {
        Outgoing o;
        o.function = h.function;
        o.closure = r.closure.data();
        o.closure_size = r.closure.size();
        o.data = r.data();
        ThreadId child{(h.source_process + relative + step) % n, service_thread};
        try {
          forward_broadcast(o, h, child);
        } catch (const Error& e) {
          runtime_.report_dropped(h, std::string("broadcast forwarding failed: ") + e.what());
        }
      }
    }
    for (std::uint32_t t = 0; t < runtime_.threads(); ++t) {
      InboundCall copy;
      copy.header = h;
      copy.closure = r.closure;
      auto d = r.data();
      copy.owned_data.assign(d.begin(), d.end());
      runtime_.context(t).deliver(std::move(copy));
    }
    return;
  }
  Invoker invoker = FunctionRegistry::instance().find_cached(h.function);
  std::optional<Error> failure;
  ReplyState state;
  if (invoker == nullptr) {
    char id[32];
    std::snprintf(id, sizeof id, "%#llx", static_cast<unsigned long long>(h.function));
    failure.emplace(Errc::unknown_function, "process " + std::to_string(id_.process) + " has no function with id " + id +
                                                " (was the caller built from the same program?)");
  } else {
    Incoming in;
    in.function = h.function;
    in.source = source;
    in.closure = r.closure.data();
    in.closure_size = r.closure.size();
    in.data = r.data();
    in.runtime = &state;
    in.reply = [](Incoming& call, const void* result, std::size_t size) {
      auto* st = static_cast<ReplyState*>(call.runtime);
      st->replied = true;
      st->result.assign(static_cast<const std::byte*>(result), static_cast<const std::byte*>(result) + size);
    };
    try {
      invoker(in);
    } catch (const Error& e) {
      failure.emplace(e.code() == Errc::unknown_function ? Errc::remote_exception : e.code(), e.what());
    } catch (const std::exception& e) {
      failure.emplace(Errc::remote_exception, "remote function threw " + type_name(typeid(e)) + ": " + e.what());
    } catch (...) {
      failure.emplace(Errc::remote_exception, "remote function threw a non-standard exception");
    }
  }
  if (h.token != 0) {
    if (failure)
      send_reply(source, h.token, &*failure, {});
    else
      send_reply(source, h.token, nullptr,
                 state.replied ? std::span<const std::byte>(state.result.data(), state.result.size()) : std::span<const std::byte>());
  } else if (failure) {
    runtime_.report_dropped(h, failure->what());
  }
}

bool ThreadContext::poll(std::size_t* executed) {
  // A bounded batch of UCX progress, then run what it delivered. Draining UCX
  // completely first let a receiver that fell behind a fast sender ingest an
  // ever longer backlog (holding UCX's buffers) that it never worked off; one
  // round at a time (16 shared-memory FIFO elements) let sender and receiver
  // fall into lockstep one FIFO slot apart, every message a cross-core cache
  // miss. Four rounds free a whole FIFO (64 elements) per batch. See
  // docs/fabric.md, "Measured". Without shared memory (TCP) a round is an
  // epoll_wait system call, and the round after the one that brought a
  // reply put one more on every round trip: one round there.
  // The layers first, UCX last: a send-based reply (or call) that UCX
  // delivers is then acted on at once, and a waiter sees its completion
  // without a pass over the layers in between (most of an idle poll once
  // one-sided calls are in use; docs/results/latency.md).
  std::size_t n = id_.is_service() ? 0 : runtime_.poll_layers(id_.thread);
  bool active = false;
  for (int round = 0; round < progress_rounds_ && worker_.progress(); ++round) active = true;
  if (stood_in_for != nullptr && stood_in_for != this) [[unlikely]]
    active = stood_in_for->receive_only() || active;
  if (inbox_nonempty_.load(std::memory_order_acquire)) {
    std::lock_guard lock(inbox_mutex_);
    for (auto& r : inbox_) ready_.push_back(std::move(r));
    inbox_.clear();
    inbox_nonempty_.store(false, std::memory_order_relaxed);
  }
  while (!ready_.empty()) {
    InboundCall& front = ready_.front();
    if (front.arrived && !front.arrived->load(std::memory_order_acquire)) break;  // FIFO: wait for its payload
    if (running_depth_ == running_.size()) running_.emplace_back();  // a new nesting level: once
    InboundCall& r = running_[running_depth_];
    ready_.pop_front_into(r);
    struct Level {
      ThreadContext& self;
      InboundCall& r;
      ~Level() {
        r.arrived.reset();  // here, not when the slot is refilled (maybe inside a fault)
        --self.running_depth_;
      }
    } level{*this, r};
    ++running_depth_;
    execute(r);
    ++n;
  }
  if (executed != nullptr) *executed = n;
  if (runtime_.host_failures() != probe_.checked) [[unlikely]]
    check_receive_path(!active && n == 0);
  if (stand_in_home != nullptr && stand_in_home != this) [[unlikely]] {
    // A thread standing in for this worker (the service thread, or one
    // waiting in a collective) waits inside one of its calls: the thread's
    // own duties (service calls, and over TCP the RMA that targets the
    // service worker; its own calls) must go on meanwhile, or two processes
    // doing the same wait for each other.
    ThreadContext* const home = std::exchange(stand_in_home, nullptr);
    ThreadContext* const acting = current_context;
    set_current_context(home);
    // Only this thread moves the worker it stands in for (it holds its
    // driver), and a call of the home's may wait for sends to that worker
    // (a relayed call's acknowledgement to a thread of this process, say):
    // the home's waits keep its receives going.
    // Restored on a throw too: Runtime::serve_worker reports a call's error
    // and goes on, and a stale pointer would have later polls receive for a
    // worker whose driver this thread no longer holds.
    struct Restore {
      ThreadContext* saved;
      ~Restore() { stood_in_for = saved; }
    } restore{std::exchange(stood_in_for, acting)};
    active = home->poll(nullptr) || active;
    set_current_context(acting);
    stand_in_home = home;
  }
  return active || n > 0;
}

void ThreadContext::check_receive_path(bool idle) {
  // A process on this host failed. If it died between reserving an element
  // of this worker's shared-memory FIFO and marking it ready (UCX 1.13: one
  // FIFO per receiving worker, shared by every sender on the host), nothing
  // sent to this worker over shared memory arrives again, and a wait for an
  // answer from a live process would never end. Ask a live process on this
  // host for an answer; if none comes in RDMX_RECEIVE_PROBE_MS, fail every
  // process on this host from this process's point of view, so every wait
  // on them ends with an error that says why.
  const std::uint32_t failures = runtime_.host_failures();
  const auto now = std::chrono::steady_clock::now();
  if (probe_.answer == nullptr) {
    if (runtime_.receive_probe_ms() == 0 || runtime_.shutting_down()) {
      probe_.checked = failures;
      return;
    }
    std::uint32_t peer = runtime_.size();
    for (std::uint32_t p = 0; p < runtime_.size() && peer == runtime_.size(); ++p)
      if (p != id_.process && runtime_.same_host(p) && !runtime_.process_failed(p)) peer = p;
    if (peer == runtime_.size()) {  // nobody left on this host to hear from
      probe_.checked = failures;
      return;
    }
    auto answer = std::make_shared<std::atomic<int>>(0);
    static constexpr auto nothing = [] {};
    const Outgoing probe = outgoing<CallWrapper>(ThreadId{peer, service_thread}, CallKind::call, nothing, nullptr, Notify::consumed);
    try {
      probe_.token = runtime_.pending().add(peer, 1, [answer](const Error* failure, std::span<const std::byte>) {
        answer->store(failure == nullptr ? 1 : 2, std::memory_order_release);
      });
      send(probe, probe_.token, probe.destination, CallKind::call);
    } catch (const Error&) {  // the peer failed meanwhile: the next poll asks another
      if (probe_.token != 0) runtime_.pending().cancel(probe_.token);
      probe_.token = 0;
      return;
    }
    probe_.answer = std::move(answer);
    probe_.peer = peer;
    probe_.checking = failures;
    probe_.deadline = now + std::chrono::milliseconds(runtime_.receive_probe_ms());
    return;
  }
  const int answer = probe_.answer->load(std::memory_order_acquire);
  if (answer == 1) probe_.checked = probe_.checking;  // answers arrive; check again after a later failure
  if (answer == 0) {
    // Judge only after an idle poll: then nothing that had arrived is
    // still waiting to be read, however long this thread was away.
    if (now < probe_.deadline || !idle) return;
    runtime_.pending().cancel(probe_.token);
    const std::string why = "worker " + to_string(id_) + " has had no answer from process " + std::to_string(probe_.peer) +
                            " for " + std::to_string(runtime_.receive_probe_ms()) +
                            " ms since a process on this host failed: its shared-memory receive queue is blocked "
                            "(UCX 1.13: a process killed in the middle of a send blocks the queue of the worker it "
                            "sent to), so no process on this host can reach it";
    probe_.checked = failures;
    for (std::uint32_t p = 0; p < runtime_.size(); ++p)
      if (p != id_.process && runtime_.same_host(p)) runtime_.peer_failed(p, "process " + std::to_string(p) + " is unreachable: " + why);
  }
  probe_.answer.reset();
  probe_.token = 0;
}

std::size_t ThreadContext::progress() {
  std::size_t n = 0;
  poll(&n);
  return n;
}

}  // namespace rdmx::fabric
