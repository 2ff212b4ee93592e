// Job::barrier and Job::allgather (job_collectives.hpp): contributions go
// to process 0's service thread, which releases every process with all of
// them once the last has arrived.
#include "job_collectives.hpp"

#include <algorithm>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "rdmx/core/backoff.hpp"
#include "rdmx/core/error.hpp"
#include "rdmx/fabric/call.hpp"
#include "collectives.hpp"
#include "runtime.hpp"

namespace rdmx::fabric::detail {
namespace {

const char* name_of(JobCollectives::Kind kind) { return kind == JobCollectives::Kind::barrier ? "barrier" : "allgather"; }

// "process 2 called barrier, processes 0 and 1 called allgather": a mismatch's
// blob, a Kind per process.
std::string who_called(std::span<const std::byte> kinds) {
  std::string text;
  for (const auto kind : {JobCollectives::Kind::barrier, JobCollectives::Kind::allgather}) {
    std::vector<std::size_t> callers;
    for (std::size_t p = 0; p < kinds.size(); ++p)
      if (static_cast<JobCollectives::Kind>(kinds[p]) == kind) callers.push_back(p);
    if (callers.empty()) continue;
    text += text.empty() ? (callers.size() == 1 ? "process " : "processes ") : (callers.size() == 1 ? ", process " : ", processes ");
    for (std::size_t i = 0; i < callers.size(); ++i)
      text += (i == 0 ? "" : i + 1 == callers.size() ? " and " : ", ") + std::to_string(callers[i]);
    text += std::string(" called ") + name_of(kind);
  }
  return text;
}

// The release of one collective on one process, as a service call; the
// blob travels as the call's buffer.
struct Release {
  std::uint64_t epoch;
  bool mismatch;
  void operator()(std::span<std::byte> blob) const { Runtime::current().job_collectives().release(epoch, mismatch, blob); }
};

// A contribution, run by the root's service thread.
struct Arrival {
  std::uint64_t epoch;
  std::uint32_t from;
  JobCollectives::Kind kind;
  bool outside_run;
  void operator()(std::span<std::byte> bytes) const {
    Runtime& rt = Runtime::current();
    rt.job_collectives().arrive(rt, epoch, from, kind, outside_run, bytes);
  }
};

}  // namespace

JobCollectives::JobCollectives(std::uint32_t processes)
    : processes_(processes),
      left_(std::make_unique<std::atomic<std::uint64_t>[]>(processes)),
      worker_left_(std::make_unique<std::atomic<std::uint64_t>[]>(processes)) {
  for (std::uint32_t p = 0; p < processes; ++p) {
    left_[p].store(not_left, std::memory_order_relaxed);
    worker_left_[p].store(not_left, std::memory_order_relaxed);
  }
}

std::vector<std::vector<std::byte>> JobCollectives::enter(Runtime& rt, Kind kind, std::span<const std::byte> mine) {
  const std::uint64_t epoch = ++entered_;
  const std::string what = std::string(name_of(kind)) + " (collective " + std::to_string(epoch) + " of the job)";
  if (processes_ == 1) return {std::vector<std::byte>(mine.begin(), mine.end())};
  auto check_peers = [&] {
    if (const std::int64_t p = left_before(epoch, false); p >= 0)
      throw Error(Errc::shut_down, what + ": process " + std::to_string(p) + " has left the job (its rdmx::Job was destroyed) after " +
                                       std::to_string(left_[p].load(std::memory_order_acquire)) +
                                       " collectives, without entering this one: every process must call the same "
                                       "collectives in the same order");
    for (std::uint32_t p = 0; p < processes_; ++p)
      if (rt.process_failed(p)) throw Error(Errc::peer_failed, what + ": process " + std::to_string(p) + " has failed");
  };
  check_peers();
  call_buffer(ThreadId{0, service_thread}, Arrival{epoch, rt.rank(), kind, !rt.in_run()}, mine);
  Backoff backoff;
  for (;;) {
    {
      std::lock_guard lock(mutex_);
      if (auto it = released_.find(epoch); it != released_.end()) {
        const Released r = std::move(it->second);
        released_.erase(it);
        if (r.mismatch)
          throw Error(Errc::invalid_argument, what + " met another collective on another process (" +
                                                  who_called(r.blob) +
                                                  "): every process must call the same collectives (Job::barrier, "
                                                  "Job::allgather) in the same order");
        std::vector<std::vector<std::byte>> all(processes_);
        std::size_t at = 0;
        for (auto& part : all) {
          std::uint64_t size = 0;
          std::memcpy(&size, r.blob.data() + at, sizeof size);
          at += sizeof size;
          part.assign(r.blob.begin() + static_cast<std::ptrdiff_t>(at), r.blob.begin() + static_cast<std::ptrdiff_t>(at + size));
          at += size;
        }
        return all;
      }
    }
    check_peers();
    // Peers may be waiting on this process's other threads, which have left Job::run.
    backoff(progress() + rt.serve_idle_workers() != 0);
  }
}

void JobCollectives::arrive(Runtime& rt, std::uint64_t epoch, std::uint32_t from, Kind kind, bool outside_run,
                            std::span<const std::byte> bytes) {
  if (rt.rank() != 0 || from >= processes_)
    throw Error(Errc::protocol, "a job collective's contribution from process " + std::to_string(from) +
                                    " reached process " + std::to_string(rt.rank()));
  Open done;
  bool complete = false;
  {
    std::lock_guard lock(mutex_);
    Open& open = open_[epoch];
    if (open.arrived == 0) {
      open.kind = kind;
      open.parts.resize(processes_);
      open.kinds.resize(processes_);
      open.arrived_from.resize(processes_);
      open.outside_run.resize(processes_);
    } else if (open.kind != kind) {
      open.mismatch = true;
    }
    open.kinds[from] = kind;
    open.parts[from].assign(bytes.begin(), bytes.end());
    open.arrived_from[from] = true;
    open.outside_run[from] = outside_run;
    if (outside_run) outside_run_open_.fetch_add(1, std::memory_order_acq_rel);
    complete = ++open.arrived == processes_;
    if (complete) {
      done = std::move(open);
      open_.erase(epoch);
      const auto outside = static_cast<std::uint32_t>(std::count(done.outside_run.begin(), done.outside_run.end(), true));
      outside_run_open_.fetch_sub(outside, std::memory_order_acq_rel);
    }
  }
  if (!complete) {
    // A process that waits here outside Job::run may be what worker
    // threads elsewhere wait for (outside the lock: it reads waiting()).
    if (outside_run) rt.collectives().break_cross_waits(rt);
    return;
  }
  // Released outside the lock: sending may run calls that take it. A
  // mismatch carries each process's kind instead of the parts, so that
  // every process can say who called what.
  std::vector<std::byte> blob;
  if (done.mismatch) {
    for (const Kind k : done.kinds) blob.push_back(static_cast<std::byte>(k));
  } else {
    for (const auto& part : done.parts) {
      const std::uint64_t size = part.size();
      const auto* s = reinterpret_cast<const std::byte*>(&size);
      blob.insert(blob.end(), s, s + sizeof size);
      blob.insert(blob.end(), part.begin(), part.end());
    }
  }
  for (std::uint32_t p = 0; p < processes_; ++p) {
    if (rt.process_failed(p)) continue;
    try {
      call_buffer(ThreadId{p, service_thread}, Release{epoch, done.mismatch}, blob);
    } catch (const Error&) {  // it failed or left meanwhile: its peers learn that on their own
    }
  }
}

JobCollectives::Waiting JobCollectives::waiting() {
  std::lock_guard lock(mutex_);
  if (open_.empty()) return {};
  const Open& open = open_.begin()->second;
  return Waiting{name_of(open.kind), open.arrived_from, open.outside_run};
}

void JobCollectives::release(std::uint64_t epoch, bool mismatch, std::span<const std::byte> blob) {
  std::lock_guard lock(mutex_);
  Released& r = released_[epoch];
  r.mismatch = mismatch;
  r.blob.assign(blob.begin(), blob.end());
}

void JobCollectives::note_left(std::uint32_t process, std::uint64_t entered, std::uint64_t worker_entered) {
  if (process >= processes_) return;
  left_[process].store(entered, std::memory_order_release);
  worker_left_[process].store(worker_entered, std::memory_order_release);
}

std::int64_t JobCollectives::left_before(std::uint64_t epoch, bool worker) const noexcept {
  const auto& left = worker ? worker_left_ : left_;
  for (std::uint32_t p = 0; p < processes_; ++p)
    if (left[p].load(std::memory_order_acquire) < epoch) return p;
  return -1;
}

}  // namespace rdmx::fabric::detail
