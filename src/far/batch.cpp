#include "batch.hpp"

#include <algorithm>
#include <utility>

#include "rdmx/core/error.hpp"
#include "rdmx/core/log.hpp"
#include "runtime.hpp"

namespace rdmx::far::detail {
namespace {
// The calling thread's unfinished batches: a dereference of one of their
// objects finishes the batch instead of waiting for itself.
thread_local std::vector<Batch*> started_here;
// The calling thread's batches that no InFlight holds (prefetches, futures'),
// finished by a wait for a far future (land_detached) or when their scope ends.
thread_local std::vector<std::unique_ptr<Batch>> detached_here;
}  // namespace

void Batch::start() {
  std::vector<Device::Transfer> transfers;
  try {
    transfers.reserve(claims.size());
    Cache& cache = runtime.cache();
    for (const Claim& c : claims)
      transfers.push_back({state::server_of(c.remote), state::offset_of(c.remote), cache.address(c.frame), bytes});
    reads = runtime.device().start_reads(std::move(transfers));
    started_here.push_back(this);
  } catch (...) {
    if (reads != nullptr) {
      finish_quietly();
    } else {
      runtime.cache().give_back(claims);
      done = true;
    }
    throw;
  }
}

void Batch::finish() {
  if (done) {
    if (failure) std::rethrow_exception(failure);
    return;
  }
  done = true;
  std::erase(started_here, this);
  try {
    reads->finish();
    runtime.check_current(claims);  // freed and reused while the reads travelled
  } catch (...) {
    runtime.cache().give_back(claims);
    failure = std::current_exception();
    throw;
  }
  runtime.publish(claims, *scope, access);
  for (const Claim& c : claims) out[c.index] = runtime.cache().address(c.frame);
  for (std::size_t i : repeated) out[i] = deref(*words[i], bytes, *scope, access);
}

void Batch::finish_quietly() noexcept {
  try {
    finish();
  } catch (...) {
  }
}

void Batch::settle() noexcept {
  if (promise == nullptr) return;
  auto p = std::exchange(promise, nullptr);
  if (failure)
    p->set_exception(failure);
  else if (scope_ended)
    p->set_error(Errc::invalid_argument, "far: the DerefScope of a dereference future ended before the future was waited for");
  else
    p->set_value(out[0]);
}

Batch* Batch::fetching(const StateWord& word) noexcept {
  for (Batch* b : started_here)
    for (const Claim& c : b->claims)
      if (c.word == &word) return b;
  return nullptr;
}

void Batch::reserve_detached() {
  if (detached_here.size() == detached_here.capacity()) detached_here.reserve(2 * detached_here.size() + 8);
}

void Batch::detach(std::unique_ptr<Batch> batch) noexcept { detached_here.push_back(std::move(batch)); }

bool Batch::land_detached(void*) {
  if (detached_here.empty()) return false;
  std::vector<std::unique_ptr<Batch>> batches = std::move(detached_here);
  detached_here.clear();
  // A failure stays in the batch: the future reports it; a prefetch is dropped.
  for (auto& b : batches) b->finish_quietly();
  // Continuations run now and may start new batches (into detached_here).
  for (auto& b : batches) b->settle();
  return true;
}

void Batch::land_into(DerefScope& scope) noexcept {
  if (started_here.empty() && detached_here.empty()) return;
  // Finishing one batch may finish another (a pointer named twice), so
  // each round looks again for the first one left.
  for (;;) {
    const auto it = std::find_if(started_here.begin(), started_here.end(), [&](const Batch* b) { return b->scope == &scope; });
    if (it == started_here.end()) break;
    Batch& b = **it;
    b.scope_ended = true;
    try {
      b.finish();
    } catch (const std::exception& e) {
      // A prefetch is dropped, a future reports it; a batch an InFlight
      // holds reports it again when finished.
      if (b.own_words.empty()) rdmx::log(rdmx::LogLevel::error, "far: a batch of dereferences unfinished when its scope ended failed: %s", e.what());
    } catch (...) {
    }
  }
  for (;;) {
    const auto it = std::find_if(detached_here.begin(), detached_here.end(), [&](const auto& b) { return b->scope == &scope; });
    if (it == detached_here.end()) break;
    std::unique_ptr<Batch> b = std::move(*it);
    detached_here.erase(it);
    b->scope_ended = true;
    b->settle();  // may run continuations that start batches of their own
  }
}

InFlight::InFlight(std::unique_ptr<Batch> batch) noexcept : batch_(std::move(batch)) {}

InFlight::~InFlight() {
  if (batch_ == nullptr || batch_->done) return;
  try {
    finish();
  } catch (const std::exception& e) {
    rdmx::log(rdmx::LogLevel::error, "far: a batch of dereferences nobody finished failed: %s", e.what());
  }
}

void InFlight::finish() {
  if (batch_ != nullptr) batch_->finish();
}

}  // namespace rdmx::far::detail
