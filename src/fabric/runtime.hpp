// Private to the fabric: per-thread communication contexts, the wire format of
// send-based calls, and the table of calls awaiting a reply.
#pragma once
#include <algorithm>
#include <array>
#include <pthread.h>
#include <sched.h>
#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <map>
#include <thread>
#include <unordered_map>
#include <vector>

#include "rdmx/core/backoff.hpp"
#include "rdmx/core/token_table.hpp"
#include "rdmx/fabric/bootstrap.hpp"
#include "rdmx/fabric/call.hpp"
#include "rdmx/fabric/collective.hpp"
#include "rdmx/fabric/job.hpp"
#include "rdmx/fabric/layer.hpp"
#include "rdmx/memory/arena.hpp"
#include "rdmx/transfer/context.hpp"
#include "rdmx/transfer/endpoint.hpp"
#include "rdmx/transfer/memory_region.hpp"
#include "rdmx/transfer/transmitter.hpp"
#include "rdmx/transfer/worker.hpp"

namespace rdmx::fabric {

enum AmId : unsigned { am_call = 11, am_reply = 12 };
inline constexpr std::uint8_t wire_version = 1;

struct CallHeader {  // followed by the closure bytes in the AM header
  std::uint64_t function;
  std::uint64_t token;  // 0: the caller wants no reply
  std::uint32_t source_process;
  std::uint32_t source_thread;
  std::uint32_t destination_thread;
  std::uint16_t closure_size;
  CallKind kind;
  std::uint8_t version;
};

struct ReplyHeader {  // followed by nothing; AM data = result bytes or error text
  std::uint64_t token;
  std::uint32_t error;  // 0 ok, else 1 + Errc
  std::uint32_t reserved;
};

// A call's captures: inline up to 64 bytes (most lambdas), on the heap
// beyond, so receiving a small call allocates nothing.
class Captures {
 public:
  void assign(const std::byte* first, const std::byte* last) {
    size_ = static_cast<std::size_t>(last - first);
    if (size_ <= inline_.size()) {
      if (size_ != 0) std::memcpy(inline_.data(), first, size_);
    } else {
      heap_.assign(first, last);
    }
  }
  const std::byte* data() const noexcept { return size_ <= inline_.size() ? inline_.data() : heap_.data(); }
  std::size_t size() const noexcept { return size_; }

 private:
  std::array<std::byte, 64> inline_;
  std::vector<std::byte> heap_;
  std::size_t size_ = 0;
};

// One received call, queued until its thread executes it (FIFO per thread).
struct InboundCall {
  CallHeader header{};
  Captures closure;
  std::vector<std::byte> owned_data;  // copied or rendezvous-received payload
  void* ucx_data = nullptr;           // payload UCX lent us (released after execution)
  std::size_t ucx_length = 0;
  std::shared_ptr<std::atomic<bool>> arrived;  // rendezvous payload still on its way when false
  std::span<std::byte> data() {
    if (ucx_data != nullptr) return {static_cast<std::byte*>(ucx_data), ucx_length};
    return {owned_data.data(), owned_data.size()};
  }
};

// The calls a thread has received and not yet run, in arrival order: a ring
// of slots that are reused. (A std::deque of these ~200-byte records
// allocated and freed a block every other call.) A slot keeps its payload
// buffer when its call leaves (swapped with the running call's), and every
// slot starts with receive_reserved_bytes of it: receiving a call allocates
// nothing while the ring has room and the payload fits (fabric/call.hpp).
// The DSM counts on it: a call may arrive while its thread serves a page
// fault that interrupted malloc.
class InboundQueue {
 public:
  InboundQueue() { grow(); }
  bool empty() const noexcept { return size_ == 0; }
  InboundCall& front() noexcept { return slots_[head_]; }
  void push_back(InboundCall&& r) { emplace_back() = std::move(r); }
  // A slot at the back, emptied, for the caller to fill in place: receiving
  // a call then builds it once instead of building and moving it.
  InboundCall& emplace_back() {
    if (size_ == slots_.size()) grow();
    InboundCall& r = slots_[(head_ + size_) & (slots_.size() - 1)];
    r.header = {};
    r.owned_data.clear();  // keeps its capacity
    r.ucx_data = nullptr;
    r.ucx_length = 0;
    ++size_;
    return r;
  }
  // The first call, swapped into `out`, whose buffers the slot keeps.
  void pop_front_into(InboundCall& out) noexcept {
    using std::swap;
    swap(out, slots_[head_]);
    head_ = (head_ + 1) & (slots_.size() - 1);
    --size_;
  }
  template <class F>
  void for_each(F&& f) {
    for (std::size_t i = 0; i < size_; ++i) f(slots_[(head_ + i) & (slots_.size() - 1)]);
  }

