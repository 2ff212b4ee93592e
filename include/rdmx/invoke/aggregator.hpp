// Aggregator (Seriema 4.4.2): batches calls over the calling thread's
// messengers, two ways:
//  - Aggregation::trad: calls collect in registered memory and go out in one
//    RDMA write per flush_bytes (4 KiB) per destination;
//  - Aggregation::ovfl: every call is written at once, as with a Messenger,
//    and calls are batched only while the messenger cannot make progress (its
//    destination has not consumed its chunks yet); past overflow_limit bytes
//    of such queued calls, a call waits (back-pressure, below).
// Either way a call is serialized exactly once, into registered memory the
// RDMA write then goes from (zero copy).
//
// No call is ever dropped. When the destination lags (trad: its ring is
// full; ovfl: overflow_limit is reached), call() progresses, flushing and
// serving this thread's incoming calls, until there is room, then returns.
// If the destination's process dies meanwhile, call() throws
// Errc::peer_failed naming it.
//
//   rdmx::Aggregator agg(rdmx::Aggregation::trad);
//   for (...) agg.call(dest, [=] { ... });
//   agg.shutdown();                 // or let the destructor shut it down
//   agg.wait_for_shutdowns(peers);  // every peer that called here is done
//
// Phases: each Aggregator belongs to one, and its shutdown signals count
// only for that phase, so a phase can end while faster peers already signal
// the next. By default the k-th Aggregator a thread makes is in the phase
// after its (k-1)-th: threads that make their aggregators in the same order
// agree on the numbers. AggregatorOptions::phase sets one explicitly.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "rdmx/invoke/messenger.hpp"

namespace rdmx {

enum class Aggregation { trad, ovfl };

struct AggregatorOptions {
  std::size_t flush_bytes = 4096;              // trad: one RDMA write per this many bytes
  // ovfl: bytes of queued calls per destination past which call() waits for
  // room (0: no limit). Calls made from inside such a wait, by the calls it
  // serves, may queue beyond it.
  std::size_t overflow_limit = 64 << 20;
  // The phase this aggregator's shutdowns count for; later ones of the thread
  // follow on from it. 0: the one after the thread's previous aggregator.
  std::uint64_t phase = 0;
};

// call, call_buffer and call_return are the family of
// fabric/call_family.hpp; an Aggregator has no broadcast and no try_ calls
// (it never refuses one).
class Aggregator : public fabric::CallFamily<Aggregator> {
 public:
  explicit Aggregator(Aggregation mode, AggregatorOptions options = {});
  ~Aggregator();  // shutdown()
  Aggregator(const Aggregator&) = delete;
  Aggregator& operator=(const Aggregator&) = delete;

  // Write and publish everything batched so far.
  void flush();
  // flush(), then tell every thread this aggregator called that it is done:
  // each of them counts it for this phase. Further calls throw.
  void shutdown();
  // Aggregators of this phase (of any thread in the job) that called this
  // thread and have shut down since; their calls have all run here.
  std::uint64_t shutdowns_received() const;
  // End of the phase here: progress (serving calls) until `count` of them
  // are counted. Throws Errc::peer_failed, naming the process, once a
  // process of the job has failed before they are.
  void wait_for_shutdowns(std::uint64_t count) const;

  Aggregation mode() const noexcept { return mode_; }
  std::uint64_t phase() const noexcept { return phase_; }

  // The path (fabric/call_family.hpp).
  void submit(const fabric::Outgoing& call);
  // As MessengerGlobal's: straight into the chunk left open, when there is one.
  template <class F>
  bool write_inline(ThreadId dest, std::uint64_t function, const F& func) noexcept {
    if (shut_down_ || !invoke::detail::write_in_lane(dest, function, func)) return false;
    called_[std::size_t{dest.process} * threads_ + dest.thread] = true;
    return true;
  }

 private:
  Aggregation mode_;
  invoke::detail::Mode how_;
  std::vector<bool> called_;  // by destination thread, job-wide index
  std::uint32_t threads_ = 0;  // worker threads per process
  std::uint64_t phase_ = 0;
  bool shut_down_ = false;
};

}  // namespace rdmx
