// transfer::Transmitter: one-sided operations on one Endpoint (the seed's
// IBTransmitter). Two styles:
//  - post_put / post_get: fire-and-forget. No per-operation completion; a
//    flush is issued every u_max operations (selective signaling) and the
//    returned EpochTag says when the local buffer may be reused.
//  - put / get / fetch_add / compare_swap: a Future per operation.
//  - blocking_get / blocking_fetch_add / blocking_compare_swap: return once
//    done, allocating nothing and driving only the transport (`transport`
//    hook below) while they wait: for the latency-bound paths that would
//    wait at once anyway, and for paths that must not run anything else
//    meanwhile (the DSM's fault handler).
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>

#include "rdmx/core/future.hpp"
#include "rdmx/transfer/flush_epoch.hpp"
#include "rdmx/transfer/endpoint.hpp"
#include "rdmx/transfer/memory_region.hpp"
#include "rdmx/transfer/detail/ucx_opaque.hpp"

namespace rdmx::transfer {

class Endpoint;

class Transmitter {
 public:
  // u_max: operations per flush (RDMX_U_MAX overrides the default of 64).
  // `progress`: what waiting on this transmitter drives; by default the
  // endpoint's worker. An owner sharing the worker among threads passes a
  // hook that leaves progress to the worker's one progressing thread.
  // `transport`: what the blocking operations drive, by default the
  // endpoint's worker too; an owner whose `progress` also runs work of its
  // own (received calls) passes one that only moves the network.
  explicit Transmitter(Endpoint& endpoint, unsigned u_max = 0, ProgressHook progress = {}, ProgressHook transport = {});
  Transmitter(const Transmitter&) = delete;
  Transmitter& operator=(const Transmitter&) = delete;

  // A failed endpoint is reported (Errc::peer_failed) by the flush that
  // closes the epoch, at most u_max operations after the failure is known,
  // and by every wait (progress()); the per-operation path stays free of it.
  EpochTag post_put(const void* source, std::size_t length, RemoteAddress target) {
    void* status;
    {
      // A put to this very worker (UCX's self transport) is copied inside
      // the call: as opaque to TSan as one copied inside progress.
      const detail::InsideUcx inside;
      status = ucp_put_nbx(ep_, source, length, target.address, target.rkey, &unsignaled_);
    }
    return issued(status, "put");
  }
  EpochTag post_get(void* destination, std::size_t length, RemoteAddress source) {
    return issued(ucp_get_nbx(ep_, destination, length, source.address, source.rkey, &unsignaled_), "get");
  }

  // put's future completes when `source` may be reused, which over some
  // transports (TCP) is before the data has reached the target: flush() is
  // what guarantees remote completion. get's future means the data is here.
  Future<void> put(const void* source, std::size_t length, RemoteAddress target);
  Future<void> get(void* destination, std::size_t length, RemoteAddress source);
  // get without a future: returns once the data is here, driving the
  // transport hook while it is not. No heap allocation (a future's state
  // costs two, as much as a shared-memory get itself); what far memory's
  // misses and the DSM's faults use. Like every blocking operation it
  // throws Errc::peer_failed once the endpoint has failed, also while it
  // waits, and allocates only then (the message).
  void blocking_get(void* destination, std::size_t length, RemoteAddress source);
  // The atomics without a future: the old value.
  std::uint64_t blocking_fetch_add(RemoteAddress target, std::uint64_t value);
  std::uint64_t blocking_compare_swap(RemoteAddress target, std::uint64_t expected, std::uint64_t desired);
  Future<std::uint64_t> fetch_add(RemoteAddress target, std::uint64_t value);
  // Returns the old value; the swap happened iff it equals `expected`.
  Future<std::uint64_t> compare_swap(RemoteAddress target, std::uint64_t expected, std::uint64_t desired);

  // Operations issued after fence() take effect at the target after every
  // operation issued before it (a publish word after the data it publishes).
  void fence();

  // Close the current epoch and issue its flush without waiting.
  void start_flush();
  // Block (progressing) until every operation issued so far has completed.
  void flush();

  const FlushEpoch& epoch() const noexcept { return epoch_; }
  Endpoint& endpoint() const noexcept { return *endpoint_; }
  unsigned u_max() const noexcept { return u_max_; }
  // Progress the endpoint's worker (what a waiter on a tag should call);
  // throws Errc::peer_failed once the endpoint has failed, so no wait for an
  // epoch that will never complete can hang.
  bool progress();

 private:
  // Waits, driving the transport, for a request issued without a callback
  // (nullptr: done at once) and frees it; throws what it failed with.
  void wait_blocking(void* request, const char* what);
  // After the endpoint failed: waits (bounded) until UCX gives the request
  // back, since its buffers stay UCX's until then.
  ucs_status_t drain(void* request, const char* what);
  static void flush_done(void* request, ucs_status_t status, void* self);
  EpochTag issued(void* status_ptr, const char* what) {
    if (status_ptr != nullptr) [[unlikely]]
      not_immediate(status_ptr, what);
    // The tag is read after the operation was issued (Seriema 4.1), so the
    // flush that closes this epoch is issued later and covers it.
    EpochTag tag{&epoch_, epoch_.current()};
    // The countdown only decides when to flush (correctness comes from the
    // tag being read after the operation was issued), so threads sharing the
    // transmitter may lose a decrement and flush a little later: plain
    // relaxed load and store, no locked instruction, wait-free.
    const unsigned left = until_flush_.load(std::memory_order_relaxed);
    if (left > 1) [[likely]] {
      until_flush_.store(left - 1, std::memory_order_relaxed);
    } else {
      until_flush_.store(u_max_, std::memory_order_relaxed);
      start_flush();
    }
    return tag;
  }
  void not_immediate(void* status_ptr, const char* what);

  Endpoint* endpoint_;
  ucp_ep_h ep_;
  unsigned u_max_;
  std::atomic<unsigned> until_flush_;
  const ucp_request_param_t unsignaled_{};  // no callback: completion is learnt from the epoch's flush
  ProgressHook hook_;
  ProgressHook transport_;
  FlushEpoch epoch_;
  std::atomic<std::uint64_t> flushes_done_{0};
};

}  // namespace rdmx::transfer
