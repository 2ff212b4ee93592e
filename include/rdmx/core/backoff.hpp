// Backoff: what a thread that polls for a completion does between polls. It
// keeps spinning while polls find work and for a while after (a round trip
// over shared memory takes well under a microsecond), and only then yields
// its core. Yielding at every idle poll made every round trip cost ~2 ms on
// a 2-core machine (docs/fabric.md, "Measured"); never yielding starves
// threads that share a core with the poller.
#pragma once
#include <thread>

namespace rdmx {

class Backoff {
 public:
  // Call once per poll with whether the poll did anything.
  void operator()(bool active) noexcept {
    if (active) {
      idle_ = 0;
    } else if (++idle_ > spins) {
      std::this_thread::yield();
    }
  }

 private:
  static constexpr unsigned spins = 4096;  // about 100-400 us of idle polls
  unsigned idle_ = 0;
};

}  // namespace rdmx
