// transfer::Endpoint: a connection from a local Worker to a remote worker
// address (the seed's queue pair). Peer failures are detected (UCX peer error
// handling): the endpoint is marked failed and every later operation on it
// throws Errc::peer_failed instead of hanging. Where no transport to the peer
// can report failures (shared memory in UCX 1.13), or where the owner asks to
// watch the peer itself, detects_failure() is false and the owner watches the
// peer some other way and calls mark_failed().
#pragma once
#include <ucp/api/ucp.h>

#include <atomic>
#include <cstddef>
#include <functional>
#include <span>
#include <string>

namespace rdmx::transfer {

class Worker;

class Endpoint {
 public:
  using FailureHandler = std::function<void(ucs_status_t)>;
  // Who finds out that the peer failed. `transport`: UCX, where some
  // transport to the peer can (else as `owner`). UCX 1.13 then leaves out
  // every transport that cannot, shared memory among them, and reaches a
  // process of the same machine over TCP loopback. `owner`: the owner
  // watches the peer itself (a process of this machine, through /proc), and
  // UCX is free to choose shared memory.
  enum class Watch { transport, owner };
  Endpoint(Worker& worker, std::span<const std::byte> remote_address, std::string peer_name,
           Watch watch = Watch::transport);
  ~Endpoint();  // closes at once: flush first what must arrive
  Endpoint(const Endpoint&) = delete;
  Endpoint& operator=(const Endpoint&) = delete;

  ucp_ep_h get() const noexcept { return handle_; }
  Worker& worker() const noexcept { return *worker_; }
  const std::string& peer_name() const noexcept { return peer_name_; }
  bool failed() const noexcept { return failure_.load(std::memory_order_acquire) != UCS_OK; }
  ucs_status_t failure() const noexcept { return failure_.load(std::memory_order_acquire); }
  // Throws Errc::peer_failed naming the peer when the endpoint has failed.
  void check_alive() const;
  bool detects_failure() const noexcept { return detects_failure_; }
  // True when every transport UCX chose for this peer is TCP: one-sided
  // operations are then emulated with active messages that the peer's
  // worker applies when it progresses (slow, and only while it progresses).
  bool rma_emulated() const;
  // Whether rma_emulated() has its answer from UCX's report of the lanes
  // (before that it says false and asks again).
  bool rma_emulation_known() const noexcept { return emulated_.load(std::memory_order_relaxed) >= 0; }
  // The transports UCX chose for this endpoint, by what they carry, as
  // "rma cma/memory, am posix/memory, atomics posix/memory" (transport/device;
  // "+" between several). A use with no lane of its own UCX carries out with
  // active messages: "atomics over am". For a person tuning UCX_TLS.
  std::string transports() const;
  // Record a failure found by other means; runs the failure handler once.
  void mark_failed(ucs_status_t status);
  // Whether any endpoint of this process has failed: teardown then leaves
  // UCX's workers and context to the process's exit (worker.cpp says why).
  static bool any_failed() noexcept;
  // Called (on the progressing thread) when the peer fails.
  void on_failure(FailureHandler handler) { on_failure_ = std::move(handler); }

 private:
  static void error_callback(void* arg, ucp_ep_h ep, ucs_status_t status);
  Worker* worker_;
  ucp_ep_h handle_ = nullptr;
  std::string peer_name_;
  std::atomic<ucs_status_t> failure_{UCS_OK};
  mutable std::atomic<std::int8_t> emulated_{-1};  // rma_emulated(), once known (-1: not yet)
  FailureHandler on_failure_;
  bool detects_failure_ = true;
};

}  // namespace rdmx::transfer
