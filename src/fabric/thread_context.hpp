// Private to the fabric: a worker's communication context (its UCX
// worker, endpoints, transmitters, received calls and send-based calls in
// flight) and which context the calling thread acts as. Every call and
// every wait goes through it; the methods on that path are defined in
// sending.cpp and receiving.cpp, the rest in thread_context.cpp.
#pragma once
#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <unordered_map>
#include <vector>

#include "rdmx/core/backoff.hpp"
#include "rdmx/core/error.hpp"
#include "rdmx/fabric/call.hpp"
#include "rdmx/fabric/identity.hpp"
#include "rdmx/fabric/layer.hpp"
#include "rdmx/transfer/endpoint.hpp"
#include "rdmx/transfer/memory_region.hpp"
#include "rdmx/transfer/transmitter.hpp"
#include "rdmx/transfer/worker.hpp"
#include "inbound_queue.hpp"
#include "wire.hpp"

namespace rdmx::fabric {

class Runtime;

class ThreadContext {
 public:
  ThreadContext(Runtime& runtime, std::uint32_t worker, transfer::Worker::Sharing sharing);
  ~ThreadContext();

  ThreadId id() const noexcept { return id_; }
  transfer::Worker& worker() noexcept { return worker_; }
  // Endpoint from this thread's worker to (process, worker); created on first use.
  transfer::Endpoint& endpoint(std::uint32_t process, std::uint32_t worker);
  // The endpoint one-sided operations on `process`'s memory go through
  // (transmitter() and the remote keys use it).
  transfer::Endpoint& rma_endpoint(std::uint32_t process);
  // One-sided operations towards `process` (targeting its service worker).
  transfer::Transmitter& transmitter(std::uint32_t process);
  // The worker threads this thread holds an endpoint to: every one it has
  // sent a call to (and some it answered).
  std::vector<ThreadId> contacted_workers() const;

  void send(const Outgoing& call, std::uint64_t token, ThreadId destination, CallKind kind);
  void forward_broadcast(const Outgoing& call, const CallHeader& original, ThreadId child);
  void send_reply(ThreadId destination, std::uint64_t token, const Error* failure, std::span<const std::byte> result);
  // Flow control (fabric::send_would_wait, fabric::flush_sends).
  bool send_would_wait();
  void flush_sends();
  // A send counted in queued_sends_ completed (its callback, on this thread).
  void send_left(std::uint32_t process) noexcept;
  // A peer's region as this thread reaches it (rkey unpacked on its endpoint).
  struct RemoteRegion {
    std::uint64_t base;
    std::uint64_t length;
    transfer::RemoteKey key;
  };
  const RemoteRegion& remote_region(std::uint32_t process, std::uint32_t region);
  // Hand a received call to this thread from another thread of the process.
  void deliver(InboundCall call);
  // Drive UCX, then run received calls in order. Returns calls executed.
  std::size_t progress();
  // Like progress(); true when anything happened (UCX events or calls).
  bool poll(std::size_t* executed);
  // Count `sync` down once `tag` is free (the flush that covers a one-sided
  // operation of `tx` towards `process` has completed: the data is at its
  // target), or fail it once `process` has failed first: rdmx::put and
  // rdmx::get with a completion (fabric/rma.hpp). Settled by this thread's polls.
  void notify_when_flushed(transfer::Transmitter& tx, std::uint32_t process, transfer::EpochTag tag, Synchronizer& sync) {
    flushed_.push_back({&tx, process, tag, &sync});
  }
  // Leaving the job: false while such a count waits for its flush.
  bool flushes_settled() const noexcept { return flushed_.empty(); }
  // Complete everything this thread sent (its worker makes progress only
  // while its thread drives it); bounded so a dead peer cannot hang us.
  // `also` runs between polls: what else must progress meanwhile.
  void flush(const std::function<void()>& also = {});

  // Whoever drives this context's worker holds `driver`: its own thread while
  // bound to it, otherwise the service thread, which then only receives
  // (queues) calls for it. The owner never locks on the hot path.
  std::mutex driver;
  // Receive without executing (the service thread standing in for an idle thread).
  bool receive_only() { return worker_.progress(); }
  // The layers' words for this worker (fabric::acting_word): kept with the
  // worker, so they follow whichever OS thread acts as it.
  static constexpr std::size_t max_layer_words = 16;
  std::array<void*, max_layer_words> layer_words{};

