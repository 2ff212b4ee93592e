// Pieces every rdmx benchmark shares: the raw-UCX baselines (puts with
// selective signaling written by hand, an active-message round trip),
// calibration, medians, and the record helpers used to exchange addresses
// through Job::allgather.
#pragma once
#include <sched.h>
#include <ucp/api/ucp.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "rdmx/core/error.hpp"
#include "rdmx/transfer/context.hpp"
#include "rdmx/transfer/endpoint.hpp"
#include "rdmx/transfer/memory_region.hpp"
#include "rdmx/transfer/worker.hpp"

namespace rdmx::bench {

using Clock = std::chrono::steady_clock;
constexpr std::size_t MiB = std::size_t{1} << 20;

inline std::size_t round_up(std::size_t n, std::size_t to) { return (n + to - 1) / to * to; }

// "<N> cores, pinned" when the calling thread may run on one core only
// (rdmx pinned it, RDMX_PIN), else "<N> cores, unpinned".
inline std::string cores_text() {
  cpu_set_t set;
  CPU_ZERO(&set);
  const bool pinned = sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) == 1;
  return std::to_string(sysconf(_SC_NPROCESSORS_ONLN)) + " cores, " + (pinned ? "pinned" : "unpinned");
}

// The Open MPI pml this process runs with, as scripts/bench sets it
// (OMPI_MCA_pml): "ucx", or "ob1", Open MPI's default.
inline std::string mpi_pml() {
  const char* pml = std::getenv("OMPI_MCA_pml");
  return pml != nullptr && std::string(pml) == "ucx" ? "ucx" : "ob1";
}

inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

inline std::string human_rate(double per_s) {
  char text[32];
  if (per_s >= 1e6) std::snprintf(text, sizeof text, "%.2f M", per_s / 1e6);
  else std::snprintf(text, sizeof text, "%.1f k", per_s / 1e3);
  return text;
}

inline void put_u64(std::vector<std::byte>& out, std::uint64_t v) {
  auto* p = reinterpret_cast<const std::byte*>(&v);
  out.insert(out.end(), p, p + sizeof v);
}
inline std::uint64_t get_u64(std::span<const std::byte> in, std::size_t& at) {
  if (at + 8 > in.size()) throw rdmx::Error(rdmx::Errc::bootstrap, "truncated benchmark bootstrap record");
  std::uint64_t v;
  std::memcpy(&v, in.data() + at, 8);
  at += 8;
  return v;
}
inline void put_bytes(std::vector<std::byte>& out, std::span<const std::byte> bytes) {
  put_u64(out, bytes.size());
  out.insert(out.end(), bytes.begin(), bytes.end());
}
inline std::vector<std::byte> get_bytes(std::span<const std::byte> in, std::size_t& at) {
  const std::size_t n = get_u64(in, at);
  if (at + n > in.size()) throw rdmx::Error(rdmx::Errc::bootstrap, "truncated benchmark bootstrap record");
  std::vector<std::byte> out(in.begin() + static_cast<std::ptrdiff_t>(at), in.begin() + static_cast<std::ptrdiff_t>(at + n));
  at += n;
  return out;
}

inline std::vector<std::string> split(const std::string& text) {
  std::vector<std::string> parts;
  std::size_t start = 0;
  while (start <= text.size()) {
    std::size_t comma = text.find(',', start);
    if (comma == std::string::npos) comma = text.size();
    if (comma > start) parts.push_back(text.substr(start, comma - start));
    start = comma + 1;
  }
  return parts;
}

// ---- raw: a UCX active-message round trip between workers of the benchmark's own ----
// Rank 1 echoes every ping's bytes back (reply flag set, as a server
// answering would); rank 0 sends the next ping when the pong has arrived.

inline constexpr unsigned am_ping = 40, am_pong = 41;  // ids of the raw active messages (rdmx uses 11, 12)

struct AmPeer {
  ucp_ep_h back = nullptr;  // rank 1: towards rank 0's worker
  std::uint64_t pongs = 0;  // rank 0: replies seen
  std::uint64_t pings = 0;  // rank 1: pings answered
  // What arrived, copied out of UCX's receive buffer (valid only during the
  // callback). Rank 1 sends it back from here: it stays until the next ping,
  // which cannot arrive before the pong has.
  std::vector<std::byte> echo;
};

