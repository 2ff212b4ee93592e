// Backoff: what a thread that polls for a completion does between polls. It
// keeps spinning while polls find work and for some milliseconds after, and
// only then yields its core. A yield that lets another thread run costs a
// time slice (~2 ms here): yielding at every idle poll made each round trip
// ~2 ms instead of ~0.4 us, and yielding after 4096 idle polls still
// tripled the mean (docs/fabric.md, "Measured"). Never yielding would starve
// threads that share a core with the poller.
#pragma once
#include <thread>

namespace rdmx {

class Backoff {
 public:
  static constexpr unsigned default_spins = 65536;  // some milliseconds of idle polls
  // A thread that shares its core with others that have work (more threads
  // than cores) should yield after a few idle polls instead.
  explicit Backoff(unsigned spins = default_spins) noexcept : spins_(spins) {}

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
};

}  // namespace rdmx
