// transfer::Transmitter: one-sided operations on one Endpoint (the seed's
// IBTransmitter). Two styles:
//  - post_put / post_get: fire-and-forget. No per-operation completion; a
//    flush is issued every u_max operations (selective signaling) and the
//    returned EpochTag says when the local buffer may be reused.
//  - put / get / fetch_add / compare_swap: a Future per operation.
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>

#include "rdmx/core/future.hpp"
#include "rdmx/transfer/flush_epoch.hpp"
#include "rdmx/transfer/memory_region.hpp"

namespace rdmx::transfer {

class Endpoint;

class Transmitter {
 public:
  // u_max: operations per flush (RDMX_U_MAX overrides the default of 64).
  // `progress`: what waiting on this transmitter drives; by default the
  // endpoint's worker. An owner sharing the worker among threads passes a
  // hook that leaves progress to the worker's one progressing thread.
  explicit Transmitter(Endpoint& endpoint, unsigned u_max = 0, ProgressHook progress = {});
  Transmitter(const Transmitter&) = delete;
  Transmitter& operator=(const Transmitter&) = delete;

  EpochTag post_put(const void* source, std::size_t length, RemoteAddress target);
  EpochTag post_get(void* destination, std::size_t length, RemoteAddress source);

  Future<void> put(const void* source, std::size_t length, RemoteAddress target);
  Future<void> get(void* destination, std::size_t length, RemoteAddress source);
  Future<std::uint64_t> fetch_add(RemoteAddress target, std::uint64_t value);
  // Returns the old value; the swap happened iff it equals `expected`.
  Future<std::uint64_t> compare_swap(RemoteAddress target, std::uint64_t expected, std::uint64_t desired);

  // Close the current epoch and issue its flush without waiting.
  void start_flush();
  // Block (progressing) until every operation issued so far has completed.
  void flush();

  const FlushEpoch& epoch() const noexcept { return epoch_; }
  Endpoint& endpoint() const noexcept { return *endpoint_; }
  unsigned u_max() const noexcept { return u_max_; }
  // Progress the endpoint's worker (what a waiter on a tag should call).
  bool progress();

 private:
  static void flush_done(void* request, ucs_status_t status, void* self);
  EpochTag issued(void* status_ptr, const char* what);

  Endpoint* endpoint_;
  unsigned u_max_;
  ProgressHook hook_;
  FlushEpoch epoch_;
  std::atomic<std::uint64_t> issued_{0};
  std::atomic<std::uint64_t> flushes_done_{0};
};

}  // namespace rdmx::transfer
