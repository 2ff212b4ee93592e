// rdmx-bench-invoke: Seriema's Table 2 (section 5.2) on UCX, side by side
// with raw UCX and Open MPI measured in the same run. Two processes: rank 0
// calls, rank 1's thread 0 runs the calls. Start it with `scripts/bench invoke`.
//
// Throughput variants, for calls whose captures are 8, 64 or 256 bytes:
//   send   rdmx::call (send-based, UCX active messages)
//   write  MessengerGlobal::call (one RDMA write per call into d's chunk)
//   trad   Aggregator(trad): one RDMA write per 4 KiB of calls
//   ovfl   Aggregator(ovfl): as write, batching only while the ring is full
//   raw    the same bytes moved by hand-written ucp_put_nbx (selective
//          signaling, no serialization, nothing executed): Seriema's max-raw;
//          also at 4096 bytes, the size trad writes
//   raw-read  raw while rank 1 keeps reading the window raw writes into, as a
//          receiver of calls must: the cache-line traffic a reader adds over
//          shared memory, without anything else a call costs (also at 4096)
//   am     the same bytes as raw UCX active messages (ucp_am_send_nbx, no
//          serialization), each read by rank 1's handler: the message rate
//          of UCX's own two-sided path, which write (one-sided calls from one
//          thread, not aggregated) is measured against (write/am)
//   mpi    Open MPI: windowed MPI_Isend/MPI_Irecv of the same sizes
//          (64 in flight, OSU message-rate style), in this same process
// Every rdmx variant's time ends with a consumed notification from rank 1,
// so it counts the calls having run, not only having been sent.
// Latency: a call plus its consumed notification (write, send), against a
// raw UCX active-message round trip and an MPI ping-pong of 8 bytes.
// Broadcast: the three broadcast_buffers of 64 KiB (inline, read from the
// root, written into each thread's destination buffer), each waited for
// until every thread ran it, against MPI_Bcast plus an acknowledgement.
//
// Flags: --reps=N  --time=SECONDS (per measurement)  --quick
// Output: JSON lines on stdout (rank 0), a table on stderr.
#define OMPI_SKIP_MPICXX 1
#include <mpi.h>
#include <sched.h>
#include <ucp/api/ucp.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "common.hpp"
#include "json.hpp"
#include "rdmx/core/env.hpp"
#include "rdmx/fabric/call.hpp"
#include "rdmx/fabric/job.hpp"
#include "rdmx/fabric/rma.hpp"
#include "rdmx/invoke/aggregator.hpp"
#include "rdmx/invoke/messenger.hpp"
#include "rdmx/memory/arena.hpp"

namespace {

using namespace rdmx::bench;
namespace transfer = rdmx::transfer;

constexpr std::size_t target_bytes = 16 * MiB;
constexpr std::size_t raw_ring = 256;
constexpr unsigned u_max = 64;
constexpr int mpi_window = 64;
const std::array<std::size_t, 3> call_sizes{8, 64, 256};

struct Options {
  unsigned reps = 5;
  double seconds = 0.1;
  bool quick = false;
};

[[noreturn]] void usage_error(const std::string& what) {
  throw rdmx::Error(rdmx::Errc::invalid_argument, what + "\nusage: rdmx-bench-invoke [--reps=N] [--time=SECONDS] [--quick]");
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--quick") {
      o.quick = true;
    } else if (a.rfind("--reps=", 0) == 0) {
      o.reps = static_cast<unsigned>(rdmx::env::parse_count(a.substr(7), "--reps"));
    } else if (a.rfind("--time=", 0) == 0) {
      try {
        o.seconds = std::stod(a.substr(7));
      } catch (const std::exception&) {
        usage_error("--time: '" + a.substr(7) + "' is not a number of seconds");
      }
    } else {
      usage_error("unknown argument '" + a + "'");
    }
  }
  if (o.quick) {
    o.reps = std::min(o.reps, 3u);
    o.seconds = std::min(o.seconds, 0.01);
  }
  if (o.reps == 0) usage_error("--reps must be at least 1");
  if (!(o.seconds > 0)) usage_error("--time must be positive");
  return o;
}

