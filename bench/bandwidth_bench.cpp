// rdmx-bench-bandwidth: HPX's OSU-style bidirectional bandwidth test made of
// remote actions (the seed's Fig. 5), side by side with Open MPI in the same
// processes. Two processes; start it with `scripts/bench bandwidth`.
//
// Bandwidth (bidirectional, both processes send at once, OSU bibw):
//   SerializeBuffer  T worker threads per process; thread t of each process
//                     sends windows of async(sink, peer thread t, buffer) where
//                     buffer is a SerializeBuffer over the thread's own memory
//                     (above the zero-copy threshold a pointer chunk, registered
//                     through the registration cache), and waits for the window
//   RmaVector        the same with an RmaVector in registered memory (an RMA
//                     chunk that carries its key)
//   mpi               Open MPI: W MPI_Isend + W MPI_Irecv per window, both ways,
//                     from one thread (as osu_bibw)
// The window is 64 messages, fewer above 1 MiB so that at most 64 MiB per
// thread are in flight (the same window for MPI). Value: MB/s (10^6 bytes)
// moved in both directions together.
// Latency (ping-pong, one way = round trip / 2): async(echo, rank 1, buffer)
// returning its argument, against MPI_Send/MPI_Recv ping-pong.
//
// Flags: --reps=N  --threads=1,2,4  --max-size=BYTES  --quick
// Output: JSON lines on stdout (rank 0), a table on stderr.
#define OMPI_SKIP_MPICXX 1
#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common.hpp"
#include "json.hpp"
#include "rdmx/core/backoff.hpp"
#include "rdmx/core/env.hpp"
#include "rdmx/fabric/job.hpp"
#include "rdmx/action/action.hpp"
#include "rdmx/invoke/messenger.hpp"
#include "rdmx/memory/arena.hpp"

namespace {

using namespace rdmx::bench;
namespace serial = rdmx::serial;

constexpr int max_window = 64;
constexpr std::size_t in_flight_cap = 64 * MiB;
constexpr std::uint32_t max_threads = 4;

struct Options {
  unsigned reps = 3;
  std::vector<std::uint32_t> threads{1, 2, 4};
  std::size_t max_size = 4 * MiB;
  bool quick = false;
};

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const std::size_t eq = arg.find('=');
    const std::string key = arg.substr(0, eq), value = eq == std::string::npos ? "" : arg.substr(eq + 1);
    if (key == "--quick" && eq == std::string::npos) {
      o.quick = true;
    } else if (key == "--reps") {
      o.reps = static_cast<unsigned>(rdmx::env::parse_count(value, "--reps"));
    } else if (key == "--max-size") {
      o.max_size = rdmx::env::parse_size(value, "--max-size");
    } else if (key == "--threads") {
      o.threads.clear();
      for (const std::string& t : split(value)) o.threads.push_back(static_cast<std::uint32_t>(rdmx::env::parse_count(t, "--threads")));
    } else {
      throw rdmx::Error(rdmx::Errc::invalid_argument, "unknown argument '" + arg +
                                                          "'\nusage: rdmx-bench-bandwidth [--reps=N] [--threads=1,2,4] "
                                                          "[--max-size=BYTES] [--quick]");
    }
  }
  const bool threads_ok = !o.threads.empty() && std::all_of(o.threads.begin(), o.threads.end(), [](std::uint32_t t) {
    return t >= 1 && t <= max_threads;
  });
  if (o.reps == 0 || !threads_ok)
    throw rdmx::Error(rdmx::Errc::invalid_argument, "--reps must be at least 1 and --threads counts 1.." + std::to_string(max_threads));
  if (o.quick) {
    o.reps = 1;
    o.max_size = std::min(o.max_size, std::size_t{1} << 20);
  }
  return o;
}