inline ucs_status_t on_ping(void* arg, const void* header, std::size_t header_length, void* data, std::size_t length,
                            const ucp_am_recv_param_t*) {
  auto* peer = static_cast<AmPeer*>(arg);
  ++peer->pings;
  peer->echo.assign(static_cast<const std::byte*>(data), static_cast<const std::byte*>(data) + length);
  ucp_request_param_t param{};
  param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
  param.flags = UCP_AM_SEND_FLAG_REPLY;
  void* r = ucp_am_send_nbx(peer->back, am_pong, header, header_length, peer->echo.data(), length, &param);
  if (UCS_PTR_IS_PTR(r)) ucp_request_free(r);  // eager at these sizes: the bytes went out at once
  return UCS_OK;
}

// The pong's bytes are copied out, as a caller takes its answer (and MPI_Recv
// its message): a floor that left them unread would skip the reads that
// bring them across.
inline ucs_status_t on_pong(void* arg, const void*, std::size_t, void* data, std::size_t length,
                            const ucp_am_recv_param_t*) {
  auto* peer = static_cast<AmPeer*>(arg);
  peer->echo.assign(static_cast<const std::byte*>(data), static_cast<const std::byte*>(data) + length);
  ++peer->pongs;
  return UCS_OK;
}

inline void set_am_handler(rdmx::transfer::Worker& worker, unsigned id, ucp_am_recv_callback_t cb, AmPeer* peer) {
  ucp_am_handler_param_t p{};
  p.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB | UCP_AM_HANDLER_PARAM_FIELD_ARG;
  p.id = id;
  p.cb = cb;
  p.arg = peer;
  if (ucp_worker_set_am_recv_handler(worker.get(), &p) != UCS_OK)
    throw rdmx::Error(rdmx::Errc::transport, "cannot set the benchmark's active-message handler");
}

// One raw round trip: `payload` goes to rank 1 and comes back.
inline void am_round_trip(rdmx::transfer::Worker& worker, rdmx::transfer::Endpoint& ep, AmPeer& peer,
                          std::span<const std::byte> payload) {
  const ucp_request_param_t param{};
  const std::uint64_t want = peer.pongs + 1;
  void* r = ucp_am_send_nbx(ep.get(), am_ping, nullptr, 0, payload.data(), payload.size(), &param);
  if (UCS_PTR_IS_ERR(r)) throw rdmx::Error(rdmx::Errc::transport, "raw active message failed");
  if (UCS_PTR_IS_PTR(r)) {
    while (ucp_request_check_status(r) == UCS_INPROGRESS) ucp_worker_progress(worker.get());
    ucp_request_free(r);
  }
  while (peer.pongs < want) ucp_worker_progress(worker.get());
}

