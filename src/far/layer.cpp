#include "layer.hpp"

#include <atomic>

#include "rdmx/core/error.hpp"
#include "rdmx/fabric/job.hpp"
#include "runtime.hpp"

namespace rdmx::far::detail {
namespace {
std::atomic<Runtime*> attached{nullptr};
}  // namespace

Job* job_if_any() noexcept {
  try {
    return &Job::current();
  } catch (const Error&) {
    return nullptr;
  }
}

void check_no_runtime(Job*) {
  if (attached.load() != nullptr) throw Error(Errc::invalid_argument, "far: this process already has a far::Manager");
}

void attach(Runtime& runtime, Job*) {
  Runtime* expected = nullptr;
  if (!attached.compare_exchange_strong(expected, &runtime))
    throw Error(Errc::invalid_argument, "far: this process already has a far::Manager");
}

void detach(Runtime& runtime) noexcept {
  Runtime* expected = &runtime;
  attached.compare_exchange_strong(expected, nullptr);
}

Runtime& runtime() {
  Runtime* r = attached.load(std::memory_order_acquire);
  if (r == nullptr) throw Error(Errc::invalid_argument, "far: no far::Manager exists in this process (construct one first)");
  return *r;
}

}  // namespace rdmx::far::detail
