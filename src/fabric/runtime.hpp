// Private to the fabric: the process's Runtime, the state behind rdmx::Job
// (configuration, placement, every worker's context, failures, layers,
// teardown). Its methods live in runtime.cpp and in the files named for
// their jobs (service.cpp, liveness.cpp, teardown.cpp, layer.cpp).
#pragma once
#include <sched.h>
#include <sys/types.h>

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "rdmx/fabric/bootstrap.hpp"
#include "rdmx/fabric/identity.hpp"
#include "rdmx/fabric/job.hpp"
#include "rdmx/fabric/layer.hpp"
#include "rdmx/memory/arena.hpp"
#include "rdmx/transfer/context.hpp"
#include "rdmx/transfer/remote_locator.hpp"
#include "job_collectives.hpp"
#include "pending_replies.hpp"
#include "thread_context.hpp"
#include "wire.hpp"

namespace rdmx::fabric {

namespace detail {
class Collectives;
}

// A process that exited, or is a zombie waiting to be reaped, is gone (/proc).
bool process_alive(std::uint32_t pid);

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
  // workers [threads(), workers()), then the service context.
  std::uint32_t threads() const noexcept { return threads_; }
  std::uint32_t helpers() const noexcept { return helpers_; }
  std::uint32_t workers() const noexcept { return threads_ + helpers_; }
  std::uint32_t contexts() const noexcept { return workers() + 1; }  // workers + service
  std::uint32_t worker_of(std::uint32_t thread) const noexcept { return thread == service_thread ? workers() : thread; }
  std::span<const std::byte> worker_address(std::uint32_t process, std::uint32_t worker) const;
  ThreadContext& context(std::uint32_t worker) { return *contexts_.at(worker); }
  ThreadContext& service() { return *contexts_.back(); }
  ThreadContext& calling_context();  // worker thread's own, or the shared service context
  void validate(ThreadId id) const;
  bool process_failed(std::uint32_t process) const { return failed_[process].load(std::memory_order_acquire); }
  const std::atomic<bool>* failure_flags() const noexcept { return failed_.get(); }
  // Whether one-sided operations to `process` are emulated by its progress
  // (rdmx::rma_emulated), once an endpoint to it has known (-1: not yet):
  // every worker of a process is reached over the same transports.
  std::atomic<std::int8_t>& rma_emulation(std::uint32_t process) noexcept { return emulated_[process]; }
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
  detail::JobCollectives& job_collectives() { return *job_collectives_; }
  // Job::run is active in this process (entered and not yet returned):
  // outside it no worker thread of this process enters a collective.
  bool in_run() const noexcept { return runs_.load(std::memory_order_acquire) != 0; }
  void run_begins() noexcept { runs_.fetch_add(1, std::memory_order_acq_rel); }
  void run_ends() noexcept { runs_.fetch_sub(1, std::memory_order_acq_rel); }
  void report_dropped(const CallHeader& header, const std::string& why);
  // At RDMX_LOG=info, the transports UCX chose towards `process`, once per
  // peer: `endpoint` is the first this process wired to it (every thread's
  // endpoint to one peer gets the same lanes).
  void report_transports(std::uint32_t process, const transfer::Endpoint& endpoint);

  Bootstrap& bootstrap() { return *bootstrap_; }
  // The layer registered under `key` (fabric::layer), made by `make` on first use.
  Layer& layer(const void* key, const std::function<std::unique_ptr<Layer>()>& make);
  // Poll every layer for worker `worker` (from ThreadContext::poll).
  std::size_t poll_layers(std::uint32_t worker) {
    std::size_t n = 0;
    const std::size_t count = layer_count_.load(std::memory_order_acquire);
    for (std::size_t i = 0; i < count; ++i) n += layer_list_[i].load(std::memory_order_relaxed)->poll(worker);
    return n;
  }
  // Quiet every layer for worker `worker`, one after the other (rdmx::quiet).
  void quiet_layers(std::uint32_t worker) {
    for (std::size_t i = 0; i < layer_count_.load(std::memory_order_acquire); ++i)
      layer_list_[i].load(std::memory_order_relaxed)->quiet(worker);
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
  // Job::barrier and Job::allgather (job_collectives.hpp).
  void barrier();
  std::vector<std::vector<std::byte>> allgather(std::span<const std::byte> mine);

  // Take (give back) a worker context for the calling thread.
  void bind_current_thread(std::uint32_t worker);
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
  void helper_loop(std::uint32_t worker);
  void stop_helpers();
  void watch_local_peers();
  // Teardown: rounds of flush, fence, drain until no process ran anything;
  // false when a process failed on the way.
  bool quiesce();
  // Tells every peer that this process leaves, and after how many collectives.
  void tell_leaving();
  // The same rounds among the live processes once one has failed: the
  // launcher's fence would wait for the dead, so the survivors tell each
  // other's service threads (survivor_note) where they are.
  bool quiesce_survivors();
  // Runs `what` as worker `worker` (its context bound, its driver held).
  void drive(std::uint32_t worker, const std::function<void(ThreadContext&)>& what);
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
  std::unique_ptr<std::atomic<std::uint64_t>[]> survivor_flushed_, survivor_voted_;  // [process]: round * 2 + busy
  std::unique_ptr<std::atomic<bool>[]> transports_reported_;  // [process]
  std::vector<std::uint32_t> pids_;
  std::unique_ptr<Bootstrap> bootstrap_;
  std::uint32_t rank_ = 0, size_ = 1, threads_ = 1, helpers_ = 0;
  std::size_t max_message_ = 0, max_closure_ = 0;
  transfer::Context context_;
  std::vector<std::unique_ptr<ThreadContext>> contexts_;
  std::vector<std::vector<std::byte>> addresses_;  // [process * contexts() + worker]
  std::unique_ptr<std::atomic<bool>[]> failed_;
  std::unique_ptr<std::atomic<std::int8_t>[]> emulated_;
  mutable std::mutex failures_mutex_;
  std::vector<std::string> failures_;  // [process]: why, once failed
  std::atomic<std::uint32_t> host_failures_{0};
  std::atomic<std::uint32_t> failure_count_{0};
  std::uint32_t receive_probe_ms_ = 10'000;
  std::string given_settings_;  // "RDMX_X=v, RDMX_THREADS=2 (--rdmx-threads)": for RDMX_LOG=info
  PendingReplies pending_;
  std::unique_ptr<detail::Collectives> collectives_;
  std::unique_ptr<detail::JobCollectives> job_collectives_;
  std::atomic<std::uint32_t> runs_{0};
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
