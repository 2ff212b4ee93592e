// Knowing which processes are alive: /proc for peers on this host, the
// launcher as our parent, and failures reported by the transport.
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
#include "collectives.hpp"
#include "runtime.hpp"

namespace rdmx::fabric {

// A process that exited, or is a zombie waiting to be reaped, is gone.
bool process_alive(std::uint32_t pid) {
  std::FILE* f = std::fopen(("/proc/" + std::to_string(pid) + "/stat").c_str(), "r");
  if (f == nullptr) return false;
  char state = '?';
  int matched = std::fscanf(f, "%*d (%*[^)]) %c", &state);
  std::fclose(f);
  return matched == 1 && state != 'Z' && state != 'X';
}

void Runtime::peer_failed(std::uint32_t process, const std::string& why) {
  if (process >= size_ || shutting_down_.load(std::memory_order_acquire) || failed_[process].exchange(true)) return;
  rdmx::log(rdmx::LogLevel::warn, "process %u: %s\n", rank_, why.c_str());
  {
    std::lock_guard lock(failures_mutex_);
    failures_.resize(size_);
    failures_[process] = why;
  }
  if (same_host(process)) host_failures_.fetch_add(1, std::memory_order_acq_rel);
  failure_count_.fetch_add(1, std::memory_order_acq_rel);
  pending_.fail_process(process, why);
  if (collectives_) collectives_->process_failed();
  const std::size_t count = layer_count_.load(std::memory_order_acquire);
  for (std::size_t i = 0; i < count; ++i) layer_list_[i].load(std::memory_order_relaxed)->process_failed(process, why);
}

std::string Runtime::failure_of(std::uint32_t process) const {
  std::lock_guard lock(failures_mutex_);
  if (process < failures_.size() && !failures_[process].empty()) return failures_[process];
  return "process " + std::to_string(process) + " has failed";
}

bool Runtime::gone(std::uint32_t process) {
  if (process >= size_) return false;
  if (process_failed(process)) return true;
  if (process == rank_ || !same_host(process) || process_alive(pids_[process])) return false;
  peer_failed(process, "process " + std::to_string(process) + " (pid " + std::to_string(pids_[process]) + ") has exited");
  return true;
}

bool Runtime::any_process_failed() const {
  for (std::uint32_t p = 0; p < size_; ++p)
    if (process_failed(p)) return true;
  return false;
}

void Runtime::watch_local_peers() {
  // Shared-memory transports cannot tell us a peer died (UCX 1.13); peers on
  // this host are watched through /proc instead. Remote peers are reached
  // over transports with UCX peer-failure detection.
  for (std::uint32_t p = 0; p < size_; ++p)
    if (p != rank_ && !process_failed(p) && same_host(p) && !process_alive(pids_[p]))
      peer_failed(p, "process " + std::to_string(p) + " (pid " + std::to_string(pids_[p]) + ") has exited");
}

void Runtime::watch_launcher() {
  // The launcher is our parent: when it is killed we are re-parented. The
  // job is over then (nobody can start, bootstrap or reap its processes
  // again), and a process left spinning in a poll loop would hold a core
  // for ever: end it, whatever its threads are doing.
  if (launcher_pid_ == 0 || getppid() == launcher_pid_) return;
  rdmx::log(rdmx::LogLevel::error, "process %u: the launcher (pid %d) has gone; ending this process\n", rank_,
               static_cast<int>(launcher_pid_));
  std::fflush(stderr);
  std::_Exit(1);
}

}  // namespace rdmx::fabric