 private:
  static ucs_status_t on_call(void* arg, const void* header, std::size_t header_length, void* data,
                              std::size_t length, const ucp_am_recv_param_t* param);
  static ucs_status_t on_reply(void* arg, const void* header, std::size_t header_length, void* data,
                               std::size_t length, const ucp_am_recv_param_t* param);
  void complete_reply(ReplyHeader h, ucs_status_t status, std::span<const std::byte> bytes);
  void execute(InboundCall& call);
  void check_receive_path(bool idle);
  void settle_flushed();
  void transmit(CallHeader header, const Outgoing& call, ThreadId destination);
  // Stops counting the queued sends to processes that have failed since.
  void write_off_failed();

  Runtime& runtime_;
  ThreadId id_;
  bool shared_;
  int progress_rounds_;  // UCX progress rounds per poll (poll())
  // Flow control (non-shared contexts): the sends UCX has queued, in all
  // and by destination process. A send to a process that died may never
  // complete (shared memory reports no failure), so once the process is
  // known failed its sends stop counting: they must not hold up the others.
  // Declared before the worker and endpoints: closing those completes the
  // sends still queued, whose callbacks count here.
  std::size_t queued_sends_ = 0;
  std::vector<std::uint32_t> queued_to_;
  std::vector<bool> written_off_;  // by process: failed, its queued sends no longer counted
  std::uint32_t failures_seen_ = 0;
  transfer::Worker worker_;
  mutable std::mutex endpoints_mutex_;  // endpoint creation (a shared worker is used by many threads)
  std::vector<std::atomic<transfer::Endpoint*>> endpoint_index_;
  std::vector<std::unique_ptr<transfer::Endpoint>> endpoints_;
  std::vector<std::unique_ptr<transfer::Transmitter>> transmitters_;
  std::unordered_map<std::uint64_t, RemoteRegion> regions_;
  InboundQueue ready_;
  // The calls being executed, one per nesting level (a call that waits runs
  // others): a deque, so a deeper level's slot does not move a running one.
  std::deque<InboundCall> running_;
  std::size_t running_depth_ = 0;
  struct Flushed {
    transfer::Transmitter* tx;
    std::uint32_t process;
    transfer::EpochTag tag;
    Synchronizer* sync;
  };
  std::deque<Flushed> flushed_;  // in issue order
  std::mutex inbox_mutex_;
  std::deque<InboundCall> inbox_;
  std::atomic<bool> inbox_nonempty_{false};
  // check_receive_path's state: the count of host failures already checked,
  // and the probe in flight (answer: 0 none yet, 1 answered, 2 failed).
  struct ReceiveProbe {
    std::uint32_t checked = 0;
    std::uint32_t checking = 0;
    std::uint32_t peer = 0;
    std::uint64_t token = 0;
    std::shared_ptr<std::atomic<int>> answer;
    std::chrono::steady_clock::time_point deadline;
  } probe_;
};

// The context bound to the calling thread (its own worker's, or the one the
// teardown drives on its behalf); nullptr for threads outside the job.
extern thread_local ThreadContext* current_context;
// While a thread stands in for an idle worker (Runtime::serve_idle_workers):
// its own context, which its waits inside that worker's calls keep going.
extern thread_local ThreadContext* stand_in_home;
// While such a thread runs its own context's duties from inside the stood-in
// worker's poll: that worker, whose receives its waits keep going.
extern thread_local ThreadContext* stood_in_for;

// The only way current_context changes: the layers' words follow it.
inline void set_current_context(ThreadContext* c) noexcept {
  current_context = c;
  detail::acting_words = c != nullptr ? c->layer_words.data() : nullptr;
  // RDMX_PROGRESS=block: an idle wait sleeps on this context's UCX worker.
  Backoff::set_sleeper(c == nullptr ? Sleeper{nullptr, nullptr}
                                    : Sleeper{[](void* w, int ms) { return static_cast<transfer::Worker*>(w)->wait(ms); },
                                                       &c->worker()});
}

}  // namespace rdmx::fabric
