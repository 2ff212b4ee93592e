// Far memory as a layer of the fabric (fabric/layer.hpp), like invoke and
// action: the process's FarLayer, made with the job, holds the runtime of
// its far::Manager while one exists, and that is how far pointers, scopes
// and data structures find it (detail::runtime(): a per-worker word on the
// hot path), how rdmx::quiet() waits for its write-backs and how a failed
// server is reported to it. A Manager made in a process without a Job (an
// in-process one, in unit tests) is found as the process's in-process
// runtime instead, and has no fabric to hear from. The layer also keeps
// what outlives one Manager: which Manager each peer is done with, so that
// a server knows when it may leave.
#pragma once
#include <atomic>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "rdmx/fabric/layer.hpp"

namespace rdmx {
class Job;
}

namespace rdmx::far::detail {

class Runtime;

class FarLayer final : public fabric::Layer {
 public:
  explicit FarLayer(Job& job);
  // The job is left with a Manager still alive (it should have ended
  // first): the Manager no longer reaches this layer.
  ~FarLayer() override;

  Runtime* runtime() const noexcept { return runtime_.load(std::memory_order_acquire); }
  // Throws Errc::invalid_argument when a runtime is attached already.
  void attach(Runtime& runtime);
  // Returns once no hook below runs on `runtime` any more.
  void detach(Runtime& runtime) noexcept;

  // The job is being left with a Manager still alive (it should have
  // ended first): says so, and stops its evacuator, which must neither
  // write back while the job ends nor touch the job's memory after. Its
  // servers stop waiting for this process once told it leaves
  // (Job::process_left), and the Manager, destroyed later, touches nothing
  // of the job.
  void leaving() override;

  // poll: nothing to serve. A server's side is the fabric's (one-sided
  // access needs no CPU; two-sided requests and offloaded work are calls its
  // service thread runs), a client's replies land through the fabric's own
  // progress, and a thread's batches in flight belong to the thread, not to
  // the worker it acts as: they land when it dereferences, waits for a far
  // future or ends their scope.
  // flush, settled: nothing of far memory travels when the job is left: a
  // Manager ends before its Job, and a server's Manager ends only once every
  // peer is done with its region (end_manager).

  // Waits for the write-backs on the network now (the evacuator's and other
  // threads'), progressing meanwhile, and throws the first failure among
  // them (a lost server's peer_failed).
  void quiet(std::uint32_t worker) override;
  // Misses and write-backs in flight to `process` fail by themselves: the
  // transfer layer's waits check their endpoint, and the fabric fails the
  // replies the process owes. The runtime records the loss
  // (Stats::lost_servers), and a replicated device stops using the
  // process's copies at once, so that the next batch goes to the survivors
  // rather than failing over one read at a time.
  void process_failed(std::uint32_t process, const std::string& why) override;

  // A job-backed Manager's number: 1, 2, ... in the order this process made
  // them, which every process shares since making one is collective.
  std::uint64_t begin_manager() noexcept { return ++managers_; }
  // Manager `manager` ends on this process, every transfer of it complete.
  // It tells each live server in `servers` (ranks) that it is done with its
  // region; when it serves one itself (`serving`), it then waits, serving
  // calls, until every other process is done with it too, has failed, or
  // has left the job without ending its Manager (its Job destroyed first:
  // it will never say it is done), and logs those it stopped waiting for.
  // Not a barrier: a barrier fails as soon as any
  // process has failed, and a server would then leave while its replicas
  // are still in use. Only live peers are waited for: one that dies
  // releases the server once the job learns of it (fabric-leaving.md, "Failures").
  void end_manager(std::uint64_t manager, std::span<const std::uint32_t> servers, bool serving);
  // `process` is done with Manager `manager`'s regions (its note, run by
  // this process's service thread).
  void peer_done(std::uint32_t process, std::uint64_t manager) noexcept;

 private:
  template <class F>
  void with_runtime(F&& f);

  std::atomic<Runtime*> runtime_{nullptr};
  std::atomic<std::uint32_t> hooks_running_{0};
  Job& job_;
  std::uint64_t managers_ = 0;  // the Managers' thread only
  // [process]: the last Manager it is done with.
  std::unique_ptr<std::atomic<std::uint64_t>[]> done_;
};

// The process's Job, nullptr when it has none.
Job* job_if_any() noexcept;
// Throws Errc::invalid_argument when the process has a far::Manager already.
void check_no_runtime(Job* job);
// A Manager's runtime becomes the process's: with `job`, through its far
// layer; without, as the in-process one.
void attach(Runtime& runtime, Job* job);
void detach(Runtime& runtime) noexcept;

}  // namespace rdmx::far::detail
