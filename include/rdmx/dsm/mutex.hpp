// dsm::Mutex: one of the job's global mutexes (Config::mutexes of them), a
// lock word taken by remote compare-and-swap. lock() is an acquire (the
// previous holder's writes and everything it had acquired become visible),
// unlock() a release. If the holding process dies, lock() throws
// Errc::peer_failed instead of waiting for ever. Not recursive: a thread
// locking a mutex it holds gets Errc::invalid_argument (try_lock: false).
#pragma once
#include <cstddef>
#include <cstdint>

namespace rdmx::dsm {

class Mutex {
 public:
  explicit Mutex(std::uint32_t index);
  void lock();
  void unlock();
  // An unlock that releases only the blocks holding [address, address +
  // bytes): the next holder sees those bytes as this holder left them, and
  // everything this process had acquired, but not its other writes, which
  // wait for its next release. For relaxed atomics on one variable, whose
  // ordering of other memory nobody may rely on; far cheaper than unlock()
  // when many blocks are dirty. The range must lie in the shared heap. On
  // the causal mutex (Config::causal_mutex) after a lock that merged a
  // block early, it releases everything (docs/dsm.md, causal misses).
  void unlock_only(const void* address, std::size_t bytes);
  bool try_lock();
  std::uint32_t index() const noexcept { return index_; }

 private:
  std::uint32_t index_;
};

}  // namespace rdmx::dsm
