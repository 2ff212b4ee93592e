// rdmx::Job: one process's membership in a distributed job (Seriema's
// DSfabric). Construct one per process, first thing in main. It bootstraps
// through the launcher, creates one UCX worker per long-lived thread plus the
// service thread's, exchanges their addresses, and owns the process's
// registered-memory arena. Threads then talk with the call family
// (fabric/call.hpp) and one-sided operations (fabric/rma.hpp).
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "rdmx/fabric/identity.hpp"

namespace rdmx {
class Job;
namespace transfer {
class Context;
}
namespace memory {
class Arena;
}
namespace fabric {
class ThreadContext;
class Runtime;
Runtime& runtime_of(Job& job) noexcept;  // for the fabric's own files (src/fabric) only
}

// What happens when a worker thread lets an exception escape Job::run.
enum class ThreadException {
  // Report it (process, thread, what()) and end the process at once with
  // exit status 1: its peers see a failed process, so their pending
  // operations towards it fail with Errc::peer_failed instead of waiting for
  // a thread that will never answer.
  end_process,
  // Report it; the thread keeps serving the calls addressed to it until
  // every thread of the process is done, then Job::run rethrows the first
  // exception on the calling thread.
  rethrow,
};

struct JobOptions {
  // Worker threads per process. 0: --rdmx-threads=T, RDMX_THREADS, RDMX_LAYOUT, or 1.
  std::uint32_t threads = 0;
  // Helper threads per process that consume the one-sided calls addressed to
  // the worker threads (Seriema's helper threads; invoke's docs, "Helper
  // threads"). Unset: --rdmx-helpers=H, RDMX_HELPERS, or 0 (each worker
  // thread runs its own calls).
  std::optional<std::uint32_t> helpers;
  // Create endpoints to every worker at start-up (RDMX_EAGER_ENDPOINTS); default lazy.
  std::optional<bool> eager_endpoints;
  // Pin worker threads to cores of the process's NUMA zone (RDMX_PIN=auto|on|off).
  std::optional<std::string> pin;
  // Largest call_buffer payload accepted (RDMX_MAX_MESSAGE, default 1 GiB).
  std::size_t max_message = 0;
  // A worker thread's exception that escapes Job::run.
  ThreadException on_thread_exception = ThreadException::end_process;
};

class Job {
 public:
  using Options = JobOptions;

  Job();
  // Reads and removes --rdmx-* options from argv.
  Job(int& argc, char**& argv, Options options = {});
  explicit Job(Options options);
  // Leaves the job, collectively: serves what peers still send to any of
  // this process's threads until every process has left (so nothing sent
  // before teardown is lost), then tears down. A peer that died is given up
  // on; see docs/fabric-leaving.md.
  ~Job();
  Job(const Job&) = delete;
  Job& operator=(const Job&) = delete;

  // The job of this process; throws if none exists.
  static Job& current();

  std::uint32_t rank() const noexcept;  // this process
  std::uint32_t size() const noexcept { return size_; }  // processes in the job
  std::uint32_t threads_per_process() const noexcept;
  // Helper threads per process (JobOptions::helpers); their ThreadIds follow
  // the worker threads' (threads_per_process() + k).
  std::uint32_t helpers_per_process() const noexcept;
  std::uint32_t total_threads() const noexcept { return size() * threads_per_process(); }
  // Worker and helper threads of a process: the threads calls can address.
  std::uint32_t workers_per_process() const noexcept { return threads_per_process() + helpers_per_process(); }
  // Throws Errc::no_such_destination unless `id` names a thread of the job
  // (a worker, a helper or a process's service thread).
  void check_destination(ThreadId id) const;
  // Whether `process` has failed (it died, or its endpoints broke): every
  // call to it and every reply awaited from it fails with Errc::peer_failed.
  // Inline: the one-sided call layers ask it on every poll of a channel.
  bool process_failed(std::uint32_t process) const noexcept {
    return process < size_ && failed_[process].load(std::memory_order_acquire);
  }
  // Whether `process` has started leaving the job (its rdmx::Job is being
  // destroyed). It still serves calls until every process has left, but it
  // runs no more of its program: a peer waiting for it to do something
  // (enter a collective, say it is done with a resource) waits in vain.
  bool process_left(std::uint32_t process) const noexcept;
  // The most bytes one call may carry (JobOptions::max_message, RDMX_MAX_MESSAGE).
  std::size_t max_message() const noexcept;
  // More worker threads on this machine (all its processes) than cores: idle
  // waits then yield their core early (rdmx::Backoff::idle_spins()).
  bool oversubscribed() const noexcept;
  // Cores of this machine beyond one per worker and helper thread of all its
  // processes (0 when oversubscribed): room for threads a layer adds.
  std::uint32_t spare_cores() const noexcept;
  const ProcessInfo& process_info(std::uint32_t rank) const;
  // NUMA zone of this process's worker thread `thread` when threads are
  // pinned on a machine with several zones; -1 when unknown or irrelevant.
  int numa_zone(std::uint32_t thread) const;
  Layout layout() const;
  std::string launcher() const;
  std::string describe() const;  // one line: layout, transports, arena

  // Runs fn on every worker thread of this process, the calling thread being
  // thread 0, and joins them. Threads are named and pinned per the layout.
  // A thread whose fn returned keeps serving the calls addressed to it until
  // every thread of the process has returned, so threads may finish in any
  // order. An exception that escapes fn: JobOptions::on_thread_exception.
  void run(const std::function<void(ThreadId)>& fn);

  // Rare collectives among processes, called by one thread per process,
  // the same ones in the same order on every process. Both keep serving
  // calls while they wait, so a peer blocked on a call to this thread cannot
  // deadlock them. They throw Errc::peer_failed when a process of the job
  // has died, Errc::shut_down when one has left the job (~Job) without
  // entering this collective, and Errc::invalid_argument on every process
  // when one called the other kind.
  void barrier();
  std::vector<std::vector<std::byte>> allgather(std::span<const std::byte> mine);
  // Every process's `mine`, indexed by rank.
  template <class T>
    requires std::is_trivially_copyable_v<T>
  std::vector<T> allgather(const T& mine) {
    auto all = allgather(std::as_bytes(std::span(&mine, 1)));
    std::vector<T> values(all.size());
    for (std::size_t p = 0; p < all.size(); ++p) {
      if (all[p].size() != sizeof(T)) throw_mismatched_allgather(p, all[p].size(), sizeof(T));
      std::memcpy(&values[p], all[p].data(), sizeof(T));
    }
    return values;
  }

  transfer::Context& context();
  memory::Arena& arena();
  // The arena of the NUMA zone of this process's thread `thread` (arena() is
  // the calling thread's).
  memory::Arena& arena_near(std::uint32_t thread);

  struct Impl;

 private:
  [[noreturn]] static void throw_mismatched_allgather(std::size_t process, std::size_t got, std::size_t expected);
  friend fabric::Runtime& fabric::runtime_of(Job& job) noexcept;
  std::unique_ptr<Impl> impl_;
  std::uint32_t size_ = 0;
  const std::atomic<bool>* failed_ = nullptr;  // the runtime's, one per process
};

// The calling thread's id; throws unless it is a worker or service thread.
ThreadId this_thread();
// Handle calls that arrived for the calling thread (Seriema's process_calls);
// returns how many ran. Waiting in rdmx (Synchronizer, Future) does this too.
std::size_t progress();

}  // namespace rdmx
