// Backoff: what a thread that polls for a completion does between polls. It
// keeps spinning while polls find work and for some milliseconds after, and
// only then yields its core. A yield that lets another thread run costs a
// time slice (~2 ms here): yielding at every idle poll made each round trip
// ~2 ms instead of ~0.4 us, and yielding after 4096 idle polls still
// tripled the mean (docs/fabric.md, "Measured"). Never yielding would starve
// threads that share a core with the poller.
//
// A thread that shares its core with others that have work (more threads
// than cores) may do better yielding after a few idle polls. Every wait
// without an explicit count uses idle_spins(): default_spins, or
// RDMX_IDLE_SPINS when the Job starts. It is a trade-off, not a free win: a
// waiting thread that yields also stops serving what peers need from it
// (docs/serialization.md, "2 and 4 threads").
#pragma once
#include <atomic>
#include <thread>

namespace rdmx {

class Backoff {
 public:
  static constexpr unsigned default_spins = 65536;  // some milliseconds of idle polls
  static unsigned idle_spins() noexcept { return idle_spins_.load(std::memory_order_relaxed); }
  static void set_idle_spins(unsigned spins) noexcept { idle_spins_.store(spins, std::memory_order_relaxed); }

  explicit Backoff(unsigned spins = idle_spins()) noexcept : spins_(spins) {}

  // Call once per poll with whether the poll did anything.
  void operator()(bool active) noexcept {
    if (active) {
      idle_ = 0;
    } else if (++idle_ > spins_) {
      std::this_thread::yield();
    }
  }

 private:
  unsigned spins_;
  unsigned idle_ = 0;
  inline static std::atomic<unsigned> idle_spins_{default_spins};
};

}  // namespace rdmx