 private:
  void grow() {
    std::vector<InboundCall> bigger(std::max<std::size_t>(16, 2 * slots_.size()));  // a power of two
    for (std::size_t i = 0; i < size_; ++i) bigger[i] = std::move(slots_[(head_ + i) & (slots_.size() - 1)]);
    for (std::size_t i = size_; i < bigger.size(); ++i) bigger[i].owned_data.reserve(receive_reserved_bytes);
    slots_.swap(bigger);
    head_ = 0;
  }
  std::vector<InboundCall> slots_;
  std::size_t head_ = 0, size_ = 0;
};

// Calls awaiting a reply (consumed notifications, returned values, broadcast
// acknowledgements). Tokens carry a generation, so a stale or forged token
// is reported instead of touching freed state.
class PendingReplies {
 public:
  using Completion = std::function<void(const Error* failure, std::span<const std::byte> result)>;
  // What nearly every call waits with: the caller's Synchronizer, counted
  // down (or failed) once the result, if any, is copied to `result`. Held
  // by value: a Completion capturing these three would allocate per call.
  struct Waiter {
    Synchronizer* sync = nullptr;
    void* result = nullptr;
    std::size_t result_size = 0;
    void finish(const Error* failure, std::span<const std::byte> bytes) const;
  };
  // dest_process = ~0u: waits on every process (broadcast). Throws
  // peer_failed when that process (for a broadcast: any) has failed: a
  // reply registered after fail_process swept would wait for ever.
  std::uint64_t add(std::uint32_t dest_process, std::int64_t replies, Waiter waiter);
  std::uint64_t add(std::uint32_t dest_process, std::int64_t replies, Completion done);
  // One reply arrived; runs the completion when the last one has.
  void complete(std::uint64_t token, const Error* failure, std::span<const std::byte> result);
  void fail_process(std::uint32_t process, const std::string& why);
  // Forget a token whose call was never sent.
  void cancel(std::uint64_t token);

 private:
  struct Entry {
    std::uint32_t dest_process = 0;
    std::int64_t replies = 0;
    Waiter waiter;    // used when done is empty
    Completion done;
    void finish(const Error* failure, std::span<const std::byte> bytes) const {
      if (done)
        done(failure, bytes);
      else
        waiter.finish(failure, bytes);
    }
  };
  // Under mutex_: a free entry for a call to dest_process (throws as add).
  TokenTable<Entry>::Added take_entry(std::uint32_t dest_process, std::int64_t replies);
  std::mutex mutex_;
  TokenTable<Entry> entries_;
  std::map<std::uint32_t, std::string> failed_;  // processes fail_process was told of, and why
};

class Runtime;

namespace detail {
// The state of the worker collectives (collective.cpp): the root's open
// accumulators (process 0), released results waiting for this process's
// threads, and each worker's count of collectives.
class Collectives {
 public:
  explicit Collectives(std::uint32_t workers) : epochs_(workers, 0) {}
  std::uint64_t& epoch_of(std::uint32_t worker) { return epochs_.at(worker); }
  void fold(const Ticket& ticket, std::span<const std::byte> value, Combine combine);
  void release(std::uint64_t epoch, bool mismatch, std::span<const std::byte> result);
  // Copies collective `epoch`'s result once released (false before); the
  // last of `waiters` threads to take it frees it. Throws when the threads
  // met in different collectives.
  bool take(std::uint64_t epoch, std::span<std::byte> result, std::uint32_t waiters, const char* what);

 private:
  struct Open {
    std::uint32_t arrived = 0;
    std::vector<std::byte> acc;
    Combine combine = nullptr;
  };
  struct Released {
    bool mismatch = false;
    std::vector<std::byte> bytes;
    std::uint32_t taken = 0;
  };
  std::mutex mutex_;
  std::map<std::uint64_t, Open> open_;
  std::map<std::uint64_t, Released> released_;
  // The latest epoch released here: a waiter polls this, not the mutex
  // (a server waiting in a barrier checks once per progress round). Epochs
  // are released in order: one starts only after every thread took the last.
  std::atomic<std::uint64_t> released_up_to_{0};
  std::vector<std::uint64_t> epochs_;
};
}  // namespace detail

class ThreadContext {
 public:
  ThreadContext(Runtime& runtime, std::uint32_t slot, transfer::Worker::Sharing sharing);
  ~ThreadContext();

