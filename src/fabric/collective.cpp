// Collectives of worker threads (rdmx/fabric/collective.hpp): every worker
// sends its contribution to one root, process 0's service thread, which
// folds them and releases every process with the result. The root and the
// release are service calls, so they run whatever the worker threads do.
#include "rdmx/fabric/collective.hpp"

#include <algorithm>
#include <array>
#include <cstdio>
#include <string>

#include "rdmx/core/backoff.hpp"
#include "collectives.hpp"
#include "runtime.hpp"

namespace rdmx::fabric::detail {
namespace {

// The release of collective `epoch` on one process, as a service call.
struct Release {
  std::uint64_t epoch;
  std::uint32_t size;
  std::array<std::byte, max_collective_value> bytes;
  void operator()() const { Runtime::current().collectives().release(epoch, {bytes.data(), size}); }
};

// A collective that failed, its text (who did what) as the call's buffer.
struct ReleaseFailed {
  std::uint64_t epoch;
  Errc code;
  void operator()(std::span<std::byte> text) const {
    Runtime::current().collectives().release_failed(epoch, code, {reinterpret_cast<const char*>(text.data()), text.size()});
  }
};

// Collective `epoch` failed without this process's threads (Collectives::skip).
struct Skip {
  std::uint64_t epoch;
  void operator()() const { Runtime::current().collectives().skip(epoch); }
};

// A worker that left Job::run's function, stood in for (Collectives::stand_in).
struct Absence {
  Ticket ticket;
  std::array<char, 160> why;
  void operator()() const {
    Runtime& rt = Runtime::current();
    if (rt.rank() != 0) throw Error(Errc::protocol, "a collective's contribution reached process " + std::to_string(rt.rank()));
    rt.collectives().fold(ticket, {why.data(), strnlen(why.data(), why.size())}, {}, nullptr);
  }
};

// Sent to every process that can still take it: one that failed or left
// meanwhile is given up on, and its peers learn that on their own.
template <class Send>
void to_every_process(Send send) {
  Runtime& rt = Runtime::current();
  for (std::uint32_t p = 0; p < rt.size(); ++p) {
    if (rt.process_failed(p)) continue;
    try {
      send(ThreadId{p, service_thread});
    } catch (const Error&) {
    }
  }
}

// Collective `epoch` failed with `code` on every process; `text` says why.
void fail_everywhere(std::uint64_t epoch, Errc code, const std::string& text) {
  const std::span<const std::byte> bytes{reinterpret_cast<const std::byte*>(text.data()), text.size()};
  to_every_process([&](ThreadId service) { call_buffer(service, ReleaseFailed{epoch, code}, bytes); });
}

// "process 0 thread 0 and process 1 thread 1 called barrier; process 1
// thread 0 called allreduce<8 bytes>", a few names per group at most.
std::string who_did_what(const std::vector<std::string>& doing, const std::vector<std::uint32_t>& doer, std::uint32_t threads) {
  constexpr std::size_t named = 4;
  std::string text;
  for (std::uint32_t d = 0; d < doing.size(); ++d) {
    std::vector<std::uint32_t> who;
    for (std::uint32_t i = 0; i < doer.size(); ++i)
      if (doer[i] == d) who.push_back(i);
    if (!text.empty()) text += "; ";
    // "and 1 other thread" says no more than naming it.
    const std::size_t shown = who.size() <= named + 1 ? who.size() : named;
    for (std::size_t k = 0; k < shown; ++k) {
      const bool last = k + 1 == who.size();
      text += (k == 0 ? "" : last ? " and " : ", ") + std::string("process ") + std::to_string(who[k] / threads) +
              " thread " + std::to_string(who[k] % threads);
    }
    if (shown < who.size()) text += " and " + std::to_string(who.size() - shown) + " other threads";
    text += " " + doing[d];
  }
  return text;
}

}  // namespace

Collectives::Collectives(std::uint32_t workers)
    : workers_(workers), epochs_(std::make_unique<std::atomic<std::uint64_t>[]>(workers)) {
  for (std::uint32_t w = 0; w < workers; ++w) epochs_[w].store(0, std::memory_order_relaxed);
}

std::size_t Collectives::checked(std::uint32_t worker) const {
  if (worker >= workers_)
    throw Error(Errc::invalid_argument, "worker " + std::to_string(worker) + " takes no part in the worker collectives");
  return worker;
}

void Collectives::fold(const Ticket& ticket, std::string_view doing, std::span<const std::byte> value, Combine combine) {
  Runtime& rt = Runtime::current();
  const std::uint32_t threads = rt.threads();
  const std::uint32_t index = ticket.from.process * threads + ticket.from.thread;
  if (ticket.from.process >= rt.size() || ticket.from.thread >= threads || ticket.participants != rt.size() * threads)
    throw Error(Errc::protocol, "a collective's contribution from " + to_string(ticket.from) + " names no worker thread");
  Open done;
  bool complete = false;
  {
    std::lock_guard lock(mutex_);
    if (failed_) return;  // it can never complete; its thread throws peer_failed
    if (auto late = broken_.find(ticket.epoch); late != broken_.end()) {
      if (--late->second == 0) broken_.erase(late);
      return;  // failed before it came (break_cross_waits): its thread takes the failure
    }
    Open& open = open_[ticket.epoch];
    if (open.arrived == 0) open.doer.assign(ticket.participants, ~0u);
    // What it did, as the others did it: the first of each kind is kept.
    auto it = std::find(open.doing.begin(), open.doing.end(), doing);
    if (it == open.doing.end()) it = open.doing.insert(open.doing.end(), std::string(doing));
    open.doer[index] = static_cast<std::uint32_t>(it - open.doing.begin());
    if (combine == nullptr) {
      open.absent = true;
    } else if (open.combine == nullptr) {  // the first that called one
      open.acc.assign(value.begin(), value.end());
      open.combine = combine;
    } else if (open.acc.size() != value.size() || open.combine != combine) {
      open.mismatch = true;
    } else {
      combine(open.acc.data(), value.data());
    }
    if (open.doing.size() > 1) open.mismatch = true;
    // Every participant's contribution, whatever it was: released any
    // earlier, the late ones would open this collective again, for good.
    complete = ++open.arrived == ticket.participants;
    if (complete) {
      done = std::move(open);
      open_.erase(ticket.epoch);
    }
  }
  if (!complete) {
    // Outside the lock: it reads the job collectives' state.
    if (rt.job_collectives().waited_outside_run()) break_cross_waits(rt);
    return;
  }
  // Released outside the lock: sending may run calls that take it.
  if (done.mismatch || done.absent)
    return fail_everywhere(ticket.epoch, done.absent ? Errc::shut_down : Errc::invalid_argument,
                           who_did_what(done.doing, done.doer, threads));
  Release r{ticket.epoch, static_cast<std::uint32_t>(done.acc.size()), {}};
  std::memcpy(r.bytes.data(), done.acc.data(), done.acc.size());
  to_every_process([&](ThreadId service) { call(service, r); });
}

void Collectives::break_cross_waits(Runtime& rt) {
  const JobCollectives::Waiting job = rt.job_collectives().waiting();
  if (job.arrived.empty()) return;
  const std::uint32_t threads = rt.threads();
  struct Broken {
    std::uint64_t epoch;
    std::vector<std::uint32_t> outside;  // waiting in the job collective outside Job::run, threads missing here
    std::vector<std::uint32_t> here;     // threads here, not in the job collective
  };
  std::vector<Broken> broken;
  {
    std::lock_guard lock(mutex_);
    for (auto it = open_.begin(); it != open_.end();) {
      Broken b{it->first, {}, {}};
      for (std::uint32_t p = 0; p < job.arrived.size(); ++p) {
        bool some_here = false, some_missing = false;
        for (std::uint32_t t = 0; t < threads; ++t) {
          const std::size_t i = std::size_t{p} * threads + t;
          (i < it->second.doer.size() && it->second.doer[i] != ~0u ? some_here : some_missing) = true;
        }
        if (some_missing && job.outside_run[p]) b.outside.push_back(p);
        if (some_here && !job.arrived[p]) b.here.push_back(p);
      }
      if (b.outside.empty() || b.here.empty()) {
        ++it;
        continue;
      }
      // Threads of the other processes may still come to it: their
      // contributions are dropped, not taken for a new collective.
      std::uint32_t late = 0;
      for (std::size_t i = 0; i < it->second.doer.size(); ++i)
        if (it->second.doer[i] == ~0u && !job.outside_run[i / threads]) ++late;
      if (late != 0) broken_[it->first] = late;
      broken.push_back(std::move(b));
      it = open_.erase(it);
    }
  }
  auto list = [](const std::vector<std::uint32_t>& ps) {
    std::string text = ps.size() == 1 ? "process " : "processes ";
    for (std::size_t i = 0; i < ps.size(); ++i)
      text += (i == 0 ? "" : i + 1 == ps.size() ? " and " : ", ") + std::to_string(ps[i]);
    return text;
  };
  // Outside the lock: sending may run calls that take it. The skips go
  // first: calls from this thread to another run in order.
  for (const Broken& b : broken) {
    for (std::uint32_t p : b.outside) {
      try {
        call(ThreadId{p, service_thread}, Skip{b.epoch});
      } catch (const Error&) {  // it failed or left meanwhile: nothing of it waits
      }
    }
    fail_everywhere(b.epoch, Errc::shut_down,
                    list(b.outside) + " waits in Job::" + job.name + " outside Job::run, so its worker threads "
                    "enter no collective before that one completes, and it waits for " + list(b.here) +
                    ", whose worker threads wait in this one");
  }
}

void Collectives::process_failed() {
  std::lock_guard lock(mutex_);
  failed_ = true;
  open_.clear();
  broken_.clear();
}

void Collectives::skip(std::uint64_t epoch) {
  std::lock_guard lock(mutex_);
  for (std::uint32_t w = 0; w < workers_; ++w)
    if (epochs_[w].load(std::memory_order_acquire) < epoch) epochs_[w].store(epoch, std::memory_order_release);
  skipped_.insert(epoch);
}

void Collectives::store(std::uint64_t epoch, Released r) {
  std::lock_guard lock(mutex_);
  if (skipped_.erase(epoch) != 0) return;  // its threads never take it
  released_[epoch] = std::move(r);
  if (epoch > released_up_to_.load(std::memory_order_relaxed)) released_up_to_.store(epoch, std::memory_order_release);
}

void Collectives::release(std::uint64_t epoch, std::span<const std::byte> result) {
  store(epoch, Released{false, Errc::invalid_argument, {result.begin(), result.end()}, 0});
}

void Collectives::release_failed(std::uint64_t epoch, Errc code, std::string_view text) {
  const auto* bytes = reinterpret_cast<const std::byte*>(text.data());
  store(epoch, Released{true, code, {bytes, bytes + text.size()}, 0});
}

bool Collectives::take(std::uint64_t epoch, std::span<std::byte> result, std::uint32_t waiters, const char* what) {
  if (released_up_to_.load(std::memory_order_acquire) < epoch) return false;
  std::unique_lock lock(mutex_);
  auto it = released_.find(epoch);
  if (it == released_.end()) return false;
  const Released& r = it->second;
  const bool failed = r.failed;
  const Errc code = r.code;
  std::string text;
  if (failed)
    text.assign(reinterpret_cast<const char*>(r.bytes.data()), r.bytes.size());
  else
    std::memcpy(result.data(), r.bytes.data(), std::min(result.size(), r.bytes.size()));
  // The last of this process's worker threads to read it forgets it.
  if (++it->second.taken == waiters) released_.erase(it);
  lock.unlock();
  if (!failed) return true;
  const std::string head = std::string(what) + " (collective " + std::to_string(epoch) + " of the worker threads)";
  if (code == Errc::shut_down)
    throw Error(code, head + " cannot complete: " + text +
                          ": every worker thread must call the same collectives, and none may leave Job::run's "
                          "function while the others still enter them");
  throw Error(code, head + " met different collectives: " + text +
                        ": every worker thread must call the same collectives, with the same types, in the same order");
}

void Collectives::stand_in(std::uint32_t worker, std::string_view why) {
  const std::uint64_t mine = epoch_of(worker);
  bool behind = false;
  for (std::uint32_t w = 0; w < workers_ && !behind; ++w) behind = epochs_[w].load(std::memory_order_acquire) > mine;
  if (!behind) return;
  Runtime& rt = Runtime::current();
  Absence absence{Ticket{next_epoch(worker), rt.size() * rt.threads(), ThreadId{rt.rank(), worker}, {}}, {}};
  std::snprintf(absence.why.data(), absence.why.size(), "%.*s", static_cast<int>(why.size()), why.data());
  try {
    call(ThreadId{0, service_thread}, absence);
    // Taken like the others' (the last to take it frees it); its error is
    // theirs to report.
    await_collective(absence.ticket, {}, "a collective stood in for");
  } catch (const Error&) {
  }
}

Ticket next_collective(const char* what, std::size_t bytes) {
  Runtime& rt = Runtime::current();
  if (current_context == nullptr || current_context->id().is_service() || current_context->id().thread >= rt.threads())
    throw Error(Errc::invalid_argument, std::string(what) + " is for the worker threads of Job::run");
  // One that cannot complete is not started.
  for (std::uint32_t p = 0; p < rt.size(); ++p)
    if (rt.process_failed(p)) throw Error(Errc::peer_failed, std::string(what) + ": " + rt.failure_of(p));
  const ThreadId me = current_context->id();
  Ticket ticket{rt.collectives().next_epoch(me.thread), rt.size() * rt.threads(), me, {}};
  if (bytes == 0)
    std::snprintf(ticket.what.data(), ticket.what.size(), "%s", what);
  else
    std::snprintf(ticket.what.data(), ticket.what.size(), "%s<%zu bytes>", what, bytes);
  return ticket;
}

void contribute(const Ticket& ticket, std::span<const std::byte> value, Combine combine) {
  Runtime& rt = Runtime::current();
  if (rt.rank() != 0) throw Error(Errc::protocol, "a collective's contribution reached process " + std::to_string(rt.rank()));
  const std::string_view what{ticket.what.data(), strnlen(ticket.what.data(), ticket.what.size())};
  rt.collectives().fold(ticket, "called " + std::string(what), value, combine);
}

void await_collective(const Ticket& ticket, std::span<std::byte> result, const char* what) {
  Runtime& rt = Runtime::current();
  Backoff backoff;
  while (!rt.collectives().take(ticket.epoch, result, rt.threads(), what)) {
    for (std::uint32_t p = 0; p < rt.size(); ++p)
      if (rt.process_failed(p))
        throw Error(Errc::peer_failed, std::string(what) + ": process " + std::to_string(p) + " has failed");
    if (const std::int64_t p = rt.job_collectives().left_before(ticket.epoch, true); p >= 0)
      throw Error(Errc::shut_down, std::string(what) + " (collective " + std::to_string(ticket.epoch) + " of the worker threads): process " +
                                       std::to_string(p) + " has left the job (its rdmx::Job was destroyed) without entering it: "
                                       "every worker thread must call the same collectives in the same order");
    backoff(progress() != 0);
  }
}

}  // namespace rdmx::fabric::detail
