// Collectives of worker threads (rdmx/fabric/collective.hpp): every worker
// sends its contribution to one root, process 0's service thread, which
// folds them and releases every process with the result. The root and the
// release are service calls, so they run whatever the worker threads do.
#include "rdmx/fabric/collective.hpp"

#include <array>
#include <string>

#include "rdmx/core/backoff.hpp"
#include "collectives.hpp"
#include "runtime.hpp"

namespace rdmx::fabric::detail {
namespace {

// A released collective whose contributions did not match (threads called
// different collectives): every waiting thread throws instead of hanging.
constexpr std::uint32_t mismatched = ~0u;

// The release of collective `epoch` on one process, as a service call.
struct Release {
  std::uint64_t epoch;
  std::uint32_t size;  // or `mismatched`
  std::array<std::byte, max_collective_value> bytes;
  void operator()() const {
    Runtime::current().collectives().release(epoch, size == mismatched, {bytes.data(), size == mismatched ? 0 : size});
  }
};

void release_everywhere(const Release& r) {
  Runtime& rt = Runtime::current();
  for (std::uint32_t p = 0; p < rt.size(); ++p) call(ThreadId{p, service_thread}, r);
}

}  // namespace

void Collectives::fold(const Ticket& ticket, std::span<const std::byte> value, Combine combine) {
  Open done;
  bool mismatch = false;
  {
    std::lock_guard lock(mutex_);
    Open& open = open_[ticket.epoch];
    if (open.arrived == 0) {
      open.acc.assign(value.begin(), value.end());
      open.combine = combine;
    } else if (open.acc.size() != value.size() || open.combine != combine) {
      mismatch = true;
    } else {
      combine(open.acc.data(), value.data());
    }
    if (!mismatch && ++open.arrived < ticket.participants) return;
    done = std::move(open);
    open_.erase(ticket.epoch);
  }
  // Released outside the lock: sending may run calls that take it.
  if (mismatch) return release_everywhere(Release{ticket.epoch, mismatched, {}});
  Release r{ticket.epoch, static_cast<std::uint32_t>(done.acc.size()), {}};
  std::memcpy(r.bytes.data(), done.acc.data(), done.acc.size());
  release_everywhere(r);
}

void Collectives::release(std::uint64_t epoch, bool mismatch, std::span<const std::byte> result) {
  std::lock_guard lock(mutex_);
  Released& r = released_[epoch];
  r.mismatch = mismatch;
  r.bytes.assign(result.begin(), result.end());
  if (epoch > released_up_to_.load(std::memory_order_relaxed)) released_up_to_.store(epoch, std::memory_order_release);
}

bool Collectives::take(std::uint64_t epoch, std::span<std::byte> result, std::uint32_t waiters, const char* what) {
  if (released_up_to_.load(std::memory_order_acquire) < epoch) return false;
  std::lock_guard lock(mutex_);
  auto it = released_.find(epoch);
  if (it == released_.end()) return false;
  const bool mismatch = it->second.mismatch;
  if (!mismatch) std::memcpy(result.data(), it->second.bytes.data(), std::min(result.size(), it->second.bytes.size()));
  // The last of this process's worker threads to read it forgets it.
  if (++it->second.taken == waiters) released_.erase(it);
  if (mismatch)
    throw Error(Errc::invalid_argument, std::string(what) + " (collective " + std::to_string(epoch) +
                                            ") met different collectives on other threads: every worker thread must "
                                            "call the same collectives, with the same types, in the same order");
  return true;
}

Ticket next_collective(const char* what) {
  Runtime& rt = Runtime::current();
  if (current_context == nullptr || current_context->id().is_service() || current_context->id().thread >= rt.threads())
    throw Error(Errc::invalid_argument, std::string(what) + " is for the worker threads of Job::run");
  return Ticket{++rt.collectives().epoch_of(current_context->id().thread), rt.size() * rt.threads()};
}

void contribute(const Ticket& ticket, std::span<const std::byte> value, Combine combine) {
  Runtime& rt = Runtime::current();
  if (rt.rank() != 0) throw Error(Errc::protocol, "a collective's contribution reached process " + std::to_string(rt.rank()));
  rt.collectives().fold(ticket, value, combine);
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