  ThreadId id() const noexcept { return id_; }
  transfer::Worker& worker() noexcept { return worker_; }
  // Endpoint from this thread's worker to (process, slot); created on first use.
  transfer::Endpoint& endpoint(std::uint32_t process, std::uint32_t slot);
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
  void transmit(CallHeader header, const Outgoing& call, ThreadId destination);
  bool shared() const noexcept { return shared_; }

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
  std::mutex inbox_mutex_;
  std::deque<InboundCall> inbox_;
  std::atomic<bool> inbox_nonempty_{false};
  void write_off_failed();
 public:
  bool send_would_wait();
  void flush_sends();
  // A send counted in queued_sends_ completed (its callback, on this thread).
  void send_left(std::uint32_t process) noexcept;
 private:
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

// A process that exited, or is a zombie waiting to be reaped, is gone (/proc).
bool process_alive(std::uint32_t pid);

// The only way current_context changes: the layers' words follow it.
inline void set_current_context(ThreadContext* c) noexcept {
  current_context = c;
  detail::acting_words = c != nullptr ? c->layer_words.data() : nullptr;
  // RDMX_PROGRESS=block: an idle wait sleeps on this context's UCX worker.
  Backoff::set_sleeper(c == nullptr ? Sleeper{nullptr, nullptr}
                                    : Sleeper{[](void* w, int ms) { return static_cast<transfer::Worker*>(w)->wait(ms); },
                                                       &c->worker()});
}

// Process-wide state behind rdmx::Job.
class Runtime {
 public:
  Runtime(Job::Options options, std::vector<std::string>& args);
  ~Runtime();    // shutdown(), then frees
  // The process's runtime, from start() to the end of its destructor;
  // throws when there is none.
  static Runtime& current();
  void start();  // starts the service thread
  // Leaves the job: drains (every process serves what is addressed to it
  // until all have arrived here), then stops the service thread. Everything
  // it runs may still reach the runtime, so Job calls it before letting go
  // of the runtime. Idempotent.
  void shutdown();

  std::uint32_t rank() const noexcept { return rank_; }
  std::uint32_t size() const noexcept { return size_; }
  // Application worker threads (Job::run's); helper threads follow them as
  // worker slots [threads(), workers()), then the service slot.
  std::uint32_t threads() const noexcept { return threads_; }
  std::uint32_t helpers() const noexcept { return helpers_; }
  std::uint32_t workers() const noexcept { return threads_ + helpers_; }
  std::uint32_t slots() const noexcept { return workers() + 1; }  // workers + service
  std::uint32_t slot_of(std::uint32_t thread) const noexcept { return thread == service_thread ? workers() : thread; }
  std::span<const std::byte> worker_address(std::uint32_t process, std::uint32_t slot) const;
  ThreadContext& context(std::uint32_t slot) { return *contexts_.at(slot); }
  ThreadContext& service() { return *contexts_.back(); }
  ThreadContext& calling_context();  // worker thread's own, or the shared service context
  void validate(ThreadId id) const;
  bool process_failed(std::uint32_t process) const { return failed_[process].load(std::memory_order_acquire); }
  const std::atomic<bool>* failure_flags() const noexcept { return failed_.get(); }
  // Processes known failed so far: a cheap check for new failures.
  std::uint32_t failure_count() const noexcept { return failure_count_.load(std::memory_order_acquire); }
  void peer_failed(std::uint32_t process, const std::string& why);
  // Whether `process` has failed, or (on this host) has exited, which then
  // counts as its failure.
  bool gone(std::uint32_t process);
  std::string failure_of(std::uint32_t process) const;  // why it failed, as first reported
  bool any_process_failed() const;
  // Processes on this host that have failed so far. Each may have died in
  // the middle of a send over shared memory and blocked a receiving
  // worker's FIFO for good (UCX 1.13), so every worker checks that answers
  // still reach it after each one (ThreadContext::check_receive_path).
  std::uint32_t host_failures() const noexcept { return host_failures_.load(std::memory_order_acquire); }
  // RDMX_RECEIVE_PROBE_MS: how long that check waits (0: never checks).
  std::uint32_t receive_probe_ms() const noexcept { return receive_probe_ms_; }
  bool shutting_down() const noexcept { return shutting_down_.load(std::memory_order_acquire); }
  bool same_host(std::uint32_t process) const { return infos_[process].hostname == infos_[rank_].hostname; }
  const std::string& hostname_of(std::uint32_t process) const { return infos_[process].hostname; }
  std::size_t max_message() const noexcept { return max_message_; }
  std::size_t max_closure() const noexcept { return max_closure_; }
  PendingReplies& pending() { return pending_; }
  detail::Collectives& collectives() { return *collectives_; }
  void report_dropped(const CallHeader& header, const std::string& why);

