// Backoff: what a thread that polls for a completion does between polls.
// It keeps spinning while polls find work and for a while after; then, by
// the process's progress mode (RDMX_PROGRESS):
//   spin   keeps spinning: lowest latency, for threads with a core each;
//   yield  yields its core at every idle poll: a thread that shares its core
//          lets the others run, and runs again as soon as they idle;
//   block  sleeps in the kernel until its UCX worker has an event (or a
//          short timeout: data written by a peer's one-sided operation
//          raises no event), so an idle process costs no CPU.
// Why not yield at once: a yield that lets another thread run costs a whole
// time slice when that thread does not yield back, so yielding at every idle
// poll turns a sub-microsecond round trip into one of milliseconds
// (docs/results/fabric.md). When threads outnumber cores, every thread
// yields soon, and a yield hands the core straight to the peer that has the
// work.
#pragma once
#include <atomic>
#include <thread>

namespace rdmx {

enum class Progress { spin, yield, block };
constexpr const char* to_string(Progress p) noexcept {
  return p == Progress::spin ? "spin" : p == Progress::yield ? "yield" : "block";
}

// How the calling thread sleeps in `block` mode: installed by the layer
// that binds a thread to its network worker; returns whether an event woke
// it. Threads without one yield instead.
struct Sleeper {
  bool (*sleep)(void* self, int timeout_ms);
  void* self;
};

class Backoff {
 public:
  static constexpr unsigned default_spins = 65536;  // some milliseconds of idle polls
  static constexpr unsigned shared_core_spins = 1;   // threads outnumber cores: yield at the first idle poll
  static constexpr int block_timeout_ms = 1;          // bounds the wait for one-sided traffic

  static unsigned idle_spins() noexcept { return idle_spins_.load(std::memory_order_relaxed); }
  static void set_idle_spins(unsigned spins) noexcept { idle_spins_.store(spins, std::memory_order_relaxed); }
  static Progress mode() noexcept { return mode_.load(std::memory_order_relaxed); }
  static void set_mode(Progress m) noexcept { mode_.store(m, std::memory_order_relaxed); }
  static void set_sleeper(Sleeper s) noexcept { sleeper_ = s; }

  explicit Backoff(unsigned spins = idle_spins()) noexcept : spins_(spins) {}

  // How many times the calling thread has given its core away (yielded or
  // slept) in any Backoff: what a wait costs a thread that shares a core.
  static unsigned long long given_away() noexcept { return given_away_; }

  // Call once per poll with whether the poll did anything.
  void operator()(bool active) {
    if (active) {
      idle_ = 0;
      return;
    }
    if (++idle_ <= spins_) return;
    if (mode() != Progress::spin) ++given_away_;
    switch (mode()) {
      case Progress::spin:
        return;
      case Progress::yield:
        std::this_thread::yield();
        return;
      case Progress::block:
        if (sleeper_.sleep == nullptr) {
          std::this_thread::yield();
        } else if (sleeper_.sleep(sleeper_.self, block_timeout_ms)) {
          idle_ = 0;  // woken by traffic: more is likely, spin again
        }
        return;
    }
  }

 private:
  unsigned spins_;
  unsigned idle_ = 0;
  inline static std::atomic<unsigned> idle_spins_{default_spins};
  inline static std::atomic<Progress> mode_{Progress::yield};
  inline static thread_local Sleeper sleeper_{nullptr, nullptr};
  inline static thread_local unsigned long long given_away_ = 0;
};

}  // namespace rdmx
