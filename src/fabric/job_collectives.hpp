// Private to the fabric: Job::barrier and Job::allgather, the collectives
// among processes, kept by the Runtime. Built from calls to process 0's
// service thread rather than the launcher's fence, for two reasons: waiting
// keeps serving calls (a peer blocked on a call to this process must not
// deadlock it), and a fence would match whatever fence a peer is in, such
// as the one of a peer leaving the job (~Job), and complete with data that
// was never sent. Every process counts the collectives it enters; the
// root releases collective n once every process has entered it. A process
// that leaves the job tells every peer how many it entered, so that a peer
// waiting in a later one fails at once, naming it, instead of waiting for
// ever.
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <vector>

namespace rdmx::fabric {
class Runtime;
}

namespace rdmx::fabric::detail {

// Left: the peer has not left (it may still enter any collective).
inline constexpr std::uint64_t not_left = ~std::uint64_t{0};

class JobCollectives {
 public:
  enum class Kind : std::uint8_t { barrier = 1, allgather = 2 };

  explicit JobCollectives(std::uint32_t processes);
  // The calling process's next collective: contributes `mine` and waits,
  // serving calls, for every process's contribution (indexed by rank).
  std::vector<std::vector<std::byte>> enter(Runtime& rt, Kind kind, std::span<const std::byte> mine);
  // How many collectives this process has entered (told to peers when it leaves).
  std::uint64_t entered() const noexcept { return entered_; }

  // At the root: `from`'s contribution to collective `epoch`; `outside_run`:
  // it was entered outside Job::run.
  void arrive(Runtime& rt, std::uint64_t epoch, std::uint32_t from, Kind kind, bool outside_run,
              std::span<const std::byte> bytes);
  // At the root: who waits in the oldest open collective, and which of them
  // entered it outside Job::run (their worker threads then enter no worker
  // collective before it completes). Empty vectors when none is open.
  struct Waiting {
    const char* name = "";
    std::vector<bool> arrived, outside_run;  // [process]
  };
  Waiting waiting();
  // Whether any process waits in an open collective outside Job::run (a
  // check without the lock, for the worker collectives' root).
  bool waited_outside_run() const noexcept { return outside_run_open_.load(std::memory_order_acquire) != 0; }
  // On every process: collective `epoch` ended with `blob` (every
  // contribution, sizes first), or with a mismatch (empty blob).
  void release(std::uint64_t epoch, bool mismatch, std::span<const std::byte> blob);
  // Peer `process` left the job having entered `entered` of these and
  // `worker_entered` of the worker collectives (rdmx::barrier and the like).
  void note_left(std::uint32_t process, std::uint64_t entered, std::uint64_t worker_entered);
  // Whether peer `process` has told this process that it leaves the job.
  bool left(std::uint32_t process) const noexcept {
    return process < processes_ && left_[process].load(std::memory_order_acquire) != not_left;
  }
  // The first process that left before entering job collective `epoch`
  // (worker: a worker collective), or -1.
  std::int64_t left_before(std::uint64_t epoch, bool worker) const noexcept;

 private:
  struct Open {
    std::uint32_t arrived = 0;
    Kind kind = Kind::barrier;
    bool mismatch = false;
    std::vector<std::vector<std::byte>> parts;
    std::vector<Kind> kinds;  // what each process called
    std::vector<bool> arrived_from, outside_run;  // [process]
  };
  struct Released {
    bool mismatch = false;
    std::vector<std::byte> blob;
  };
  std::uint32_t processes_;
  std::uint64_t entered_ = 0;  // the thread in Job::barrier/allgather only
  std::mutex mutex_;
  std::map<std::uint64_t, Open> open_;          // at the root
  std::map<std::uint64_t, Released> released_;  // here, until taken
  std::unique_ptr<std::atomic<std::uint64_t>[]> left_, worker_left_;  // [process]: entered when it left
  std::atomic<std::uint32_t> outside_run_open_{0};  // at the root: arrivals outside Job::run still open
};

}  // namespace rdmx::fabric::detail