// ---- rank 1: its main thread runs the calls; phases say what else it does ----

enum Phase : int { phase_rdmx, phase_raw, phase_raw_read, phase_mpi_rate, phase_mpi_pingpong, phase_mpi_bcast, phase_stop };
const std::byte* g_target = nullptr;  // rank 1: raw's target
std::atomic<int> g_phase{phase_rdmx};
std::uint64_t g_phase_arg[2] = {};  // size, messages (MPI phases)
std::uint64_t g_received = 0;       // calls executed
std::uint64_t g_sink = 0;           // keeps the captures observable

void set_phase(int phase, std::uint64_t size = 0, std::uint64_t messages = 0) {
  rdmx::Synchronizer sync;
  rdmx::call(rdmx::ThreadId{1, 0}, [=] {
    g_phase_arg[0] = size;
    g_phase_arg[1] = messages;
    g_phase = phase;
  }, rdmx::when_run(sync));
  sync.wait();
}

std::uint64_t g_made = 0;  // rank 0: calls made so far, of every variant

// The raw active-message stream (variant am): rank 1's handler reads each
// message's first and last byte, as a call reads its captures, and answers
// with one pong once it has seen the whole stream.
constexpr unsigned am_stream = 42;  // beside common.hpp's am_ping and am_pong
std::uint64_t g_am_counted = 0;     // rank 1: stream messages seen
std::uint64_t g_am_expected = 0;    // rank 1: where the current stream ends

ucs_status_t on_stream(void* arg, const void*, std::size_t, void* data, std::size_t length, const ucp_am_recv_param_t*) {
  const auto* bytes = static_cast<const std::byte*>(data);
  g_sink += std::to_integer<std::uint64_t>(bytes[0]) + std::to_integer<std::uint64_t>(bytes[length - 1]);
  if (++g_am_counted == g_am_expected) {
    ucp_request_param_t param{};
    param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    param.flags = UCP_AM_SEND_FLAG_REPLY;
    void* r = ucp_am_send_nbx(static_cast<AmPeer*>(arg)->back, am_pong, nullptr, 0, nullptr, 0, &param);
    if (UCS_PTR_IS_PTR(r)) ucp_request_free(r);
  }
  return UCS_OK;
}

