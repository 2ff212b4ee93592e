// The service thread and the helper threads: who drives which worker when.
#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
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
#include "runtime.hpp"

namespace rdmx::fabric {

void Runtime::helper_loop(std::uint32_t worker) {
  // A helper is a worker of its own (its UCX worker, its messengers):
  // it runs the one-sided calls of the worker threads the invoke layer gave
  // it, and answers them as itself, so it never touches their workers.
  bind_current_thread(worker);
  ThreadContext& ctx = context(worker);
  Backoff backoff;
  while (!stop_helpers_.load(std::memory_order_acquire)) {
    bool active = true;
    try {
      active = ctx.poll(nullptr);
    } catch (const std::exception& e) {  // e.g. a corrupted channel: reported, the helper goes on
      rdmx::log(rdmx::LogLevel::error, "process %u, helper thread %u: %s\n", rank_, worker - threads_, e.what());
    }
    backoff(active);
  }
  unbind_current_thread();
}

void Runtime::stop_helpers() {
  // Teardown drives the helpers itself (quiesce), so what they
  // consume for the workers is still consumed.
  stop_helpers_.store(true, std::memory_order_release);
  for (auto& t : helper_threads_) t.join();
  helper_threads_.clear();
}

std::size_t Runtime::serve_worker(ThreadContext& ctx, bool* active) {
  // Act as the worker: its calls, one-sided ones included, run here and
  // answer as it; its retry_async queues drain; the caller's own binding is
  // restored afterwards.
  ThreadContext* const saved = current_context;
  ThreadContext* const saved_home = std::exchange(stand_in_home, saved);
  set_current_context(&ctx);
  std::size_t ran = 0;
  try {
    if (ctx.poll(&ran) && active != nullptr) *active = true;
  } catch (const std::exception& e) {  // e.g. a corrupted channel: reported, the caller goes on
    rdmx::log(rdmx::LogLevel::error, "process %u, serving thread %u: %s\n", rank_, ctx.id().thread, e.what());
  }
  stand_in_home = saved_home;
  set_current_context(saved);
  return ran;
}

std::size_t Runtime::serve_idle_workers(bool* active) {
  std::size_t ran = 0;
  for (std::uint32_t s = 0; s < workers(); ++s) {
    ThreadContext& ctx = context(s);
    if (&ctx == current_context || !ctx.driver.try_lock()) continue;
    ran += serve_worker(ctx, active);
    ctx.driver.unlock();
  }
  return ran;
}

bool Runtime::stand_in_for_idle_threads() {
  // RDMX_SERVE_IDLE: the service thread acts as every idle worker.
  // Otherwise it only receives for them (UCX must be progressed), and their
  // calls wait, in order, for their thread to come back.
  bool active = false;
  if (serve_idle_) {
    serve_idle_workers(&active);
    return active;
  }
  for (std::uint32_t s = 0; s < workers(); ++s) {
    ThreadContext& ctx = context(s);
    if (!ctx.driver.try_lock()) continue;
    while (ctx.receive_only()) active = true;
    ctx.driver.unlock();
  }
  return active;
}

void Runtime::service_loop() {
  bind_current_thread(workers());
  ThreadContext& ctx = service();
  int idle = 0;
  auto next_watch = std::chrono::steady_clock::now();
  while (!stop_.load(std::memory_order_acquire)) {
    if (auto now = std::chrono::steady_clock::now(); now >= next_watch) {
      watch_launcher();
      watch_local_peers();
      next_watch = now + std::chrono::milliseconds(100);
    }
    bool active = ctx.poll(nullptr);
    active = stand_in_for_idle_threads() || active;
    if (active) {
      idle = 0;
    } else if (++idle > 256) {
      // Sleep in the kernel until UCX has an event: an idle service thread
      // must not take a core from busy-polling workers. Idle workers have no
      // wake-up fd here, hence the short timeout.
      ctx.worker().wait(2);
      idle = 0;
    }
  }
  ctx.flush([this] { stand_in_for_idle_threads(); });
  unbind_current_thread();
}

}  // namespace rdmx::fabric
