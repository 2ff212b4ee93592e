// Private to the fabric: the process's state of the worker collectives
// (rdmx/fabric/collective.hpp), kept by the Runtime and worked by
// collective.cpp.
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "rdmx/core/error.hpp"
#include "rdmx/fabric/collective.hpp"

namespace rdmx::fabric {
class Runtime;
}

namespace rdmx::fabric::detail {

// The root's open accumulators (process 0), released results waiting for
// this process's threads, and each worker's count of collectives.
class Collectives {
 public:
  explicit Collectives(std::uint32_t workers);
  std::uint64_t epoch_of(std::uint32_t worker) const { return epochs_[checked(worker)].load(std::memory_order_acquire); }
  // The calling worker enters its next collective: its number.
  std::uint64_t next_epoch(std::uint32_t worker) { return epochs_[checked(worker)].fetch_add(1, std::memory_order_acq_rel) + 1; }
  // At the root: one contribution to collective `ticket.epoch`, saying
  // `doing` ("called barrier", or what a worker that left Job::run's
  // function did); `combine` null for a worker stood in for. The last
  // releases every process, with the result or, when they disagree, with
  // the error.
  void fold(const Ticket& ticket, std::string_view doing, std::span<const std::byte> value, Combine combine);
  void release(std::uint64_t epoch, std::span<const std::byte> result);
  // Collective `epoch` failed with `code`: `text` says who did what.
  void release_failed(std::uint64_t epoch, Errc code, std::string_view text);
  // Copies collective `epoch`'s result once released (false before); the
  // last of `waiters` threads to take it frees it. Throws when the threads
  // met in different collectives.
  bool take(std::uint64_t epoch, std::span<std::byte> result, std::uint32_t waiters, const char* what);
  // Worker `worker` has left Job::run's function (`why`: returned, or
  // threw) while another worker thread of this process has entered a
  // collective it never will: contributes to it in its stead, as `why`, so
  // that the collective fails on every thread instead of waiting for ever,
  // and the next one starts in step. Called from the worker's wait at the
  // end of Job::run; does nothing while no other worker is ahead.
  void stand_in(std::uint32_t worker, std::string_view why);
  // At the root: fails every open collective that waits for the worker
  // threads of a process that waits in Job::barrier or Job::allgather
  // outside Job::run (so they enter none before that one completes), while
  // a process whose threads wait here has not entered that one: both would
  // wait for ever. The processes left out skip the failed collective, so
  // that the next starts in step.
  void break_cross_waits(Runtime& rt);
  // A process of the job has failed: no open collective can complete, and
  // its threads throw peer_failed on their own. The root forgets them, and
  // takes no contribution from now on (next_collective refuses to start one).
  void process_failed();
  // This process's worker threads, outside Job::run, take no part in
  // collective `epoch`, which failed without them: their next is the one
  // after it, and its release is not kept.
  void skip(std::uint64_t epoch);

 private:
  struct Open {
    std::uint32_t arrived = 0;
    std::vector<std::byte> acc;
    Combine combine = nullptr;
    bool mismatch = false;  // another collective, type or size than the first
    bool absent = false;    // a worker was stood in for
    std::vector<std::string> doing;     // what the participants did, each once
    std::vector<std::uint32_t> doer;    // [participant]: index into doing
  };
  struct Released {
    bool failed = false;  // `bytes`: the result, or when failed the error's text
    Errc code = Errc::invalid_argument;
    std::vector<std::byte> bytes;
    std::uint32_t taken = 0;
  };
  std::size_t checked(std::uint32_t worker) const;
  void store(std::uint64_t epoch, Released r);
  std::mutex mutex_;
  std::map<std::uint64_t, Open> open_;
  std::map<std::uint64_t, Released> released_;
  std::set<std::uint64_t> skipped_;  // failed without this process's threads: releases not kept
  std::map<std::uint64_t, std::uint32_t> broken_;  // at the root: failed early, contributions still to come
  bool failed_ = false;  // a process of the job failed: nothing is folded any more
  // The latest epoch released here: a waiter polls this, not the mutex
  // (a server waiting in a barrier checks once per progress round). Epochs
  // are released in order: one starts only after every thread took the last.
  std::atomic<std::uint64_t> released_up_to_{0};
  // Each worker's count, read by the others' stand_in.
  std::uint32_t workers_;
  std::unique_ptr<std::atomic<std::uint64_t>[]> epochs_;
};

}  // namespace rdmx::fabric::detail
