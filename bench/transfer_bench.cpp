// rdmx-bench-transfer: Seriema's Fig. 2 (section 5.1) on UCX, plus the
// send-based column of its Table 2. Two processes: rank 0 sends, rank 1 is
// the target. Start it with `scripts/bench transfer [flags]`.
//
// Variants, all over one endpoint from a worker of our own on rank 0 to a
// worker of our own on rank 1, interleaved in one run:
//   raw   hand-written UCP ("+ss"): ucp_put_nbx without callbacks from a ring
//         of source slots, a non-blocking ucp_ep_flush_nbx every u_max puts
//         counting finished flushes, slot reuse checked by hand.
//   auto  rdmx ("DTutils (auto)"): Transmitter::post_put with source units
//         from a CircularAllocator, each unit tagged with the returned EpochTag.
//   send  rdmx::call to process 1 thread 0 with a lambda capturing exactly
//         8, 64 or 256 bytes (active messages).
//
// Flags: --sizes=a,b,c  --u-max=N  --reps=N  --time=SECONDS (per measurement)
//        --ring=N (source slots)  --variants=raw,auto,send  --quick
// Output: one JSON object per result line on stdout (rank 0), a table on stderr.
#include <sched.h>
#include <ucp/api/ucp.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "common.hpp"
#include "json.hpp"
#include "rdmx/core/env.hpp"
#include "rdmx/core/error.hpp"
#include "rdmx/fabric/call.hpp"
#include "rdmx/fabric/job.hpp"
#include "rdmx/memory/arena.hpp"
#include "rdmx/memory/circular_allocator.hpp"
#include "rdmx/transfer/endpoint.hpp"
#include "rdmx/transfer/memory_region.hpp"
#include "rdmx/transfer/transmitter.hpp"
#include "rdmx/transfer/worker.hpp"

namespace {

using namespace rdmx::bench;
namespace transfer = rdmx::transfer;
namespace memory = rdmx::memory;

constexpr std::size_t target_bytes = 64 * MiB;  // rank 1's registered target

// ---- options ----

struct Options {
  std::vector<std::size_t> sizes;
  std::vector<std::size_t> send_sizes{8, 64, 256};
  unsigned u_max = 64;
  unsigned reps = 5;
  double seconds = 0.1;  // aimed-for duration of one (raw) measurement
  std::size_t ring = 0;   // source slots; 0: 4 * u_max, at least 16
  bool raw = true, automatic = true, send = true;
  bool quick = false;
};

[[noreturn]] void usage_error(const std::string& what) {
  throw rdmx::Error(rdmx::Errc::invalid_argument,
                    what + "\nusage: rdmx-bench-transfer [--sizes=8,64,...] [--u-max=N] [--reps=N] [--time=SECONDS] "
                           "[--ring=N] [--variants=raw,auto,send] [--quick]");
}

// Numbers and sizes (8, 64K, 2M) the way RDMX_* variables take them.
std::size_t parse_count(const std::string& text, const char* what) {
  try {
    return static_cast<std::size_t>(rdmx::env::parse_size(text, what));
  } catch (const rdmx::Error& e) {
    usage_error(e.what());
  }
}

Options parse(int argc, char** argv) {
  Options o;
  bool sizes_given = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&](const char* name) -> std::optional<std::string> {
      std::string prefix = std::string(name) + "=";
      if (a.rfind(prefix, 0) == 0) return a.substr(prefix.size());
      return std::nullopt;
    };
    if (a == "--quick") {
      o.quick = true;
    } else if (auto v = value("--sizes")) {
      o.sizes.clear();
      for (auto& s : split(*v)) o.sizes.push_back(parse_count(s, "--sizes"));
      sizes_given = true;
    } else if (auto v = value("--u-max")) {
      o.u_max = static_cast<unsigned>(parse_count(*v, "--u-max"));
    } else if (auto v = value("--reps")) {
      o.reps = static_cast<unsigned>(parse_count(*v, "--reps"));
    } else if (auto v = value("--ring")) {
      o.ring = parse_count(*v, "--ring");
    } else if (auto v = value("--time")) {
      try {
        o.seconds = std::stod(*v);
      } catch (const std::exception&) {
        usage_error("--time: '" + *v + "' is not a number of seconds");
      }
    } else if (auto v = value("--variants")) {
      o.raw = o.automatic = o.send = false;
      for (auto& s : split(*v)) {
        if (s == "raw") o.raw = true;
        else if (s == "auto") o.automatic = true;
        else if (s == "send") o.send = true;
        else usage_error("--variants: unknown variant '" + s + "' (raw, auto, send)");
      }
    } else {
      usage_error("unknown argument '" + a + "'");
    }
  }
  if (o.quick) {
    if (!sizes_given) o.sizes = {8, 64, 512, 4096, 65536};  // enough points for a curve
    o.reps = std::min(o.reps, 3u);
    o.seconds = std::min(o.seconds, 0.01);
  } else if (!sizes_given) {
    for (std::size_t s = 8; s <= 65536; s *= 2) o.sizes.push_back(s);
  }
  if (o.u_max == 0) usage_error("--u-max must be at least 1");
  if (o.reps == 0) usage_error("--reps must be at least 1");
  if (!(o.seconds > 0)) usage_error("--time must be positive");
  if (o.ring == 0) o.ring = std::max<std::size_t>(16, 4 * std::size_t{o.u_max});
  for (std::size_t s : o.sizes)
    if (s == 0 || s > target_bytes / 2) usage_error("--sizes: " + std::to_string(s) + " is outside 1 .. 32 MiB");
  return o;
}

