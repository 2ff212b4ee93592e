// ThreadContext: a worker thread's UCX worker, endpoints and transmitters
// (sending lives in sending.cpp, receiving and polling in receiving.cpp).
#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <thread>
#include <utility>

#include "rdmx/core/backoff.hpp"
#include "rdmx/core/env.hpp"
#include "rdmx/core/error.hpp"
#include "rdmx/core/log.hpp"
#include "rdmx/fabric/call.hpp"
#include "rdmx/fabric/job.hpp"
#include "rdmx/transfer/status.hpp"
#include "runtime.hpp"

namespace rdmx::fabric {

thread_local ThreadContext* current_context = nullptr;
thread_local ThreadContext* stand_in_home = nullptr;
thread_local ThreadContext* stood_in_for = nullptr;

// ---- ThreadContext ----

ThreadContext::ThreadContext(Runtime& runtime, std::uint32_t worker, transfer::Worker::Sharing sharing)
    : runtime_(runtime),
      id_{runtime.rank(), worker == runtime.workers() ? service_thread : worker},
      shared_(sharing == transfer::Worker::Sharing::shared),
      progress_rounds_(runtime.context().shared_memory() ? 4 : 1),
      queued_to_(runtime.size(), 0),
      written_off_(runtime.size(), false),
      worker_(runtime.context(), sharing),
      // Sized once here: threads sharing the service context look endpoints up
      // without the lock, so the vector itself must never change.
      endpoint_index_(std::size_t{runtime.size()} * runtime.contexts()) {
  for (auto [id, handler] : {std::pair{am_call, &ThreadContext::on_call}, std::pair{am_reply, &ThreadContext::on_reply}}) {
    ucp_am_handler_param_t p{};
    p.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB | UCP_AM_HANDLER_PARAM_FIELD_ARG |
                   UCP_AM_HANDLER_PARAM_FIELD_FLAGS;
    p.id = id;
    p.cb = handler;
    p.arg = this;
    p.flags = UCP_AM_FLAG_PERSISTENT_DATA;
    transfer::check(ucp_worker_set_am_recv_handler(worker_.get(), &p), "ucp_worker_set_am_recv_handler");
  }
}

ThreadContext::~ThreadContext() {
  ready_.for_each([this](InboundCall& r) {
    if (r.ucx_data != nullptr) ucp_am_data_release(worker_.get(), r.ucx_data);
    r.ucx_data = nullptr;
  });
  transmitters_.clear();
  endpoints_.clear();
}

transfer::Endpoint& ThreadContext::endpoint(std::uint32_t process, std::uint32_t worker) {
  if (runtime_.process_failed(process))
    throw Error(Errc::peer_failed, "process " + std::to_string(process) + " has failed");
  std::size_t index = std::size_t{process} * runtime_.contexts() + worker;
  transfer::Endpoint* ep = endpoint_index_[index].load(std::memory_order_acquire);
  if (ep == nullptr) {
    std::lock_guard lock(endpoints_mutex_);
    ep = endpoint_index_[index].load(std::memory_order_acquire);
    if (ep == nullptr) {
      ThreadId peer{process, worker == runtime_.workers() ? service_thread : worker};
      // A process of this machine is watched through /proc (liveness.cpp):
      // asking UCX to detect its failure would only keep shared memory out.
      // The own worker cannot fail apart from us; asking for detection there
      // would keep out UCX's loopback (`self`) as well, and a call to the own
      // thread would cross the TCP stack. Only there: TCP endpoints between
      // two workers of one process that ask for no detection make UCX 1.13
      // crash now and then (in uct_tcp_iface_progress).
      const bool own_worker = process == runtime_.rank() && worker == runtime_.worker_of(id_.thread);
      const bool watched_here = own_worker || (runtime_.same_host(process) && runtime_.context().shared_memory());
      const auto watch = watched_here ? transfer::Endpoint::Watch::owner : transfer::Endpoint::Watch::transport;
      auto connect = [&] {
        return std::make_unique<transfer::Endpoint>(worker_, runtime_.worker_address(process, worker),
                                                     "thread " + rdmx::to_string(peer), watch);
      };
      std::unique_ptr<transfer::Endpoint> owned;
      try {
        owned = connect();
        // An endpoint that cannot detect failures has only shared-memory
        // lanes (UCX 1.13). To another host that is no way at all: real
        // hosts get "unreachable", but namespace hosts share a boot id, so
        // UCX connects and what is sent never arrives. It happens, rarely,
        // right after a namespace host's link comes back: try again briefly
        // for a TCP lane, then say so rather than hang.
        for (int attempt = 0; !owned->detects_failure() && !runtime_.same_host(process); ++attempt) {
          if (attempt == 20)
            throw Error(Errc::transport, "cannot reach thread " + rdmx::to_string(peer) + " on another host (" +
                                             runtime_.hostname_of(process) +
                                             "): UCX found only shared-memory transports to it, which do not "
                                             "cross hosts (check UCX_TLS and the network)");
          owned.reset();
          std::this_thread::sleep_for(std::chrono::milliseconds(50));
          owned = connect();
          if (owned->detects_failure())
            rdmx::log(rdmx::LogLevel::warn, "thread %s on another host was reachable only by shared memory; "
                      "reached it over the network at attempt %d\n", rdmx::to_string(peer).c_str(), attempt + 2);
        }
      } catch (const Error& e) {
        // Over shared memory, connecting to a process that died fails in
        // UCX (its segments are gone): that is the peer's failure. Over TCP
        // a process that is ending refuses the connection (unreachable)
        // before /proc says it is gone: name the process there too.
        if (runtime_.gone(process))
          throw Error(Errc::peer_failed, "cannot reach thread " + rdmx::to_string(peer) + ": " + runtime_.failure_of(process));
        if (e.code() == Errc::peer_failed)
          throw Error(Errc::peer_failed, "cannot reach process " + std::to_string(process) + " (thread " +
                                             rdmx::to_string(peer) + "): " + e.what());
        throw;
      }
      Runtime* rt = &runtime_;
      owned->on_failure([rt, process](ucs_status_t status) {
        rt->peer_failed(process, "process " + std::to_string(process) + " failed: " + ucs_status_string(status));
      });
      runtime_.report_transports(process, *owned);
      ep = owned.get();
      endpoints_.push_back(std::move(owned));
      endpoint_index_[index].store(ep, std::memory_order_release);
    }
  }
  ep->check_alive();
  return *ep;
}

std::vector<ThreadId> ThreadContext::contacted_workers() const {
  std::vector<ThreadId> out;
  const std::uint32_t per_process = runtime_.contexts();
  std::lock_guard lock(endpoints_mutex_);
  for (std::size_t i = 0; i < endpoint_index_.size(); ++i)
    if (i % per_process < runtime_.threads() && endpoint_index_[i].load(std::memory_order_acquire) != nullptr)
      out.push_back(ThreadId{static_cast<std::uint32_t>(i / per_process), static_cast<std::uint32_t>(i % per_process)});
  return out;
}

transfer::Endpoint& ThreadContext::rma_endpoint(std::uint32_t process) {
  // Another process's memory is reached through its service worker, which
  // always progresses. The own process's memory through this thread's own
  // worker: UCX's loopback (`self`) then moves the bytes inside the call,
  // where another worker of the own process would be a TCP connection
  // (UCX_TLS=tcp,self) whose emulated operations wait for its progress.
  return endpoint(process, process == runtime_.rank() ? runtime_.worker_of(id_.thread) : runtime_.workers());
}

transfer::Transmitter& ThreadContext::transmitter(std::uint32_t process) {
  transfer::Endpoint& ep = rma_endpoint(process);
  std::lock_guard lock(endpoints_mutex_);
  if (transmitters_.size() < runtime_.size()) transmitters_.resize(runtime_.size());
  auto& tx = transmitters_[process];
  if (!tx) {
    // Waiting drives this context: the owning thread progresses it itself;
    // a short-lived thread using the shared service context wakes the
    // service thread instead (only it may run this worker's callbacks).
    ProgressHook hook{[](void* self) {
      auto* ctx = static_cast<ThreadContext*>(self);
      if (current_context == ctx) return ctx->poll(nullptr);
      ctx->worker().signal();
      std::this_thread::yield();
      return false;
    }, this};
    // The blocking operations only move the network: a call that arrives
    // meanwhile is queued for this thread's next poll, never run inside
    // the wait (which may be the DSM's fault handler, holding a block's
    // lock the call could need). A thread standing in for a worker moves
    // its own worker too, whose RMA peers may be waiting on (TCP).
    ProgressHook transport{[](void* self) {
      auto* ctx = static_cast<ThreadContext*>(self);
      if (current_context != ctx) {
        ctx->worker().signal();
        std::this_thread::yield();
        return false;
      }
      bool active = ctx->worker().progress();
      if (stand_in_home != nullptr && stand_in_home != ctx) active = stand_in_home->worker().progress() || active;
      return active;
    }, this};
    tx = std::make_unique<transfer::Transmitter>(ep, 0, hook, transport);
  }
  return *tx;
}

void ThreadContext::flush(const std::function<void()>& also) {
  // Flush what is still outgoing so nothing sent before teardown is lost.
  // Endpoint by endpoint: a worker-wide flush can end as soon as one
  // endpoint has failed (a dead peer), leaving what is queued towards live
  // peers behind (a reply, say, which its caller then never gets).
  ucp_request_param_t param{};
  std::vector<void*> requests;
  {
    std::lock_guard lock(endpoints_mutex_);
    for (auto& ep : endpoints_) {
      if (!ep || ep->failed()) continue;
      void* request = ucp_ep_flush_nbx(ep->get(), &param);
      if (UCS_PTR_IS_PTR(request)) requests.push_back(request);
    }
  }
  auto busy = [&] {
    for (void* r : requests)
      if (ucp_request_check_status(r) == UCS_INPROGRESS) return true;
    return false;
  };
  // Idle polls yield as every wait does: with more threads than cores (a
  // job of 64 processes on 2 cores leaves together), a flush that spins
  // keeps off its core the peer whose progress it waits for, and gives up
  // at the deadline on endpoints that would complete.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  Backoff backoff;
  while (busy() && std::chrono::steady_clock::now() < deadline) {
    backoff(poll(nullptr));
    if (also) also();
  }
  std::size_t unfinished = 0;
  for (void* r : requests) {
    if (ucp_request_check_status(r) != UCS_INPROGRESS)
      ucp_request_free(r);
    else
      ++unfinished;
  }
  if (unfinished != 0)
    rdmx::log(rdmx::LogLevel::warn, "%s: gave up flushing %zu endpoints after 5 s\n", rdmx::to_string(id_).c_str(), unfinished);
}

}  // namespace rdmx::fabric