// n raw round trips of `size` bytes each way; returns their seconds.
inline double am_round_trips(rdmx::transfer::Worker& worker, rdmx::transfer::Endpoint& ep, AmPeer& peer, std::size_t size,
                             std::size_t n) {
  const std::vector<std::byte> payload(size, std::byte{1});
  const auto t0 = Clock::now();
  for (std::size_t i = 0; i < n; ++i) am_round_trip(worker, ep, peer, payload);
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Where message i lands: consecutive addresses in a window of the target
// (the same pattern for every variant).
struct Window {
  std::uint64_t base;
  std::size_t bytes;
};

// ---- raw: selective signaling by hand (Seriema's "+ss") ----

inline void raw_flush_done(void* request, ucs_status_t status, void* user) {
  auto* done = static_cast<std::uint64_t*>(user);
  if (status != UCS_OK) {
    std::fprintf(stderr, "rdmx bench: raw flush failed: %s\n", ucs_status_string(status));
    std::_Exit(1);
  }
  ++*done;
  ucp_request_free(request);
}

class Raw {
 public:
  Raw(rdmx::transfer::Context& ctx, rdmx::transfer::Worker& worker, rdmx::transfer::Endpoint& ep, ucp_rkey_h rkey, std::size_t slots,
      std::size_t max_stride, unsigned u_max)
      : worker_(worker.get()), ep_(ep.get()), rkey_(rkey), slots_(slots), u_max_(u_max),
        source_(ctx, slots * max_stride), slot_flush_(slots, 0) {
    std::memset(source_.data(), 0, source_.size());
    flush_param_.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
    flush_param_.cb.send = &raw_flush_done;
    flush_param_.user_data = &flushes_done_;
  }

  // Seconds for n puts of `size` bytes, until the last is remotely complete.
  double run(std::size_t size, std::size_t n, Window window) {
    const std::size_t stride = round_up(size, 64);
    const std::size_t stamp = std::min<std::size_t>(size, 8);
    std::fill(slot_flush_.begin(), slot_flush_.end(), 0);
    flushes_issued_ = flushes_done_ = 0;
    unsigned in_window = 0;
    std::size_t slot = 0;
    std::size_t offset = 0;
    std::byte* const base = source_.data();
    ucp_request_param_t put_param{};  // no callback: an unsignaled put

    const auto t0 = Clock::now();
    for (std::size_t i = 0; i < n; ++i) {
      // The slot was last used before flush number slot_flush_[slot] was
      // issued; it is reusable once that many flushes have completed.
      while (flushes_done_ < slot_flush_[slot]) ucp_worker_progress(worker_);
      std::byte* source = base + slot * stride;
      std::memcpy(source, &i, stamp);
      ucs_status_ptr_t r = ucp_put_nbx(ep_, source, size, window.base + offset, rkey_, &put_param);
      if (UCS_PTR_IS_PTR(r)) {
        ucp_request_free(r);  // completion is learnt from the next flush
      } else if (UCS_PTR_IS_ERR(r)) {
        throw rdmx::Error(rdmx::Errc::transport, std::string("raw ucp_put_nbx: ") + ucs_status_string(UCS_PTR_STATUS(r)));
      }
      slot_flush_[slot] = flushes_issued_ + 1;
      if (++in_window == u_max_) {
        in_window = 0;
        issue_flush();
      }
      if (++slot == slots_) slot = 0;
      offset += size;
      if (offset == window.bytes) offset = 0;
    }
    issue_flush();
    while (flushes_done_ < flushes_issued_) ucp_worker_progress(worker_);
    return std::chrono::duration<double>(Clock::now() - t0).count();
  }

 private:
  void issue_flush() {
    ++flushes_issued_;
    ucs_status_ptr_t r = ucp_ep_flush_nbx(ep_, &flush_param_);
    if (UCS_PTR_IS_ERR(r))
      throw rdmx::Error(rdmx::Errc::transport, std::string("raw ucp_ep_flush_nbx: ") + ucs_status_string(UCS_PTR_STATUS(r)));
    if (!UCS_PTR_IS_PTR(r)) ++flushes_done_;  // completed at once; no callback comes
  }

  ucp_worker_h worker_;
  ucp_ep_h ep_;
  ucp_rkey_h rkey_;
  std::size_t slots_;
  unsigned u_max_;
  rdmx::transfer::MemoryRegion source_;
  std::vector<std::uint64_t> slot_flush_;
  std::uint64_t flushes_issued_ = 0;
  std::uint64_t flushes_done_ = 0;
  ucp_request_param_t flush_param_{};
};

// Messages for one measurement of about `seconds`: grow a trial run until it
// takes a tenth of that, then scale. Trials also warm caches and pages.
template <class Run>
std::size_t calibrate(Run&& run, double seconds, std::size_t multiple) {
  std::size_t n = round_up(2048, multiple);
  for (;;) {
    double t = run(n);
    if (t >= seconds / 10 || n >= (std::size_t{1} << 34)) {
      double scaled = static_cast<double>(n) * seconds / std::max(t, 1e-9);
      return round_up(std::max<std::size_t>(static_cast<std::size_t>(scaled), multiple), multiple);
    }
    n *= 4;
  }
}

}  // namespace rdmx::bench
