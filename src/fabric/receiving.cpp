// Receiving send-based calls and replies (the UCX active-message
// handlers), running received calls in order on their thread, and the poll
// every wait of the job goes through. A worker's poll also checks, after a
// process on its host failed, that answers still reach it.
#include <chrono>
#include <cstdio>
#include <cstring>
#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "rdmx/core/log.hpp"
#include "rdmx/core/tsan.hpp"
#include "rdmx/transfer/status.hpp"
#include "runtime.hpp"

namespace rdmx::fabric {
namespace {

Error make_error(std::uint32_t code, std::span<const std::byte> text) {
  return Error(static_cast<Errc>(code - 1), std::string(reinterpret_cast<const char*>(text.data()), text.size()));
}

}  // namespace

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
  // docs/results/fabric.md. Without shared memory (TCP) a round is an
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
  if (!flushed_.empty()) [[unlikely]]
    settle_flushed();
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
    Outgoing probe = outgoing<CallWrapper>(ThreadId{peer, service_thread}, CallKind::call, nothing, Completion{});
    probe.notify = Notify::consumed;  // answered through the token below
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

void ThreadContext::settle_flushed() {
  while (!flushed_.empty()) {
    Flushed& f = flushed_.front();
    if (f.tag.is_free()) {
      f.sync->notify();
    } else if (runtime_.process_failed(f.process)) {  // its flush may never complete
      f.sync->fail(Errc::peer_failed, runtime_.failure_of(f.process) + "; a one-sided operation towards it did not complete");
    } else {
      if (f.tag.value >= f.tag.epoch->current()) f.tx->start_flush();  // its epoch is still open: close it
      return;
    }
    flushed_.pop_front();
  }
}

std::size_t ThreadContext::progress() {
  std::size_t n = 0;
  poll(&n);
  return n;
}

}  // namespace rdmx::fabric
