// Leaving a job: rounds of flush, fence and drain until nothing runs, the
// survivors' rounds after a failure, and the final shutdown.
#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <exception>
#include <map>
#include <string>
#include <utility>

#include "rdmx/core/backoff.hpp"
#include "rdmx/core/env.hpp"
#include "rdmx/core/error.hpp"
#include "rdmx/core/log.hpp"
#include "rdmx/fabric/call.hpp"
#include "rdmx/fabric/job.hpp"
#include "rdmx/transfer/status.hpp"
#include "collectives.hpp"
#include "runtime.hpp"

namespace rdmx::fabric {

void Runtime::drive(std::uint32_t worker, const std::function<void(ThreadContext&)>& what) {
  // Teardown acts as each worker in turn, holding its driver lock.
  std::lock_guard lock(contexts_[worker]->driver);
  set_current_context(contexts_[worker].get());
  what(*contexts_[worker]);
  set_current_context(nullptr);
}

void Runtime::flush_all(std::size_t layers) {
  for (std::uint32_t s = 0; s < workers(); ++s)
    drive(s, [&](ThreadContext& c) {
      for (std::size_t m = 0; m < layers; ++m) layer_list_[m].load()->flush(s);
      c.flush();
    });
}

bool Runtime::quiesce() {
  // Deliver what is still in flight. Each round: flush every worker's sends and
  // its layers' pending calls, wait for every process (then all of them
  // have landed), and run what arrived. Running calls may send more, so
  // rounds repeat until no process ran anything. The service thread keeps
  // serving meanwhile. A dead member would hold the launcher's fence
  // forever: give up on it as soon as any failure is known, here or by a
  // peer (a peer that takes a live process for failed, say after its own
  // send failed, leaves with the survivors and never joins the fence).
  auto any_failed = [this] {
    return any_process_failed() || survivors_leaving() || failures_reported_.load(std::memory_order_acquire);
  };
  unbind_current_thread();
  try {
    for (int round = 0;; ++round) {
      const std::size_t layers = layer_count_.load(std::memory_order_acquire);
      flush_all(layers);
      // A launcher that tolerates failures may complete the fence without a
      // dead member, so failures are checked after it too, and while draining
      // (a worker towards a dead peer can stay busy for ever).
      // While the fence waits for slower processes, this process's workers
      // keep running what peers send them: a peer still in its program may
      // be waiting for one of those calls before it can come here at all.
      // What runs then counts for this round, as what the drain runs does.
      std::uint64_t ran = 0;
      const bool fenced = bootstrap_->barrier([&] {
        ran += serve_idle_workers();
        return any_failed();
      });
      if (!fenced || any_failed()) return quiesce_survivors();
      bool gave_up = false;
      bool unsettled = false;
      for (std::uint32_t s = 0; s < workers() && !gave_up; ++s)
        drive(s, [&](ThreadContext& c) {
          std::size_t n = 0;
          for (int idle = 0; idle < 100;) {
            if (any_failed()) {
              gave_up = true;
              return;
            }
            bool active = true;
            n = 0;
            try {
              active = c.poll(&n);
            } catch (const Error& e) {  // e.g. a corrupted channel: reported, the rest still drains
              rdmx::log(rdmx::LogLevel::warn, "teardown: %s\n", e.what());
            }
            ran += n;
            idle = active ? 0 : idle + 1;
          }
          unsettled = unsettled || !c.flushes_settled();
          for (std::size_t m = 0; m < layers; ++m) unsettled = unsettled || !layer_list_[m].load()->settled(s);
        });
      if (gave_up) return quiesce_survivors();
      // A call still waiting on the network (its argument read from a
      // caller) keeps every process in the rounds: the next fence progresses
      // the caller, whose worker answers the read.
      const std::byte mine[1] = {static_cast<std::byte>(ran != 0 || unsettled)};
      bool any = false;
      // Every process is in here now, so nothing waits on this exchange;
      // what arrives meanwhile is run by the next round's drain.
      std::vector<std::vector<std::byte>> votes;
      try {
        votes = bootstrap_->allgather(mine, any_failed);
      } catch (const Error&) {
        if (!any_failed()) throw;
        return quiesce_survivors();
      }
      for (const auto& v : votes) any = any || v.at(0) != std::byte{0};
      if (!any) return true;
      if (round == 1000) {
        rdmx::log(rdmx::LogLevel::warn, "teardown: calls still running after %d rounds; giving up on them\n", round);
        return true;
      }
    }
  } catch (const Error& e) {
    if (any_failed()) return quiesce_survivors();  // the launcher's collectives fail with a dead member
    rdmx::log(rdmx::LogLevel::warn, "teardown collective failed: %s\n", e.what());
  }
  return false;
}

void Runtime::learn_failure(std::uint32_t process, std::uint32_t from) {
  // Survivors must agree on who is gone, or each waits for a process the
  // other has given up on. Noted now, applied when this process leaves (a
  // process still in its program keeps talking to whom it can reach).
  if (process >= size_ || from >= size_) return;
  std::lock_guard lock(failures_mutex_);
  reported_failures_.emplace_back(process, from);
  failures_reported_.store(true, std::memory_order_release);
}

void Runtime::apply_reported_failures() {
  std::vector<std::pair<std::uint32_t, std::uint32_t>> reported;
  {
    std::lock_guard lock(failures_mutex_);
    reported.swap(reported_failures_);
  }
  const std::uint32_t me = rank_;
  for (auto [process, from] : reported) {
    if (process == rank_) {
      // A live process could not reach this one: it leaves without the others.
      if (!excluded_.exchange(true))
        rdmx::log(rdmx::LogLevel::warn, "process %u: process %u could not reach this process; leaving without the others\n",
                  rank_, from);
      continue;
    }
    if (process_failed(process)) continue;
    try {  // it may still be reachable from here: tell it, or it would wait for us
      call(ThreadId{process, service_thread}, [process, me] { Runtime::current().learn_failure(process, me); });
    } catch (const Error&) {
    }
    peer_failed(process, "process " + std::to_string(process) + " could not be reached by process " + std::to_string(from));
  }
}

bool Runtime::survivors_leaving() const {
  for (std::uint32_t p = 0; p < size_; ++p)
    if (survivor_flushed_[p].load(std::memory_order_acquire) != 0) return true;
  return false;
}

void Runtime::survivor_note(bool vote, std::uint32_t from, std::uint64_t round, bool busy) {
  if (from >= size_) return;
  auto& mark = (vote ? survivor_voted_ : survivor_flushed_)[from];
  const std::uint64_t value = round * 2 + (busy ? 1 : 0);
  // Rounds only move forward; a late duplicate must not move one back.
  for (std::uint64_t seen = mark.load(std::memory_order_acquire); seen < value;)
    if (mark.compare_exchange_weak(seen, value, std::memory_order_acq_rel)) break;
}

bool Runtime::survivors_reach(const std::unique_ptr<std::atomic<std::uint64_t>[]>& marks, std::uint64_t round,
                              std::uint64_t& served) {
  Backoff backoff;
  while (apply_reported_failures(), !excluded()) {
    bool all = true, busy = false;
    for (std::uint32_t p = 0; p < size_; ++p) {
      if (p == rank_ || process_failed(p)) continue;
      const std::uint64_t m = marks[p].load(std::memory_order_acquire);
      if (m / 2 < round) all = false;
      else if (m / 2 == round && (m & 1) != 0) busy = true;
    }
    if (all) return busy;
    // Serve meanwhile: a live peer may still be in its program, calling us.
    bool active = false;
    served += serve_idle_workers(&active);
    backoff(active);
  }
  return false;
}

bool Runtime::quiesce_survivors() {
  // Each round: flush, tell every live process "flushed", wait for theirs
  // (what they sent us has landed then), drain, vote, wait for the votes.
  // The notes are send-based calls to the service threads, which keep
  // running; a process that fails meanwhile drops out of the waits.
  rdmx::log(rdmx::LogLevel::info, "process %u: leaving with the processes still alive\n", rank_);
  auto tell = [&](bool vote, std::uint64_t round, bool busy) {
    const std::uint32_t me = rank_;
    for (std::uint32_t p = 0; p < size_; ++p) {
      if (p == rank_ || process_failed(p)) continue;
      try {
        call(ThreadId{p, service_thread},
             [vote, me, round, busy] { Runtime::current().survivor_note(vote, me, round, busy); });
      } catch (const Error&) {  // it failed just now: it drops out of the waits
      }
    }
  };
  apply_reported_failures();
  // Who this process takes for failed, so that every survivor agrees.
  const std::uint32_t me = rank_;
  for (std::uint32_t f = 0; f < size_; ++f) {
    if (f == rank_ || !process_failed(f)) continue;
    for (std::uint32_t p = 0; p < size_; ++p) {
      if (p == rank_ || process_failed(p)) continue;
      try {
        call(ThreadId{p, service_thread}, [f, me] { Runtime::current().learn_failure(f, me); });
      } catch (const Error&) {
      }
    }
  }
  const std::size_t layers = layer_count_.load(std::memory_order_acquire);
  for (std::uint64_t round = 1; round <= 1000 && !excluded(); ++round) {
    flush_all(layers);
    tell(false, round, false);
    std::uint64_t ran = 0;
    survivors_reach(survivor_flushed_, round, ran);  // what they sent us before their note has landed
    bool unsettled = false;
    for (std::uint32_t s = 0; s < workers(); ++s)
      drive(s, [&](ThreadContext& c) {
        // Bounded: a worker whose calls go to a dead peer may stay busy.
        for (int idle = 0, polls = 0; idle < 100 && polls < 1000000; ++polls) {
          std::size_t n = 0;
          bool active = true;
          try {
            active = c.poll(&n);
          } catch (const Error& e) {
            rdmx::log(rdmx::LogLevel::warn, "teardown: %s\n", e.what());
          }
          ran += n;
          idle = active ? 0 : idle + 1;
        }
        unsettled = unsettled || !c.flushes_settled();
        for (std::size_t m = 0; m < layers; ++m) unsettled = unsettled || !layer_list_[m].load()->settled(s);
      });
    // Every survivor decides from the same votes. A call whose argument is
    // still being read keeps the rounds going, for a while: one read from a
    // process that died may never settle.
    const bool mine = ran != 0 || (unsettled && round < 20);
    tell(true, round, mine);
    const bool busy = survivors_reach(survivor_voted_, round, ran) || mine;
    if (!busy) return false;
  }
  if (excluded()) return false;
  rdmx::log(rdmx::LogLevel::warn, "teardown: calls still running after 1000 rounds; giving up on them\n");
  return false;
}

void Runtime::tell_leaving() {
  // A peer waiting in a collective this process never entered would wait
  // for ever (the launcher's fence in quiesce() is no collective of its):
  // tell every peer how many of each kind this process entered, so that
  // such a wait fails at once, naming this process.
  const std::uint32_t me = rank_;
  const std::uint64_t entered = job_collectives_->entered();
  std::uint64_t worker_entered = detail::not_left;
  for (std::uint32_t t = 0; t < threads_; ++t) worker_entered = std::min(worker_entered, collectives_->epoch_of(t));
  for (std::uint32_t p = 0; p < size_; ++p) {
    if (p == rank_ || process_failed(p)) continue;
    try {
      call(ThreadId{p, service_thread}, [me, entered, worker_entered] {
        Runtime::current().job_collectives().note_left(me, entered, worker_entered);
      });
    } catch (const Error&) {  // it failed just now: nothing waits there
    }
  }
}

void Runtime::shutdown() {
  if (shut_down_) return;
  shut_down_ = true;
  stop_helpers();
  for (std::size_t i = 0; i < layer_count_.load(std::memory_order_acquire); ++i) {
    try {
      layer_list_[i].load(std::memory_order_relaxed)->leaving();
    } catch (const std::exception& e) {  // leaving goes on: peers must still be told
      rdmx::log(rdmx::LogLevel::warn, "process %u: leaving the job: %s\n", rank_, e.what());
    }
  }
  tell_leaving();
  const bool clean = quiesce();
  // Nothing is in flight any more. Peers now close their endpoints, which
  // is not a failure; and none closes before all have got here, else one
  // still waiting in the last collective would take the closing for a death.
  shutting_down_.store(true, std::memory_order_release);
  if (clean) {
    // Failures are no longer reported now, but a peer that left without this
    // barrier (it saw a failure we did not) must not hold us: look for it.
    auto next_look = std::chrono::steady_clock::now();
    bootstrap_->barrier([&] {
      if (std::chrono::steady_clock::now() < next_look) return false;
      next_look = std::chrono::steady_clock::now() + std::chrono::milliseconds(100);
      for (std::uint32_t p = 0; p < size_; ++p)
        if (p != rank_ && same_host(p) && !process_alive(pids_[p])) return true;
      return false;
    });
  }
  if (main_affinity_saved_) pthread_setaffinity_np(pthread_self(), sizeof main_affinity_, &main_affinity_);
  stop_.store(true, std::memory_order_release);
  service().worker().signal();
  if (service_thread_.joinable()) service_thread_.join();
}

Runtime::~Runtime() {
  shutdown();
  layer_count_.store(0, std::memory_order_release);
  layers_.clear();  // before the contexts and arenas their state lives in
  contexts_.clear();
  if (current_ == this) {
    current_ = nullptr;
    rdmx::detail::set_job_leaver(nullptr);
  }
}

}  // namespace rdmx::fabric