int window_for(std::size_t size) {
  return static_cast<int>(std::clamp<std::size_t>(in_flight_cap / size, 1, max_window));
}
// Windows per measurement: about 256 MiB each way for large messages, at
// most 200 windows for small ones (a few tens of milliseconds).
int windows_for(std::size_t size, bool quick) {
  const std::size_t per_window = size * static_cast<std::size_t>(window_for(size));
  int n = static_cast<int>(std::clamp<std::size_t>(256 * MiB / per_window, 4, 200));
  return quick ? std::max(2, n / 16) : n;
}

// ---- actions ----

std::atomic<std::uint64_t> served[max_threads];
std::uint64_t g_sink = 0;
void sink_buffer(serial::SerializeBuffer<char> b) {
  g_sink += b.empty() ? 0 : static_cast<unsigned char>(b[0]);
  served[rdmx::this_thread().thread].fetch_add(1, std::memory_order_relaxed);
}
void sink_rma(serial::RmaVector<char> v) {
  g_sink += v.empty() ? 0 : static_cast<unsigned char>(v[0]);
  served[rdmx::this_thread().thread].fetch_add(1, std::memory_order_relaxed);
}
serial::SerializeBuffer<char> echo_buffer(serial::SerializeBuffer<char> b) { return b; }
serial::RmaVector<char> echo_rma(serial::RmaVector<char> v) { return v; }
std::atomic<bool> stop_serving{false};
void stop() { stop_serving = true; }

enum class Variant { SerializeBuffer, RmaVector };

// One thread's payloads: the same memory for every message, as osu_bibw.
struct Payload {
  std::vector<char> plain;
  serial::RmaVector<char> rma;
  Payload(std::size_t size, serial::RmaMemory& memory) : plain(size, 'x'), rma(size, 'x', &memory) {}
};

// Thread `me` runs `windows` windows against the same thread of the other
// process and serves that thread's windows; returns its seconds.
double run_pair(rdmx::ThreadId me, Variant v, std::size_t size, int windows, Payload& payload) {
  const rdmx::ThreadId peer{1 - me.process, me.thread};
  const int w = window_for(size);
  std::vector<rdmx::Future<void>> inflight;
  inflight.reserve(static_cast<std::size_t>(w));
  const auto t0 = Clock::now();
  for (int k = 0; k < windows; ++k) {
    inflight.clear();
    for (int i = 0; i < w; ++i) {
      if (v == Variant::SerializeBuffer)
        inflight.push_back(rdmx::async(rdmx::action<&sink_buffer>, peer,
                                       serial::SerializeBuffer<char>::reference(payload.plain.data(), size)));
      else
        inflight.push_back(rdmx::async(rdmx::action<&sink_rma>, peer, payload.rma));
    }
    for (auto& f : inflight) f.get();
  }
  // Serve the peer until all its messages have run here.
  const std::uint64_t expected = static_cast<std::uint64_t>(windows) * static_cast<std::uint64_t>(w);
  rdmx::Backoff backoff;
  while (served[me.thread].load(std::memory_order_relaxed) < expected) backoff(rdmx::progress() != 0);
  const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  rdmx::MessengerGlobal().flush();  // the last replies
  return seconds;
}

// Bidirectional MB/s of T threads per process (rank 0's view: its slowest thread).
double rdmx_bibw(rdmx::Job& job, Variant v, std::size_t size, std::uint32_t threads, bool quick,
                 std::vector<std::unique_ptr<Payload>>& payloads) {
  const int windows = windows_for(size, quick);
  for (auto& s : served) s = 0;
  std::array<double, max_threads> seconds{};
  job.barrier();
  job.run([&](rdmx::ThreadId me) {
    if (me.thread < threads) seconds[me.thread] = run_pair(me, v, size, windows, *payloads[me.thread]);
  });
  job.barrier();
  const double slowest = *std::max_element(seconds.begin(), seconds.begin() + threads);
  const double bytes = 2.0 * threads * windows * window_for(size) * static_cast<double>(size);
  return bytes / slowest / 1e6;
}

