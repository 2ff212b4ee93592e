// dsm::Mutex: one of the job's global mutexes (Config::mutexes of them), a
// lock word taken by remote compare-and-swap. lock() is an acquire (the
// previous holder's writes and everything it had acquired become visible),
// unlock() a release. If the holding process dies, lock() throws
// Errc::peer_failed instead of waiting for ever.
#pragma once
#include <cstdint>

namespace rdmx::dsm {

class Mutex {
 public:
  explicit Mutex(std::uint32_t index);
  void lock();
  void unlock();
  bool try_lock();
  std::uint32_t index() const noexcept { return index_; }

 private:
  std::uint32_t index_;
};

}  // namespace rdmx::dsm
