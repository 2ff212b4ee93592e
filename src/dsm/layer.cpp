#include "layer.hpp"

#include "engine.hpp"
#include "rdmx/core/error.hpp"

namespace rdmx::dsm {

Layer::Layer(Job& job)
    : rank_(job.rank()),
      processes_(job.size()),
      ended_(job.size()),
      failed_(std::make_unique<std::atomic<bool>[]>(job.size())),
      why_(job.size()) {
  // Failures reported before the first Space made this layer.
  for (std::uint32_t p = 0; p < processes_; ++p)
    if (job.process_failed(p)) process_failed(p, "process " + std::to_string(p) + " has failed");
}

Engine& Layer::require(const char* what) {
  // The API's calls are as cheap as a mutex's round trip: the worker keeps
  // the layer in its word, and looks it up through the Job only once.
  void** word = fabric::acting_word<Layer>();
  Layer* layer = word != nullptr ? static_cast<Layer*>(*word) : nullptr;
  if (layer == nullptr) [[unlikely]] {
    try {
      layer = &fabric::layer<Layer>(Job::current());
    } catch (const Error&) {  // no Job: no Space either
    }
    if (word != nullptr) *word = layer;
  }
  Engine* engine = layer != nullptr ? layer->engine() : nullptr;
  if (engine == nullptr) [[unlikely]]
    throw Error(Errc::invalid_argument,
                std::string("dsm::") + what + ": no dsm::Space in this process (construct one after the rdmx::Job)");
  return *engine;
}

std::uint64_t Layer::open(Engine& engine) {
  Engine* none = nullptr;
  if (!engine_.compare_exchange_strong(none, &engine, std::memory_order_acq_rel))
    throw Error(Errc::invalid_argument, "dsm: this process already has a dsm::Space");
  return ++spaces_;
}

void Layer::space_ended(std::uint32_t process, std::uint64_t space, std::uint64_t barriers, std::uint32_t failed) noexcept {
  if (process >= processes_) return;
  std::lock_guard lock(ended_mutex_);
  ended_[process] = {process, space, barriers, failed, endings_.load(std::memory_order_relaxed) + 1};
  endings_.fetch_add(1, std::memory_order_acq_rel);
}

Layer::Ended Layer::ended_before(std::uint64_t space, std::uint64_t target) const {
  // The first to have said so: the others may have ended theirs only
  // because their own barrier failed on its account.
  std::lock_guard lock(ended_mutex_);
  Ended first;
  for (std::uint32_t p = 0; p < processes_; ++p) {
    const Ended& e = ended_[p];
    if (p != rank_ && e.space == space && e.barriers < target && (first.process == no_process || e.order < first.order)) first = e;
  }
  return first;
}

bool Layer::ended(std::uint32_t process, std::uint64_t space) const {
  std::lock_guard lock(ended_mutex_);
  return process < processes_ && ended_[process].space == space;
}

void Layer::close(Engine& engine) noexcept {
  Engine* open = &engine;
  engine_.compare_exchange_strong(open, nullptr, std::memory_order_acq_rel);
}

std::uint32_t Layer::failed(std::uint32_t process) const noexcept {
  if (process != no_process) return process < processes_ && failed_[process].load(std::memory_order_acquire) ? process : no_process;
  for (std::uint32_t p = 0; p < processes_; ++p)
    if (p != rank_ && failed_[p].load(std::memory_order_acquire)) return p;
  return no_process;
}

std::string Layer::why(std::uint32_t process) const {
  std::lock_guard lock(why_mutex_);
  return process < why_.size() ? why_[process] : std::string();
}

void Layer::process_failed(std::uint32_t process, const std::string& why) {
  if (process >= processes_) return;
  {
    std::lock_guard lock(why_mutex_);
    why_[process] = why;
  }
  if (!failed_[process].exchange(true, std::memory_order_acq_rel)) failures_.fetch_add(1, std::memory_order_acq_rel);
}

}  // namespace rdmx::dsm