double mpi_bibw(std::size_t size, bool quick) {
  const int w = window_for(size);
  const int windows = windows_for(size, quick);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  const int peer = 1 - rank;
  std::vector<char> out(size, 'x'), in(size * static_cast<std::size_t>(w));
  std::vector<MPI_Request> requests(2 * static_cast<std::size_t>(w));
  MPI_Barrier(MPI_COMM_WORLD);
  const auto t0 = Clock::now();
  for (int k = 0; k < windows; ++k) {
    for (int i = 0; i < w; ++i)
      MPI_Irecv(in.data() + static_cast<std::size_t>(i) * size, static_cast<int>(size), MPI_CHAR, peer, 10, MPI_COMM_WORLD,
                &requests[static_cast<std::size_t>(i)]);
    for (int i = 0; i < w; ++i)
      MPI_Isend(out.data(), static_cast<int>(size), MPI_CHAR, peer, 10, MPI_COMM_WORLD, &requests[static_cast<std::size_t>(w + i)]);
    MPI_Waitall(2 * w, requests.data(), MPI_STATUSES_IGNORE);
  }
  const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  double slowest = 0;
  MPI_Allreduce(&seconds, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return 2.0 * windows * w * static_cast<double>(size) / slowest / 1e6;
}

int pingpong_iterations(std::size_t size, bool quick) {
  const int n = static_cast<int>(std::clamp<std::size_t>(64 * MiB / size, 20, 2000));
  return quick ? std::max(5, n / 10) : n;
}

// One-way latency in microseconds of async(echo) from rank 0's thread 0.
double rdmx_pingpong(rdmx::Job& job, Variant v, std::size_t size, bool quick, Payload& payload) {
  const int n = pingpong_iterations(size, quick);
  stop_serving = false;
  job.barrier();
  double us = 0;
  if (job.rank() == 0) {
    auto once = [&] {
      if (v == Variant::SerializeBuffer) {
        auto b = rdmx::async(rdmx::action<&echo_buffer>, {1, 0}, serial::SerializeBuffer<char>::reference(payload.plain.data(), size)).get();
        g_sink += b.size();
      } else {
        auto r = rdmx::async(rdmx::action<&echo_rma>, {1, 0}, payload.rma).get();
        g_sink += r.size();
      }
    };
    for (int i = 0; i < std::min(n, 10); ++i) once();  // warm: endpoints, registrations, landing memory
    const auto t0 = Clock::now();
    for (int i = 0; i < n; ++i) once();
    us = std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / n / 2;
    rdmx::async(rdmx::action<&stop>, {1, 0}).get();
  } else {
    rdmx::Backoff backoff;
    while (!stop_serving.load()) backoff(rdmx::progress() != 0);
  }
  job.barrier();
  return us;
}

double mpi_pingpong(std::size_t size, bool quick) {
  const int n = pingpong_iterations(size, quick);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  std::vector<char> buffer(size, 'x');
  auto once = [&] {
    if (rank == 0) {
      MPI_Send(buffer.data(), static_cast<int>(size), MPI_CHAR, 1, 20, MPI_COMM_WORLD);
      MPI_Recv(buffer.data(), static_cast<int>(size), MPI_CHAR, 1, 20, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    } else {
      MPI_Recv(buffer.data(), static_cast<int>(size), MPI_CHAR, 0, 20, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      MPI_Send(buffer.data(), static_cast<int>(size), MPI_CHAR, 0, 20, MPI_COMM_WORLD);
    }
  };
  MPI_Barrier(MPI_COMM_WORLD);
  for (int i = 0; i < std::min(n, 10); ++i) once();
  const auto t0 = Clock::now();
  for (int i = 0; i < n; ++i) once();
  return std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / n / 2;
}

// What every result line carries: the run's configuration.
JsonLine configuration(const std::string& tls, const std::string& pml, unsigned reps) {
  JsonLine common;
  common.field("bench", "bandwidth");
  common.field("tls", tls);
  common.field("mpi_pml", pml);
  common.field("zero_copy_threshold", serial::env_zero_copy_threshold());
  common.field("processes", 2);
  common.field("placement", "T worker threads per process, thread t of rank 0 <-> thread t of rank 1; MPI from thread 0; " +
                                cores_text());
  common.field("idle_spins", static_cast<std::size_t>(rdmx::Backoff::idle_spins()));
  common.field("repetitions", reps);
  return common;
}

// One result: the configuration, what was measured, and its ratios (taken per repetition, then the median).
void emit(const JsonLine& common, const char* variant, std::size_t size, std::uint32_t threads, const char* metric,
          double value, std::size_t window, const std::map<std::string, double>& ratios = {}) {
  JsonLine line = common.with("variant", variant);
  for (const auto& [key, number] : std::initializer_list<std::pair<const char*, std::size_t>>{
           {"size", size}, {"threads", threads}, {"window", window}})
    line.field(key, number);
  line.field("metric", metric);
  line.field("value", value);
  for (const auto& [key, ratio] : ratios) line.field(key, ratio);
  line.print();
}

std::vector<std::size_t> sizes_up_to(std::size_t max, bool quick) {
  std::vector<std::size_t> sizes;
  for (std::size_t s = 1; s <= max; s *= quick ? 16 : 4) sizes.push_back(s);
  if (sizes.back() != max) sizes.push_back(max);
  return sizes;
}

int run(rdmx::Job& job, const Options& o, const std::string& pml) {
  if (job.size() != 2)
    throw rdmx::Error(rdmx::Errc::invalid_argument, "rdmx-bench-bandwidth needs exactly 2 processes: run it with `scripts/bench bandwidth`");
  if (*std::max_element(o.threads.begin(), o.threads.end()) > job.threads_per_process())
    throw rdmx::Error(rdmx::Errc::invalid_argument, "--threads asks for more threads than the job has");
  const char* tls = std::getenv("UCX_TLS");
  const JsonLine cfg = configuration(tls != nullptr ? tls : "default", pml, o.reps);
  const bool root = job.rank() == 0;
  serial::RmaMemory memory(job.arena());
  const std::vector<std::size_t> sizes = sizes_up_to(o.max_size, o.quick);
  if (root)
    std::fprintf(stderr, "rdmx-bench-bandwidth: UCX_TLS=%s, Open MPI pml %s, %u repetitions (median), zero-copy threshold %zu\n",
                 tls != nullptr ? tls : "default", pml.c_str(), o.reps, serial::env_zero_copy_threshold());
  if (root) std::fprintf(stderr, "%9s %7s %10s %10s %10s %9s %9s\n", "size", "threads", "sbuf MB/s", "rma MB/s", "mpi MB/s",
                         "rma/mpi", "rma/sbuf");
  {
    // Warm up what the first measurement would otherwise pay for: endpoints,
    // messengers, landing memory, registrations, MPI's connections.
    std::vector<std::unique_ptr<Payload>> payloads;
    for (std::uint32_t t = 0; t < max_threads; ++t) payloads.push_back(std::make_unique<Payload>(o.max_size, memory));
    mpi_bibw(o.max_size, true);
    for (std::uint32_t t : o.threads)
      for (Variant v : {Variant::SerializeBuffer, Variant::RmaVector}) rdmx_bibw(job, v, o.max_size, t, true, payloads);
  }
  for (std::size_t size : sizes) {
    std::vector<std::unique_ptr<Payload>> payloads;
    for (std::uint32_t t = 0; t < max_threads; ++t) payloads.push_back(std::make_unique<Payload>(size, memory));
    // Per repetition: MPI, then every rdmx variant and thread count, so each
    // ratio compares measurements taken moments apart.
    std::vector<double> mpi;
    std::map<std::uint32_t, std::array<std::vector<double>, 2>> rdmx_rates;
    std::map<std::uint32_t, std::array<std::vector<double>, 2>> vs_mpi;
    std::map<std::uint32_t, std::vector<double>> rma_vs_sbuf;
    for (unsigned r = 0; r < o.reps; ++r) {
      mpi.push_back(mpi_bibw(size, o.quick));
      for (std::uint32_t t : o.threads) {
        const double s = rdmx_bibw(job, Variant::SerializeBuffer, size, t, o.quick, payloads);
        const double m = rdmx_bibw(job, Variant::RmaVector, size, t, o.quick, payloads);
        rdmx_rates[t][0].push_back(s);
        rdmx_rates[t][1].push_back(m);
        vs_mpi[t][0].push_back(s / mpi.back());
        vs_mpi[t][1].push_back(m / mpi.back());
        rma_vs_sbuf[t].push_back(m / s);
      }
    }
    if (!root) continue;
    const std::size_t w = static_cast<std::size_t>(window_for(size));
    emit(cfg, "mpi", size, 1, "MB/s", median(mpi), w);
    for (std::uint32_t t : o.threads) {
      const double s = median(rdmx_rates[t][0]), m = median(rdmx_rates[t][1]);
      emit(cfg, "serialize_buffer", size, t, "MB/s", s, w, {{"vs_mpi", median(vs_mpi[t][0])}});
      emit(cfg, "rma_vector", size, t, "MB/s", m, w,
           {{"vs_mpi", median(vs_mpi[t][1])}, {"vs_serialize_buffer", median(rma_vs_sbuf[t])}});
      std::fprintf(stderr, "%9zu %7u %10.1f %10.1f %10.1f %9.2f %9.2f\n", size, t, s, m, median(mpi), median(vs_mpi[t][1]),
                   median(rma_vs_sbuf[t]));
    }
  }
  // Ping-pong latency curve.
  if (root) std::fprintf(stderr, "%9s %12s %12s %12s %9s\n", "size", "sbuf us", "rma us", "mpi us", "rma/mpi");
  for (std::size_t size : sizes) {
    Payload payload(size, memory);
    std::vector<double> s, m, p, ratio;
    for (unsigned r = 0; r < o.reps; ++r) {
      p.push_back(mpi_pingpong(size, o.quick));
      s.push_back(rdmx_pingpong(job, Variant::SerializeBuffer, size, o.quick, payload));
      m.push_back(rdmx_pingpong(job, Variant::RmaVector, size, o.quick, payload));
      ratio.push_back(m.back() / p.back());
    }
    if (!root) continue;
    emit(cfg, "latency-mpi", size, 1, "us", median(p), 1);
    emit(cfg, "latency-serialize_buffer", size, 1, "us", median(s), 1, {{"vs_mpi", median(s) / median(p)}});
    emit(cfg, "latency-rma_vector", size, 1, "us", median(m), 1, {{"vs_mpi", median(ratio)}});
    std::fprintf(stderr, "%9zu %12.2f %12.2f %12.2f %9.2f\n", size, median(s), median(m), median(p), median(ratio));
  }
  job.barrier();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  // Worker threads for the largest thread count asked for.
  rdmx::JobOptions job_options;
  for (int i = 1; i < argc; ++i)
    if (std::string(argv[i]).rfind("--threads=", 0) == 0) {
      std::uint32_t most = 1;
      for (const std::string& t : split(std::string(argv[i]).substr(10))) most = std::max(most, static_cast<std::uint32_t>(std::atoi(t.c_str())));
      job_options.threads = std::min(most, max_threads);
    }
  if (job_options.threads == 0) job_options.threads = max_threads;
  rdmx::Job job(argc, argv, job_options);
  // Open MPI shares the processes (from thread 0 only), to be measured in the same run.
  struct Mpi {
    Mpi(int& argc, char**& argv) {
      int provided = 0;
      MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
    }
    ~Mpi() { MPI_Finalize(); }
  } mpi(argc, argv);
  try {
    return run(job, parse(argc, argv), rdmx::bench::mpi_pml());
  } catch (const std::exception& e) {
    // A failed collective would hang the other process: leave at once.
    std::fprintf(stderr, "rdmx-bench-bandwidth, process %u: %s\n", job.rank(), e.what());
    std::fflush(stderr);
    std::_Exit(1);
  }
}