  Bootstrap& bootstrap() { return *bootstrap_; }
  // The layer registered under `key` (fabric::layer), made by `make` on first use.
  Layer& layer(const void* key, const std::function<std::unique_ptr<Layer>()>& make);
  // Poll every layer for worker `slot` (from ThreadContext::poll).
  std::size_t poll_layers(std::uint32_t slot) {
    std::size_t n = 0;
    const std::size_t count = layer_count_.load(std::memory_order_acquire);
    for (std::size_t i = 0; i < count; ++i) n += layer_list_[i].load(std::memory_order_relaxed)->poll(slot);
    return n;
  }
  // Quiet every layer for worker `slot`, one after the other (rdmx::quiet).
  void quiet_layers(std::uint32_t slot) {
    for (std::size_t i = 0; i < layer_count_.load(std::memory_order_acquire); ++i)
      layer_list_[i].load(std::memory_order_relaxed)->quiet(slot);
  }
  // Arenas by NUMA node (-1: no binding), created on first use.
  memory::Arena& arena_for(int numa_node);
  int numa_node_of(std::uint32_t thread) const;
  void remember_allocation(const memory::Block& block);
  bool forget_allocation(const RemoteLocator& where);
  // RDMX_CHECK_ACCESS: memory handed out for remote access (allocate_remote
  // and local_locator), and whether [offset, offset + length) of `region`
  // lies inside one piece of it.
  void remember_grant(const RemoteLocator& where);
  bool access_allowed(std::uint32_t region, std::uint64_t offset, std::uint64_t length) const;
  bool check_access() const noexcept { return check_access_; }
  transfer::Context& context() { return context_; }
  const ProcessInfo& info(std::uint32_t process) const { return infos_.at(process); }
  const Layout& layout() const noexcept { return layout_; }
  const std::string& pin_reason() const noexcept { return pin_reason_; }
  // The job's layout, placement and progress, in one line (Job::describe).
  std::string describe() const;
  bool oversubscribed() const noexcept { return oversubscribed_; }
  std::uint32_t spare_cores() const noexcept { return spare_cores_; }
  // Job::barrier: every process arrives, served by calls, so that waiting
  // keeps serving calls.
  void barrier();

  // Take (give back) a worker context for the calling thread.
  void bind_current_thread(std::uint32_t slot);
  void unbind_current_thread();
  // Drive workers whose threads are away; returns whether anything happened.
  bool stand_in_for_idle_threads();
  // Run the calls of every worker no thread is bound to, as that worker,
  // from the calling thread (which keeps its own binding); returns how many
  // ran. Waits outside Job::run (collectives, teardown) do this so that a
  // peer still calling a thread that has left is served.
  std::size_t serve_idle_workers(bool* active = nullptr);  // active: set when anything happened
  // What a worker thread that threw out of Job::run does (JobOptions).
  ThreadException on_thread_exception() const noexcept { return on_thread_exception_; }

 private:
  void service_loop();
  std::size_t serve_worker(ThreadContext& ctx, bool* active);  // ctx's driver held by the caller
  void helper_loop(std::uint32_t slot);
  void stop_helpers();
  void watch_local_peers();
  // Teardown: rounds of flush, fence, drain until no process ran anything;
  // false when a process failed on the way.
  bool quiesce();
  // The same rounds among the live processes once one has failed: the
  // launcher's fence would wait for the dead, so the survivors tell each
  // other's service threads (survivor_note) where they are.
  bool quiesce_survivors();
  // Runs `what` as worker `slot` (its context bound, its driver held).
  void drive(std::uint32_t slot, const std::function<void(ThreadContext&)>& what);
  // Every worker's sends and its layers' pending calls, made visible to peers.
  void flush_all(std::size_t layers);
  // Waits, serving (adds what ran to `served`), until every live process
  // has noted `round` in `marks`; returns whether any noted it busy.
  bool survivors_reach(const std::unique_ptr<std::atomic<std::uint64_t>[]>& marks, std::uint64_t round,
                       std::uint64_t& served);
 public:
  // Process `from` has flushed (voted) for survivor round `round`; `busy`: it ran something.
  void survivor_note(bool vote, std::uint32_t from, std::uint64_t round, bool busy);
  // Whether a peer has started leaving with the survivors (it noted a round).
  bool survivors_leaving() const;
  // Another survivor reports `process` failed (it could not reach it). At
  // teardown this process agrees; if that is this process, it leaves
  // without the others.
  void learn_failure(std::uint32_t process, std::uint32_t from);
  void apply_reported_failures();
  bool excluded() const noexcept { return excluded_.load(std::memory_order_acquire); }