// Seconds for n raw active messages of `size` bytes, until rank 1's handler
// has seen the last (rank 1 must be in phase_raw, progressing its worker).
double run_am(transfer::Worker& own, transfer::Endpoint& ep, AmPeer& peer, std::size_t size, std::size_t n) {
  rdmx::Synchronizer sync;
  rdmx::call(rdmx::ThreadId{1, 0}, [n] { g_am_expected = g_am_counted + n; }, rdmx::when_run(sync));
  sync.wait();
  const std::vector<std::byte> payload(size, std::byte{1});  // alive until rank 1 has read it all
  const std::uint64_t want = peer.pongs + 1;
  const ucp_request_param_t param{};
  const auto t0 = Clock::now();
  for (std::size_t i = 0; i < n; ++i) {
    void* r = ucp_am_send_nbx(ep.get(), am_stream, nullptr, 0, payload.data(), size, &param);
    if (UCS_PTR_IS_ERR(r)) throw rdmx::Error(rdmx::Errc::transport, "raw active message failed");
    if (UCS_PTR_IS_PTR(r)) ucp_request_free(r);
    if ((i & 15) == 15) ucp_worker_progress(own.get());  // as run_send: queued sends leave while we progress
  }
  while (peer.pongs < want) ucp_worker_progress(own.get());
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Wait until rank 1 has run everything sent before (calls run in order), and
// check that it ran each call exactly once, so that a lost call is caught
// with the variant that lost it.
void drain_rank1(const char* variant) {
  rdmx::Synchronizer sync;
  std::uint64_t received = 0;
  rdmx::MessengerGlobal().call_return(rdmx::ThreadId{1, 0}, [] { return g_received; }, rdmx::into(received, sync));
  sync.wait();
  if (received != g_made)
    throw rdmx::Error(rdmx::Errc::protocol, std::string("after ") + variant + ": rank 1 ran " + std::to_string(received) +
                                                " calls, " + std::to_string(g_made) + " were made");
}

// N bytes of captures, every word of them i. (A one-byte store into a
// zeroed array, as this was first written, made GCC read the array back
// across two stores of different widths: a store-forwarding stall of about
// 4 ns per call in the caller's loop, in every variant that builds calls.)
template <std::size_t N>
auto make_call(std::size_t i) {
  static_assert(N % 8 == 0);
  std::array<std::uint64_t, N / 8> payload;
  payload.fill(i);
  return [payload] {
    ++g_received;
    g_sink += payload[0] + payload[N / 8 - 1];
  };
}

// ---- the rdmx variants ----

template <std::size_t N>
double run_write(std::size_t n) {
  rdmx::MessengerGlobal messenger;
  const rdmx::ThreadId dest{1, 0};
  const auto t0 = Clock::now();
  for (std::size_t i = 0; i < n; ++i) messenger.call(dest, make_call<N>(i));
  drain_rank1("write");
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

template <std::size_t N>
double run_aggregated(rdmx::Aggregation mode, std::size_t n) {
  rdmx::Aggregator agg(mode);
  const rdmx::ThreadId dest{1, 0};
  const auto t0 = Clock::now();
  for (std::size_t i = 0; i < n; ++i) agg.call(dest, make_call<N>(i));
  agg.flush();
  drain_rank1(mode == rdmx::Aggregation::trad ? "trad" : "ovfl");
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

template <std::size_t N>
double run_send(std::size_t n) {
  const auto t0 = Clock::now();
  for (std::size_t i = 0; i < n; ++i) {
    rdmx::call(rdmx::ThreadId{1, 0}, make_call<N>(i));
    if ((i & 15) == 15) rdmx::progress();  // sends UCX queued wait for our progress
  }
  rdmx::Synchronizer sync;
  rdmx::call(rdmx::ThreadId{1, 0}, [] {}, rdmx::when_run(sync));
  sync.wait();
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

template <class F>
double by_size(std::size_t size, F&& f) {
  switch (size) {
    case 8: return f(std::integral_constant<std::size_t, 8>{});
    case 64: return f(std::integral_constant<std::size_t, 64>{});
    default: return f(std::integral_constant<std::size_t, 256>{});
  }
}

// ---- MPI: windowed message rate and ping-pong, the same sizes ----

double mpi_rate_sender(std::size_t size, std::size_t n) {
  std::vector<char> buffer(size * mpi_window, 1);
  std::array<MPI_Request, mpi_window> requests;
  char ack = 0;
  MPI_Barrier(MPI_COMM_WORLD);
  const auto t0 = Clock::now();
  for (std::size_t sent = 0; sent < n; sent += mpi_window) {
    for (int w = 0; w < mpi_window; ++w)
      MPI_Isend(buffer.data() + w * size, static_cast<int>(size), MPI_CHAR, 1, 1, MPI_COMM_WORLD, &requests[w]);
    MPI_Waitall(mpi_window, requests.data(), MPI_STATUSES_IGNORE);
  }
  MPI_Recv(&ack, 1, MPI_CHAR, 1, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

void mpi_rate_receiver(std::size_t size, std::size_t n) {
  std::vector<char> buffer(size * mpi_window);
  std::array<MPI_Request, mpi_window> requests;
  char ack = 0;
  MPI_Barrier(MPI_COMM_WORLD);
  for (std::size_t got = 0; got < n; got += mpi_window) {
    for (int w = 0; w < mpi_window; ++w)
      MPI_Irecv(buffer.data() + w * size, static_cast<int>(size), MPI_CHAR, 0, 1, MPI_COMM_WORLD, &requests[w]);
    MPI_Waitall(mpi_window, requests.data(), MPI_STATUSES_IGNORE);
  }
  MPI_Send(&ack, 1, MPI_CHAR, 0, 2, MPI_COMM_WORLD);
}

double mpi_pingpong(int rank, std::size_t n) {
  char byte[8] = {};
  MPI_Barrier(MPI_COMM_WORLD);
  const auto t0 = Clock::now();
  for (std::size_t i = 0; i < n; ++i) {
    if (rank == 0) {
      MPI_Send(byte, 8, MPI_CHAR, 1, 3, MPI_COMM_WORLD);
      MPI_Recv(byte, 8, MPI_CHAR, 1, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    } else {
      MPI_Recv(byte, 8, MPI_CHAR, 0, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      MPI_Send(byte, 8, MPI_CHAR, 0, 3, MPI_COMM_WORLD);
    }
  }
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// n rounds of an MPI_Bcast of `size` bytes from rank 0, each acknowledged by
// rank 1 once it has the data (what a consumed broadcast reports).
double mpi_bcast(int rank, std::size_t size, std::size_t n) {
  std::vector<char> buffer(size, 1);
  char ack = 0;
  MPI_Barrier(MPI_COMM_WORLD);
  const auto t0 = Clock::now();
  for (std::size_t i = 0; i < n; ++i) {
    MPI_Bcast(buffer.data(), static_cast<int>(size), MPI_CHAR, 0, MPI_COMM_WORLD);
    if (rank == 0)
      MPI_Recv(&ack, 1, MPI_CHAR, 1, 4, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    else
      MPI_Send(&ack, 1, MPI_CHAR, 0, 4, MPI_COMM_WORLD);
  }
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// ---- output ----

struct Config {
  std::string tls;
  std::string mpi_pml;
  unsigned reps;
  std::string cores;  // read on the main thread, the one that calls or runs the calls
};

void emit(const Config& c, const std::string& variant, std::size_t size, const char* metric, double value,
          std::size_t messages) {
  JsonLine line;
  line.field("bench", "invoke")
      .field("variant", variant)
      .field("size", size)
      .field("metric", metric)
      .field("value", value)
      .field("tls", c.tls)
      .field("mpi_pml", c.mpi_pml)
      .field("processes", 2)
      .field("placement", "rank 0 calls from its main thread, rank 1's main thread runs the calls; " + c.cores)
      .field("repetitions", c.reps)
      .field("messages", messages)
      .print();
}

// ---- the two roles ----

void target_loop(transfer::Worker& own, AmPeer&) {
  int rank = 1;
  std::size_t line = 0;
  while (g_phase != phase_stop) {
    switch (g_phase.load()) {
      case phase_raw_read: {
        own.progress();
        // Read the next 4 KiB of the window, one load per cache line.
        const std::size_t window = g_phase_arg[0];
        for (int i = 0; i < 64; ++i, line += 64) {
          if (line >= window) line = 0;
          g_sink += std::to_integer<std::uint64_t>(*reinterpret_cast<const volatile std::byte*>(g_target + line));
        }
        rdmx::progress();
        break;
      }
      case phase_raw:
        own.progress();  // over TCP, UCX emulates puts (and delivers our AMs) through this worker
        rdmx::progress();
        break;
      case phase_mpi_rate:
        mpi_rate_receiver(g_phase_arg[0], g_phase_arg[1]);
        g_phase = phase_rdmx;
        break;
      case phase_mpi_pingpong:
        mpi_pingpong(rank, g_phase_arg[1]);
        g_phase = phase_rdmx;
        break;
      case phase_mpi_bcast:
        mpi_bcast(rank, g_phase_arg[0], g_phase_arg[1]);
        g_phase = phase_rdmx;
        break;
      default:
        rdmx::progress();
    }
  }
}

struct Series {
  std::vector<double> rate;
  void add(std::size_t n, double seconds) { rate.push_back(static_cast<double>(n) / seconds); }
  double median_rate() const { return median(rate); }
};

int caller(const Options& o, transfer::Worker& own, transfer::Endpoint& ep, ucp_rkey_h rkey, std::uint64_t target_base,
           AmPeer& peer, const std::string& pml) {
  const char* tls = std::getenv("UCX_TLS");
  Config cfg{tls != nullptr ? tls : "default", pml, o.reps, cores_text()};
  std::fprintf(stderr, "rdmx-bench-invoke: UCX_TLS=%s, Open MPI pml %s, %u repetitions (median)\n", cfg.tls.c_str(),
               pml.c_str(), o.reps);
  Raw raw(rdmx::Job::current().context(), own, ep, rkey, raw_ring, 4096, u_max);
  auto raw_run = [&](std::size_t size, std::size_t n) {
    const std::size_t messages = std::min(std::max(raw_ring, MiB / size), target_bytes / size);
    return raw.run(size, n, Window{target_base, messages * size});
  };

  std::fprintf(stderr, "%6s %11s %11s %11s %11s %11s %11s %11s %11s %9s %9s %9s %9s %9s\n", "size", "raw/s", "raw-read/s",
               "am/s", "write/s", "ovfl/s", "trad/s", "send/s", "mpi/s", "write/raw", "w/rawread", "write/am", "ovfl/wr",
               "trad/mpi");
  double raw4k = 0, raw_read4k = 0;
  {
    set_phase(phase_raw);
    const std::size_t n = calibrate([&](std::size_t k) { return raw_run(4096, k); }, o.seconds, u_max);
    const std::size_t window_bytes = std::min(std::max(raw_ring, MiB / 4096), target_bytes / 4096) * 4096;
    Series s, s_read;
    for (unsigned r = 0; r < o.reps; ++r) {
      set_phase(phase_raw);
      s.add(n, raw_run(4096, n));
      set_phase(phase_raw_read, window_bytes);
      s_read.add(n, raw_run(4096, n));
    }
    raw4k = s.median_rate();
    raw_read4k = s_read.median_rate();
    emit(cfg, "raw", 4096, "msgs_per_s", raw4k, n);
    emit(cfg, "raw", 4096, "MB_per_s", raw4k * 4096 / 1e6, n);
    emit(cfg, "raw-read", 4096, "msgs_per_s", raw_read4k, n);
    emit(cfg, "raw-read", 4096, "MB_per_s", raw_read4k * 4096 / 1e6, n);
    set_phase(phase_rdmx);
  }
  for (std::size_t size : call_sizes) {
    // Every variant gets the same number of messages: the one raw needs for the aimed-for time.
    set_phase(phase_raw);
    const std::size_t n = calibrate([&](std::size_t k) { return raw_run(size, k); }, o.seconds, u_max);
    set_phase(phase_rdmx);
    auto write = [&] { g_made += n; return by_size(size, [&](auto c) { return run_write<decltype(c)::value>(n); }); };
    auto ovfl = [&] { g_made += n; return by_size(size, [&](auto c) { return run_aggregated<decltype(c)::value>(rdmx::Aggregation::ovfl, n); }); };
    auto trad = [&] { g_made += n; return by_size(size, [&](auto c) { return run_aggregated<decltype(c)::value>(rdmx::Aggregation::trad, n); }); };
    auto send = [&] { g_made += n; return by_size(size, [&](auto c) { return run_send<decltype(c)::value>(n); }); };
    auto mpi = [&] {
      set_phase(phase_mpi_rate, size, n);
      const double t = mpi_rate_sender(size, round_up(n, mpi_window));
      return t * static_cast<double>(n) / static_cast<double>(round_up(n, mpi_window));
    };
    write(), trad(), ovfl();  // warm up: chunks set up, pages touched
    const std::size_t window_bytes = std::min(std::max(raw_ring, MiB / size), target_bytes / size) * size;
    Series r_raw, r_raw_read, r_am, r_write, r_ovfl, r_trad, r_send, r_mpi;
    std::vector<double> write_raw, write_raw_read, write_am, ovfl_write, trad_mpi;
    for (unsigned rep = 0; rep < o.reps; ++rep) {
      set_phase(phase_raw);
      const double t_raw = raw_run(size, n);
      set_phase(phase_raw_read, window_bytes);
      const double t_raw_read = raw_run(size, n);
      set_phase(phase_raw);
      const double t_am = run_am(own, ep, peer, size, n);
      set_phase(phase_rdmx);
      const double t_write = write(), t_ovfl = ovfl(), t_trad = trad(), t_send = send(), t_mpi = mpi();
      r_raw.add(n, t_raw);
      r_raw_read.add(n, t_raw_read);
      write_raw_read.push_back(t_raw_read / t_write);
      r_am.add(n, t_am);
      write_am.push_back(t_am / t_write);
      r_write.add(n, t_write);
      r_ovfl.add(n, t_ovfl);
      r_trad.add(n, t_trad);
      r_send.add(n, t_send);
      r_mpi.add(n, t_mpi);
      write_raw.push_back(t_raw / t_write);
      ovfl_write.push_back(t_write / t_ovfl);
      trad_mpi.push_back(t_mpi / t_trad);
    }
    const double mb = static_cast<double>(size) / 1e6;
    for (auto [name, s] : {std::pair{"raw", &r_raw}, {"raw-read", &r_raw_read}, {"am", &r_am}, {"write", &r_write}, {"ovfl", &r_ovfl}, {"trad", &r_trad},
                           {"send", &r_send}, {"mpi", &r_mpi}}) {
      emit(cfg, name, size, "msgs_per_s", s->median_rate(), n);
      emit(cfg, name, size, "MB_per_s", s->median_rate() * mb, n);
    }
    emit(cfg, "write/raw", size, "ratio", median(write_raw), n);
    emit(cfg, "write/raw-read", size, "ratio", median(write_raw_read), n);
    emit(cfg, "write/am", size, "ratio", median(write_am), n);
    emit(cfg, "ovfl/write", size, "ratio", median(ovfl_write), n);
    emit(cfg, "trad/mpi", size, "ratio", median(trad_mpi), n);
    // Seriema: trad with 256 B calls against max-raw at 4 KiB, in bytes per second.
    // Over shared memory raw's 4 KiB puts land in a window nobody reads, so
    // they stay in the writer's cache; trad's calls are read by the thread
    // that runs them. raw-read4096 is the same puts with a reader.
    if (size == 256) {
      emit(cfg, "trad/raw4096", size, "ratio", r_trad.median_rate() * 256 / (raw4k * 4096), n);
      emit(cfg, "trad/raw-read4096", size, "ratio", r_trad.median_rate() * 256 / (raw_read4k * 4096), n);
    }
    std::fprintf(stderr, "%6zu %11s %11s %11s %11s %11s %11s %11s %11s %9.3f %9.3f %9.3f %9.3f %9.3f\n", size,
                 human_rate(r_raw.median_rate()).c_str(), human_rate(r_raw_read.median_rate()).c_str(),
                 human_rate(r_am.median_rate()).c_str(), human_rate(r_write.median_rate()).c_str(),
                 human_rate(r_ovfl.median_rate()).c_str(), human_rate(r_trad.median_rate()).c_str(),
                 human_rate(r_send.median_rate()).c_str(), human_rate(r_mpi.median_rate()).c_str(), median(write_raw),
                 median(write_raw_read), median(write_am), median(ovfl_write), median(trad_mpi));
  }

  // Latency: one call and its consumed notification, one at a time.
  {
    const std::size_t n = o.quick ? 2000 : 20000;
    auto write_rt = [&] {
      rdmx::MessengerGlobal m;
      const auto t0 = Clock::now();
      for (std::size_t i = 0; i < n; ++i) {
        rdmx::Synchronizer sync;
        m.call(rdmx::ThreadId{1, 0}, [] { ++g_received; }, rdmx::when_run(sync));
        sync.wait();
      }
      g_made += n;
      return std::chrono::duration<double>(Clock::now() - t0).count();
    };
    // The same, answered by one RDMA atomic into a registered Synchronizer.
    rdmx::RemoteObject<rdmx::Synchronizer> remote_sync;
    auto rdma_rt = [&] {
      rdmx::MessengerGlobal m;
      const auto t0 = Clock::now();
      for (std::size_t i = 0; i < n; ++i) {
        m.call(rdmx::ThreadId{1, 0}, [] { ++g_received; }, rdmx::when_run(remote_sync));
        remote_sync->wait();
      }
      g_made += n;
      return std::chrono::duration<double>(Clock::now() - t0).count();
    };
    auto send_rt = [&] {
      const auto t0 = Clock::now();
      for (std::size_t i = 0; i < n; ++i) {
        rdmx::Synchronizer sync;
        rdmx::call(rdmx::ThreadId{1, 0}, [] { ++g_received; }, rdmx::when_run(sync));
        sync.wait();
      }
      g_made += n;
      return std::chrono::duration<double>(Clock::now() - t0).count();
    };
    std::vector<double> t_write, t_rdma, t_send, t_am, t_mpi, ratio, ratio_rdma;
    write_rt();
    rdma_rt();
    for (unsigned rep = 0; rep < o.reps; ++rep) {
      set_phase(phase_raw);
      const double am = am_round_trips(own, ep, peer, 8, n);
      set_phase(phase_rdmx);
      const double w = write_rt(), rd = rdma_rt(), s = send_rt();
      set_phase(phase_mpi_pingpong, 8, n);
      const double mp = mpi_pingpong(0, n);
      t_am.push_back(am / n * 1e6);
      t_write.push_back(w / n * 1e6);
      t_rdma.push_back(rd / n * 1e6);
      ratio_rdma.push_back(rd / am);
      t_send.push_back(s / n * 1e6);
      t_mpi.push_back(mp / n * 1e6);
      ratio.push_back(w / am);
    }
    emit(cfg, "latency-am", 8, "us_round_trip", median(t_am), n);
    emit(cfg, "latency-write", 8, "us_round_trip", median(t_write), n);
    emit(cfg, "latency-send", 8, "us_round_trip", median(t_send), n);
    emit(cfg, "latency-mpi", 8, "us_round_trip", median(t_mpi), n);
    emit(cfg, "latency-write/am", 8, "ratio", median(ratio), n);
    emit(cfg, "latency-write-rdma", 8, "us_round_trip", median(t_rdma), n);
    emit(cfg, "latency-write-rdma/am", 8, "ratio", median(ratio_rdma), n);
    std::fprintf(stderr, "round trip (us): raw AM %.2f, write %.2f (%.2fx AM), write answered by RDMA %.2f (%.2fx AM), "
                 "send %.2f, MPI ping-pong %.2f\n", median(t_am), median(t_write), median(ratio), median(t_rdma),
                 median(ratio_rdma), median(t_send), median(t_mpi));
  }

  // Broadcast of 64 KiB to both threads (each process runs one), waited
  // for until both ran it: the three broadcast_buffers and MPI_Bcast + ack.
  {
    constexpr std::size_t size = 64 * 1024;
    const std::size_t n = o.quick ? 200 : 2000;
    rdmx::Job& job = rdmx::Job::current();
    rdmx::memory::Block orig = job.arena().allocate_chunk(size);
    rdmx::memory::Block own = job.arena().allocate_chunk(size);
    std::memset(orig.data, 7, size);
    const std::vector<rdmx::RemoteLocator> dest{rdmx::local_locator(own.data, size), rdmx::allocate_remote(1, size)};
    const rdmx::RemoteLocator orig_at = rdmx::local_locator(orig.data, size);
    const std::span<const std::byte> data(orig.data, size);
    auto f = [](std::span<std::byte> d) {
      if (rdmx::Job::current().rank() == 1) ++g_received;
      g_sink += std::to_integer<std::uint64_t>(d[d.size() - 1]);
    };
    auto round = [&](int how) {
      rdmx::MessengerGlobal m;
      const auto t0 = Clock::now();
      for (std::size_t i = 0; i < n; ++i) {
        rdmx::Synchronizer sync;
        if (how == 0) m.broadcast_buffer(f, data, rdmx::when_run(sync));
        if (how == 1) m.broadcast_buffer(f, orig_at, rdmx::when_run(sync));
        if (how == 2) m.broadcast_buffer(f, data, dest, rdmx::when_run(sync));
        sync.wait();
      }
      g_made += n;
      return std::chrono::duration<double>(Clock::now() - t0).count() / n * 1e6;
    };
    const char* names[3] = {"broadcast-inline", "broadcast-read", "broadcast-written"};
    std::vector<double> t[3], t_mpi, ratio[3];
    for (int how = 0; how < 3; ++how) round(how);  // warm-up
    for (unsigned rep = 0; rep < o.reps; ++rep) {
      set_phase(phase_rdmx);
      double us[3];
      for (int how = 0; how < 3; ++how) t[how].push_back(us[how] = round(how));
      set_phase(phase_mpi_bcast, size, n);
      const double mp = mpi_bcast(0, size, n) / n * 1e6;
      t_mpi.push_back(mp);
      for (int how = 0; how < 3; ++how) ratio[how].push_back(us[how] / mp);
    }
    set_phase(phase_rdmx);
    emit(cfg, "broadcast-mpi", size, "us_per_broadcast", median(t_mpi), n);
    for (int how = 0; how < 3; ++how) {
      emit(cfg, names[how], size, "us_per_broadcast", median(t[how]), n);
      emit(cfg, std::string(names[how]) + "/mpi", size, "ratio", median(ratio[how]), n);
    }
    std::fprintf(stderr, "broadcast of 64 KiB to 2 threads, until all ran it (us): inline %.2f, read %.2f, written %.2f, "
                 "MPI_Bcast + ack %.2f\n", median(t[0]), median(t[1]), median(t[2]), median(t_mpi));
    rdmx::free_remote(dest[1]);
    job.arena().release_chunk(own);
    job.arena().release_chunk(orig);
  }

  // Every call ran exactly once.
  rdmx::Synchronizer sync;
  std::uint64_t received = 0;
  rdmx::call_return(rdmx::ThreadId{1, 0}, [] { return g_received; }, rdmx::into(received, sync));
  sync.wait();
  set_phase(phase_stop);
  if (received != g_made) {
    std::fprintf(stderr, "rdmx-bench-invoke: rank 1 ran %llu calls, %llu were made\n",
                 static_cast<unsigned long long>(received), static_cast<unsigned long long>(g_made));
    return 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  rdmx::Job job(argc, argv);
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
  int rc = 0;
  try {
    const Options o = parse(argc, argv);
    if (job.size() != 2)
      throw rdmx::Error(rdmx::Errc::invalid_argument, "rdmx-bench-invoke needs exactly 2 processes: run it with `scripts/bench invoke`");
    const std::string pml = rdmx::bench::mpi_pml();
    transfer::Worker own(job.context());
    AmPeer peer;
    std::optional<transfer::MemoryRegion> target;
    std::vector<std::byte> mine;
    put_bytes(mine, own.address());
    if (job.rank() == 1) {
      target.emplace(job.context(), target_bytes);
      std::memset(target->data(), 0, target->size());
      put_u64(mine, reinterpret_cast<std::uint64_t>(target->data()));
      put_bytes(mine, target->packed_rkey());
    }
    auto all = job.allgather(mine);
    std::size_t at = 0;
    transfer::Endpoint ep(own, get_bytes(all[1 - job.rank()], at), "benchmark peer");
    if (job.rank() == 1) {
      peer.back = ep.get();
      g_target = target->data();
      set_am_handler(own, am_ping, &on_ping, &peer);
      set_am_handler(own, am_stream, &on_stream, &peer);
      target_loop(own, peer);
    } else {
      set_am_handler(own, am_pong, &on_pong, &peer);
      const std::uint64_t base = get_u64(all[1], at);
      transfer::RemoteKey rkey(ep, get_bytes(all[1], at));
      rc = caller(o, own, ep, rkey.get(), base, peer, pml);
    }
    job.barrier();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rdmx-bench-invoke (rank %u): %s\n", job.rank(), e.what());
    std::fflush(stderr);
    std::_Exit(1);
  }
  MPI_Finalize();
  return rc;
}