// ---- rank 1 state: touched only by rank 1's main thread, where calls run ----

enum Phase : int { phase_rma, phase_send, phase_stop };
int g_phase = phase_rma;
std::uint64_t g_received = 0;  // bulk send calls executed
std::uint64_t g_sink = 0;      // keeps the payload observable

// ---- helpers ----

Window window_for(std::uint64_t target_base, std::size_t size, std::size_t ring) {
  std::size_t messages = std::max(ring, MiB / size);
  messages = std::min(messages, target_bytes / size);
  return {target_base, messages * size};
}

// ---- auto: rdmx's Transmitter + CircularAllocator (Seriema's "DTutils (auto)") ----

double run_auto(transfer::Transmitter& tx, memory::CircularAllocator& ring, ucp_rkey_h rkey, std::size_t size,
                std::size_t n, Window window) {
  const std::size_t stamp = std::min<std::size_t>(size, 8);
  const rdmx::ProgressHook progress{[](void* t) { return static_cast<transfer::Transmitter*>(t)->progress(); }, &tx};
  std::size_t offset = 0;
  const auto t0 = Clock::now();
  for (std::size_t i = 0; i < n; ++i) {
    memory::Block unit = ring.allocate(progress);
    std::memcpy(unit.data, &i, stamp);
    ring.tag(unit, tx.post_put(unit.data, size, transfer::RemoteAddress{window.base + offset, rkey}));
    offset += size;
    if (offset == window.bytes) offset = 0;
  }
  tx.flush();
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// ---- send: rdmx::call with N bytes of captures ----

void set_phase(int phase) {
  rdmx::Synchronizer sync;
  rdmx::call(rdmx::ThreadId{1, 0}, [phase] { g_phase = phase; }, rdmx::when_run(sync));
  sync.wait();
}

template <std::size_t N>
double run_send_n(std::size_t n) {
  std::array<std::byte, N> payload{};
  const auto t0 = Clock::now();
  for (std::size_t i = 0; i < n; ++i) {
    payload[0] = static_cast<std::byte>(i);
    rdmx::call(rdmx::ThreadId{1, 0}, [payload] {
      ++g_received;
      g_sink += static_cast<std::uint64_t>(payload[0]) + static_cast<std::uint64_t>(payload[N - 1]);
    });
    // Sends the transport could not take at once wait in UCX's queue until we progress.
    if ((i & 15) == 15) rdmx::progress();
  }
  rdmx::Synchronizer sync;
  rdmx::call(rdmx::ThreadId{1, 0}, [] {}, rdmx::when_run(sync));
  sync.wait();
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

double run_send(std::size_t size, std::size_t n) {
  switch (size) {
    case 8: return run_send_n<8>(n);
    case 64: return run_send_n<64>(n);
    case 256: return run_send_n<256>(n);
    default: throw rdmx::Error(rdmx::Errc::invalid_argument, "send sizes are 8, 64 and 256");
  }
}

struct Config {
  std::string tls;
  std::string placement;
  unsigned u_max;
  unsigned reps;
  std::uint32_t processes;
};

void emit(const Config& c, const char* variant, std::size_t size, const char* metric, double value, std::size_t messages,
          std::size_t ring) {
  JsonLine line;
  line.field("bench", "transfer")
      .field("variant", variant)
      .field("size", size)
      .field("metric", metric)
      .field("value", value)
      .field("tls", c.tls)
      .field("u_max", c.u_max)
      .field("processes", c.processes)
      .field("placement", c.placement)
      .field("repetitions", c.reps)
      .field("messages", messages);
  if (ring != 0) line.field("ring_slots", ring);
  line.print();
}

std::string placement_text() { return "1 sender thread per process, " + cores_text(); }

// ---- the two roles ----

void target_loop(transfer::Worker& worker) {
  // Over shared memory puts need nothing from us; over TCP UCX emulates them
  // with messages this worker must progress. Calls (phase changes, the send
  // variant) run inside rdmx::progress().
  while (g_phase != phase_stop) {
    if (g_phase == phase_rma) worker.progress();
    rdmx::progress();
  }
}

int sender(rdmx::Job& job, const Options& o, transfer::Worker& worker, transfer::Endpoint& ep, ucp_rkey_h rkey,
           std::uint64_t target_base) {
  const char* tls = std::getenv("UCX_TLS");
  Config cfg{tls != nullptr ? tls : "default", placement_text(), o.u_max, o.reps, job.size()};
  std::fprintf(stderr, "rdmx-bench-transfer: UCX_TLS=%s, u_max %u, ring %zu slots, %u repetitions (median), %s\n",
               cfg.tls.c_str(), o.u_max, o.ring, o.reps, cfg.placement.c_str());

  std::size_t max_stride = 64;
  for (std::size_t s : o.sizes) max_stride = std::max(max_stride, round_up(s, 64));
  const std::size_t ring_bytes = round_up(o.ring * max_stride, 2 * MiB);

  transfer::Transmitter tx(ep, o.u_max);
  std::optional<Raw> raw;
  if (o.raw) raw.emplace(job.context(), worker, ep, rkey, o.ring, max_stride, o.u_max);
  memory::Arena::Options arena_options;
  arena_options.backing = memory::Backing::ucx;  // the same kind of memory as raw's source ring
  arena_options.segment_size = std::max(ring_bytes, 4 * MiB);
  arena_options.max_size = 2 * arena_options.segment_size;
  memory::Arena arena(job.context(), arena_options);

  int failures = 0;
  if (o.raw || o.automatic) {
    std::fprintf(stderr, "%8s %14s %14s %10s %12s %12s %10s\n", "size", "raw msg/s", "auto msg/s", "auto/raw",
                 "raw MB/s", "auto MB/s", "messages");
    set_phase(phase_rma);
  }
  for (std::size_t size : (o.raw || o.automatic) ? o.sizes : std::vector<std::size_t>{}) {
    const Window window = window_for(target_base, size, o.ring);
    std::optional<memory::CircularAllocator> ring;
    if (o.automatic) {
      memory::CircularOptions co;
      co.unit_size = size;
      co.initial_units = o.ring;
      co.max_units = o.ring;  // the same number of source buffers as raw
      ring.emplace(arena, co);
    }
    auto run_raw = [&](std::size_t n) { return raw->run(size, n, window); };
    auto run_auto_n = [&](std::size_t n) { return run_auto(tx, *ring, rkey, size, n, window); };
    const std::size_t n = o.raw ? calibrate(run_raw, o.seconds, o.u_max) : calibrate(run_auto_n, o.seconds, o.u_max);
    if (o.raw && o.automatic) run_auto_n(std::min<std::size_t>(n, 1 << 16));  // warm auto too

    std::vector<double> raw_rate, auto_rate, ratio;
    for (unsigned rep = 0; rep < o.reps; ++rep) {
      // Alternate which variant goes first so slow drifts hit both alike.
      double tr = 0, ta = 0;
      if (rep % 2 == 0) {
        if (o.raw) tr = run_raw(n);
        if (o.automatic) ta = run_auto_n(n);
      } else {
        if (o.automatic) ta = run_auto_n(n);
        if (o.raw) tr = run_raw(n);
      }
      if (o.raw) raw_rate.push_back(static_cast<double>(n) / tr);
      if (o.automatic) auto_rate.push_back(static_cast<double>(n) / ta);
      if (o.raw && o.automatic) ratio.push_back(tr / ta);
    }
    const double raw_m = o.raw ? median(raw_rate) : 0;
    const double auto_m = o.automatic ? median(auto_rate) : 0;
    const double ratio_m = o.raw && o.automatic ? median(ratio) : 0;
    const double mb = static_cast<double>(size) / 1e6;
    if (o.raw) {
      emit(cfg, "raw", size, "msgs_per_s", raw_m, n, o.ring);
      emit(cfg, "raw", size, "MB_per_s", raw_m * mb, n, o.ring);
    }
    if (o.automatic) {
      emit(cfg, "auto", size, "msgs_per_s", auto_m, n, o.ring);
      emit(cfg, "auto", size, "MB_per_s", auto_m * mb, n, o.ring);
    }
    if (o.raw && o.automatic) emit(cfg, "auto/raw", size, "ratio", ratio_m, n, o.ring);
    std::fprintf(stderr, "%8zu %14s %14s %10.3f %12.1f %12.1f %10zu\n", size, o.raw ? human_rate(raw_m).c_str() : "-",
                 o.automatic ? human_rate(auto_m).c_str() : "-", ratio_m, raw_m * mb, auto_m * mb, n);
  }

  if (o.send) {
    set_phase(phase_send);
    std::fprintf(stderr, "%8s %14s %12s %10s   (rdmx::call, captures of this size)\n", "size", "send msg/s", "send MB/s",
                 "messages");
    std::uint64_t sent = 0;
    for (std::size_t size : o.send_sizes) {
      auto run = [&](std::size_t n) {
        sent += n;
        return run_send(size, n);
      };
      const std::size_t n = calibrate(run, o.seconds, 64);
      std::vector<double> rate;
      for (unsigned rep = 0; rep < o.reps; ++rep) rate.push_back(static_cast<double>(n) / run(n));
      const double m = median(rate);
      emit(cfg, "send", size, "msgs_per_s", m, n, 0);
      emit(cfg, "send", size, "MB_per_s", m * static_cast<double>(size) / 1e6, n, 0);
      std::fprintf(stderr, "%8zu %14s %12.1f %10zu\n", size, human_rate(m).c_str(), m * static_cast<double>(size) / 1e6, n);
    }
    // Every call ran exactly once (they run in order, so all have by now).
    rdmx::Synchronizer sync;
    std::uint64_t received = 0;
    rdmx::call_return(rdmx::ThreadId{1, 0}, [] { return g_received; }, rdmx::into(received, sync));
    sync.wait();
    if (received != sent) {
      std::fprintf(stderr, "rdmx-bench-transfer: rank 1 executed %llu calls, %llu were sent\n",
                   static_cast<unsigned long long>(received), static_cast<unsigned long long>(sent));
      ++failures;
    }
  }
  set_phase(phase_stop);
  return failures;
}

}  // namespace

int main(int argc, char** argv) {
  rdmx::Job job(argc, argv);
  int rc = 0;
  try {
    const Options o = parse(argc, argv);
    if (job.size() != 2)
      throw rdmx::Error(rdmx::Errc::invalid_argument, "rdmx-bench-transfer needs exactly 2 processes (this job has " +
                                                          std::to_string(job.size()) +
                                                          "): run it with `scripts/bench transfer` or `scripts/run -np 2`");
    transfer::Worker worker(job.context());
    std::optional<transfer::MemoryRegion> target;
    std::vector<std::byte> mine;
    put_bytes(mine, worker.address());
    if (job.rank() == 1) {
      target.emplace(job.context(), target_bytes);
      std::memset(target->data(), 0, target->size());  // fault the pages in before timing
      put_u64(mine, reinterpret_cast<std::uint64_t>(target->data()));
      put_bytes(mine, target->packed_rkey());
    }
    auto all = job.allgather(mine);
    if (job.rank() == 1) {
      target_loop(worker);
    } else {
      std::size_t at = 0;
      auto address = get_bytes(all[1], at);
      const std::uint64_t base = get_u64(all[1], at);
      auto packed = get_bytes(all[1], at);
      transfer::Endpoint ep(worker, address, "process 1 (benchmark worker)");
      transfer::RemoteKey rkey(ep, packed);
      rc = sender(job, o, worker, ep, rkey.get(), base) != 0 ? 1 : 0;
    }
    job.barrier();  // rank 0 has closed its endpoint before rank 1 drops the target
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rdmx-bench-transfer (rank %u): %s\n", job.rank(), e.what());
    std::fflush(stderr);
    std::_Exit(1);  // the peer may be waiting on us: let the launcher end the job
  }
  return rc;
}