 private:
  std::vector<ProcessInfo> infos_;
  Layout layout_;
  bool pin_ = false;
  std::string pin_reason_;
  bool oversubscribed_ = false;  // more worker threads on this machine than cores
  std::uint32_t spare_cores_ = 0;  // cores beyond them
  // Job::barrier's bookkeeping: arrivals counted by process 0's service thread.
  std::uint64_t barrier_epoch_ = 0;
  std::atomic<std::uint64_t> barrier_arrived_{0};
  std::atomic<std::uint64_t> barrier_released_{0};
  std::unique_ptr<std::atomic<std::uint64_t>[]> survivor_flushed_, survivor_voted_;  // [process]: round * 2 + busy
  std::vector<std::uint32_t> pids_;
  std::unique_ptr<Bootstrap> bootstrap_;
  std::uint32_t rank_ = 0, size_ = 1, threads_ = 1, helpers_ = 0;
  std::size_t max_message_ = 0, max_closure_ = 0;
  transfer::Context context_;
  std::vector<std::unique_ptr<ThreadContext>> contexts_;
  std::vector<std::vector<std::byte>> addresses_;  // [process*slots + slot]
  std::unique_ptr<std::atomic<bool>[]> failed_;
  mutable std::mutex failures_mutex_;
  std::vector<std::string> failures_;  // [process]: why, once failed
  std::atomic<std::uint32_t> host_failures_{0};
  std::atomic<std::uint32_t> failure_count_{0};
  std::uint32_t receive_probe_ms_ = 10'000;
  std::string given_settings_;  // "RDMX_X=v, RDMX_THREADS=2 (--rdmx-threads)": for RDMX_LOG=info
  PendingReplies pending_;
  std::unique_ptr<detail::Collectives> collectives_;
  static Runtime* current_;
  mutable std::mutex arenas_mutex_;
  std::map<int, std::unique_ptr<memory::Arena>> arenas_;
  std::map<std::pair<std::uint32_t, std::uint64_t>, memory::Block> allocations_;
  std::map<std::pair<std::uint32_t, std::uint64_t>, std::uint64_t> grants_;  // local_locator: length
  bool check_access_ = false;
  std::vector<int> thread_numa_;                // NUMA node of each pinned worker thread, -1 if unknown
  std::vector<std::vector<int>> thread_cpus_;   // the core (its CPUs) each worker thread is pinned to
  cpu_set_t main_affinity_;                     // the constructing thread's affinity before the Job
  bool main_affinity_saved_ = false;
  std::mutex layers_mutex_;  // making a layer
  std::vector<std::unique_ptr<Layer>> layers_;
  // Lock-free view for lookups and poll(): entries are published once, never removed.
  static constexpr std::size_t max_layers = 8;
  std::array<std::atomic<const void*>, max_layers> layer_keys_{};
  std::array<std::atomic<Layer*>, max_layers> layer_list_{};
  std::atomic<std::size_t> layer_count_{0};
  std::thread service_thread_;
  std::vector<std::thread> helper_threads_;
  std::atomic<bool> stop_helpers_{false};
  std::atomic<bool> stop_{false};
  std::atomic<bool> shutting_down_{false};
  std::atomic<bool> excluded_{false};  // a survivor could not reach this process (learn_failure)
  std::vector<std::pair<std::uint32_t, std::uint32_t>> reported_failures_;  // (process, reported by), under failures_mutex_
  std::atomic<bool> failures_reported_{false};
  bool serve_idle_ = false;  // RDMX_SERVE_IDLE: the service thread runs idle threads' calls
  ThreadException on_thread_exception_ = ThreadException::end_process;
  bool shut_down_ = false;
  // The launcher's process when one started us (0: none): a process whose
  // parent changes was orphaned (its launcher was killed) and ends itself.
  pid_t launcher_pid_ = 0;
  void watch_launcher();
};

}  // namespace rdmx::fabric

namespace rdmx {
struct Job::Impl {
  fabric::Runtime runtime;
};
}  // namespace rdmx
