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
//   agg.flush();      // or let the destructor shut it down
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
};

class Aggregator {
 public:
  explicit Aggregator(Aggregation mode, AggregatorOptions options = {});
  ~Aggregator();  // shutdown()
  Aggregator(const Aggregator&) = delete;
  Aggregator& operator=(const Aggregator&) = delete;

  template <Notify N = Notify::sent, class F>
  void call(ThreadId dest, const F& func, Synchronizer* sync = nullptr) {
    // As MessengerGlobal::call: straight into the chunk left open, when there is one.
    if (sync == nullptr && !shut_down_ &&
        invoke::detail::write_in_lane(dest, fabric::FunctionId<fabric::CallWrapper<F>>::value, func)) [[likely]] {
      called_[std::size_t{dest.process} * threads_ + dest.thread] = true;
      return;
    }
    send(fabric::outgoing<fabric::CallWrapper>(dest, fabric::CallKind::call, func, sync, N));
  }
  template <Notify N = Notify::sent, class F>
  void call_buffer(ThreadId dest, const F& func, std::span<const std::byte> buffer, Synchronizer* sync = nullptr) {
    auto o = fabric::outgoing<fabric::BufferWrapper>(dest, fabric::CallKind::buffer, func, sync, N);
    o.data = buffer;
    send(o);
  }
  template <class F, class R = std::invoke_result_t<const F&>>
  void call_return(ThreadId dest, const F& func, R* orig, Synchronizer& sync) {
    static_assert(std::is_trivially_copyable_v<R>, "rdmx: call_return needs a trivially copyable result type");
    auto o = fabric::outgoing<fabric::ReturnWrapper>(dest, fabric::CallKind::returning, func, &sync, Notify::consumed);
    o.result = orig;
    o.result_size = sizeof(R);
    send(o);
  }

  // Write and publish everything batched so far.
  void flush();
  // flush(), then tell every thread this aggregator called that it is done:
  // each of them counts it in shutdowns_received(). Further calls throw.
  void shutdown();
  // Aggregators (of any thread in the job) that shut down after calling
  // the calling thread; a phase can end once all peers are counted.
  static std::uint64_t shutdowns_received();

  Aggregation mode() const noexcept { return mode_; }

 private:
  void send(const fabric::Outgoing& call);
  Aggregation mode_;
  invoke::detail::Mode how_;
  std::vector<bool> called_;  // by destination thread, job-wide index
  std::uint32_t threads_ = 0;  // worker threads per process
  bool shut_down_ = false;
};

}  // namespace rdmx
