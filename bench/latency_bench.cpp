// rdmx-bench-latency: the small-message round trip of rdmx's two ways of
// calling another process, next to Open MPI's ping-pong measured in the same
// processes. Two processes; rank 0's main thread calls, rank 1's main thread
// answers. Start it with `scripts/bench latency` (shared memory or TCP on one
// host) or `scripts/bench hosts` (TCP between two namespace hosts).
//
// Variants, each a round trip that carries `size` bytes both ways:
//   async  rdmx::async(echo, {1, 0}, SerializeBuffer<char>) returning its
//          argument, waited for with get(): an eager parcel each way (the
//          sizes here are below the zero-copy threshold)
//   async_one_sided, async_send  the same with the path chosen per call
//          (rdmx::parcel::Path): the one-sided ring or a UCX active message
//          whatever the transport; `async` takes the automatic path, which
//          these two measure the choice of
//   call   the send-based call: rdmx::call_return of a lambda whose captures
//          hold the bytes and that returns them (std::array<std::byte, size>)
//   mpi    MPI_Send + MPI_Recv of `size` bytes each way (blocking ping-pong)
//   ucx    the raw transport: a UCX active message of `size` bytes that the
//          other side's handler sends back, between UCX workers of the
//          benchmark's own (what rdmx's send-based call is built on, with
//          nothing of rdmx around it)
//   put    the raw one-sided floor: `size` bytes and then a sequence word
//          written into the other side's UCX-mapped memory, which polls the
//          word, copies the bytes out and writes them back the same way.
//          Over shared memory the writes are plain stores through
//          ucp_rkey_ptr, as rdmx's one-sided messenger makes them (the
//          transport under `async` there); elsewhere ucp_put_nbx, a fence
//          and a put of the word. Nothing of rdmx around it.
//   idle_poll  not a round trip: the nanoseconds of one rdmx::progress()
//          with nothing to do once every variant has run (metric "ns"), the
//          delay a waiting side adds before it sees an answer
//   self_async, self_call, self_one_sided  not between processes: a 1 B
//          round trip of rank 0's thread to itself by async, call_return
//          and the one-sided messenger's call_return (metric "ns"), the
//          software of both ends with no second core involved
// Sizes: 1, 8, 64, 256, 1024 bytes. Each repetition times `--iterations`
// round trips one by one, after a warm-up, for every size and variant in
// turn (so that a noisy moment of the machine spreads over all of them).
// Value: the median round trip in microseconds over every repetition; also
// p99, the spread of the repetitions' medians, and `vs_mpi`: value over the
// MPI median of this same run. scripts/bench latency runs once per Open MPI
// pml (ob1, ucx) and adds `ratio`: value over the faster pml's median.
//
// Flags: --reps=N --iterations=N --sizes=1,8,64,256,1024
//        --variants=async,async_one_sided,async_send,call,mpi,ucx,put
//        --quick
// Environment: RDMX_BENCH_HOSTS, the number of hosts the job spans (the
// `hosts` field; scripts/bench sets it).
// Output: JSON lines on stdout (rank 0), a table on stderr.
#define OMPI_SKIP_MPICXX 1
#include <mpi.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common.hpp"
#include "json.hpp"
#include "rdmx/action/action.hpp"
#include "rdmx/core/backoff.hpp"
#include "rdmx/core/env.hpp"
#include "rdmx/fabric/call.hpp"
#include "rdmx/fabric/job.hpp"
#include "rdmx/invoke/messenger.hpp"

namespace {

using namespace rdmx::bench;
namespace serial = rdmx::serial;

constexpr std::array<std::size_t, 5> all_sizes{1, 8, 64, 256, 1024};
const std::vector<std::string> all_variants{"async", "async_one_sided", "async_send", "call", "mpi", "ucx", "put"};

struct Options {
  unsigned reps = 5;
  unsigned iterations = 2000;
  bool quick = false;
  std::vector<std::size_t> sizes{all_sizes.begin(), all_sizes.end()};
  std::vector<std::string> variants = all_variants;
};

[[noreturn]] void usage_error(const std::string& what) {
  throw rdmx::Error(rdmx::Errc::invalid_argument,
                    what + "\nusage: rdmx-bench-latency [--reps=N] [--iterations=N] [--sizes=1,8,...] "
                           "[--variants=async,async_one_sided,async_send,call,mpi,ucx,put] [--quick]");
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--quick")
      o.quick = true;
    else if (a.rfind("--reps=", 0) == 0)
      o.reps = static_cast<unsigned>(rdmx::env::parse_count(a.substr(7), "--reps"));
    else if (a.rfind("--iterations=", 0) == 0)
      o.iterations = static_cast<unsigned>(rdmx::env::parse_count(a.substr(13), "--iterations"));
    else if (a.rfind("--sizes=", 0) == 0) {
      o.sizes.clear();
      for (const std::string& t : split(a.substr(8))) {
        const std::size_t size = rdmx::env::parse_count(t, "--sizes");
        if (std::find(all_sizes.begin(), all_sizes.end(), size) == all_sizes.end())
          usage_error("--sizes: " + t + " is not one of 1, 8, 64, 256, 1024");
        o.sizes.push_back(size);
      }
    } else if (a.rfind("--variants=", 0) == 0) {
      o.variants = split(a.substr(11));
      for (const std::string& v : o.variants)
        if (std::find(all_variants.begin(), all_variants.end(), v) == all_variants.end())
          usage_error("--variants: '" + v + "' is not async, async_one_sided, async_send, call, mpi, ucx or put");
    }
    else
      usage_error("unknown argument '" + a + "'");
  }
  if (o.quick) {
    o.reps = std::min(o.reps, 2u);
    o.iterations = std::min(o.iterations, 50u);
  }
  if (o.reps == 0) usage_error("--reps must be at least 1");
  if (o.iterations == 0) usage_error("--iterations must be at least 1");
  if (o.sizes.empty() || o.variants.empty()) usage_error("--sizes and --variants need at least one entry");
  return o;
}

// ---- rank 1: answers rdmx calls, or runs its half of an MPI ping-pong ----

serial::SerializeBuffer<char> echo(serial::SerializeBuffer<char> b) { return b; }

enum Phase : int { phase_rdmx, phase_mpi, phase_ucx, phase_put, phase_stop };
std::atomic<int> g_phase{phase_rdmx};
std::size_t g_mpi_size = 0, g_mpi_rounds = 0;

void mpi_pingpong(int rank, std::vector<char>& buffer, std::size_t size, std::size_t rounds, std::vector<double>* times) {
  const int n = static_cast<int>(size);
  for (std::size_t i = 0; i < rounds; ++i) {
    const auto t0 = Clock::now();
    if (rank == 0) {
      MPI_Send(buffer.data(), n, MPI_CHAR, 1, 7, MPI_COMM_WORLD);
      MPI_Recv(buffer.data(), n, MPI_CHAR, 1, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    } else {
      MPI_Recv(buffer.data(), n, MPI_CHAR, 0, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      MPI_Send(buffer.data(), n, MPI_CHAR, 0, 7, MPI_COMM_WORLD);
    }
    if (times != nullptr) times->push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
  }
}

// The raw-UCX variant's own workers, one endpoint between them.
struct RawUcx {
  rdmx::transfer::Worker worker;
  std::optional<rdmx::transfer::Endpoint> ep;
  AmPeer peer;
  explicit RawUcx(rdmx::Job& job) : worker(job.context()) {
    std::vector<std::byte> mine;
    put_bytes(mine, worker.address());
    const auto all = job.allgather(mine);
    std::size_t at = 0;
    ep.emplace(worker, get_bytes(all[1 - job.rank()], at), "benchmark peer");
    if (job.rank() == 1) {
      peer.back = ep->get();
      set_am_handler(worker, am_ping, &on_ping, &peer);
    } else {
      set_am_handler(worker, am_pong, &on_pong, &peer);
    }
  }
};

// The `put` variant's mailboxes: each side's is written by the other. The
// sequence word has a cache line of its own and the bytes follow it, as a
// chunk's header word and its records in the one-sided messenger.
struct RawPut {
  static constexpr std::size_t data_at = 64;
  rdmx::transfer::MemoryRegion box;  // mine: the peer writes here
  rdmx::transfer::RemoteKey peer_key;
  std::uint64_t peer_address = 0;
  std::byte* peer_mapped = nullptr;  // the peer's box as plain memory (shared memory), else null
  std::uint64_t seq = 0;             // the last word written and read by this side (they alternate)
  // What a put of the word reads, possibly after ucp_put_nbx returned: not
  // `seq`, which receive() moves on meanwhile. Written again only once the
  // peer has answered, so after UCX has read it.
  std::uint64_t sent_word = 0;

  RawPut(rdmx::Job& job, RawUcx& raw) : box(job.context(), data_at + all_sizes.back()) {
    std::memset(box.data(), 0, box.size());
    std::vector<std::byte> mine;
    put_u64(mine, reinterpret_cast<std::uintptr_t>(box.data()));
    put_bytes(mine, box.packed_rkey());
    const auto all = job.allgather(mine);
    std::size_t at = 0;
    peer_address = get_u64(all[1 - job.rank()], at);
    peer_key = rdmx::transfer::RemoteKey(*raw.ep, get_bytes(all[1 - job.rank()], at));
    void* mapped = nullptr;
    if (ucp_rkey_ptr(peer_key.get(), peer_address, &mapped) == UCS_OK) peer_mapped = static_cast<std::byte*>(mapped);
  }
  std::uint64_t word() const {
    return std::atomic_ref<std::uint64_t>(*reinterpret_cast<std::uint64_t*>(box.data())).load(std::memory_order_acquire);
  }
  void put(RawUcx& raw, const void* from, std::size_t n, std::uint64_t offset) {
    const ucp_request_param_t param{};
    void* r = ucp_put_nbx(raw.ep->get(), from, n, peer_address + offset, peer_key.get(), &param);
    if (UCS_PTR_IS_ERR(r)) throw rdmx::Error(rdmx::Errc::transport, "raw put failed");
    if (UCS_PTR_IS_PTR(r)) ucp_request_free(r);  // released by UCX once complete
  }
  // Writes `bytes` and then the next sequence word into the peer's box.
  void send(RawUcx& raw, std::span<const std::byte> bytes) {
    ++seq;
    if (peer_mapped != nullptr) {
      std::memcpy(peer_mapped + data_at, bytes.data(), bytes.size());
      std::atomic_ref<std::uint64_t>(*reinterpret_cast<std::uint64_t*>(peer_mapped)).store(seq, std::memory_order_release);
      return;
    }
    put(raw, bytes.data(), bytes.size(), data_at);
    if (ucp_worker_fence(raw.worker.get()) != UCS_OK) throw rdmx::Error(rdmx::Errc::transport, "raw fence failed");
    sent_word = seq;
    put(raw, &sent_word, sizeof sent_word, 0);
    ucp_worker_progress(raw.worker.get());
  }
  // Waits for the peer's next word and copies its bytes to `to`.
  void receive(RawUcx& raw, std::span<std::byte> to) {
    ++seq;
    while (word() != seq) ucp_worker_progress(raw.worker.get());  // puts over TCP land through this worker
    std::memcpy(to.data(), box.data() + data_at, to.size());
  }
};

void answer(RawUcx& raw, RawPut& put) {
  std::vector<char> buffer(all_sizes.back());
  while (g_phase.load() != phase_stop) {
    if (g_phase.load() == phase_mpi) {
      mpi_pingpong(1, buffer, g_mpi_size, g_mpi_rounds, nullptr);
      g_phase = phase_rdmx;
    } else if (g_phase.load() == phase_ucx) {
      // Only the raw worker, as a UCX program would: rdmx is not polled
      // until every ping of the phase has been answered.
      const std::uint64_t until = raw.peer.pings + g_mpi_rounds;
      while (raw.peer.pings < until) raw.worker.progress();
      g_phase = phase_rdmx;
    } else if (g_phase.load() == phase_put) {
      const std::span<std::byte> bytes{reinterpret_cast<std::byte*>(buffer.data()), g_mpi_size};
      for (std::size_t i = 0; i < g_mpi_rounds; ++i) {
        put.receive(raw, bytes);
        put.send(raw, bytes);
      }
      g_phase = phase_rdmx;
    } else {
      rdmx::progress();
    }
  }
}

// Rank 0: rank 1 runs `phase` once it has answered this call.
void set_phase(int phase, std::size_t size = 0, std::size_t rounds = 0) {
  rdmx::Synchronizer sync;
  rdmx::call(rdmx::ThreadId{1, 0}, [=] {
    g_mpi_size = size;
    g_mpi_rounds = rounds;
    g_phase = phase;
  }, rdmx::when_run(sync));
  sync.wait();
}

// ---- rank 0: the round trips ----

std::uint64_t g_sink = 0;

void time_async(rdmx::parcel::Path path, std::vector<char>& bytes, std::size_t size, std::size_t rounds,
                std::vector<double>* times) {
  for (std::size_t i = 0; i < rounds; ++i) {
    const auto t0 = Clock::now();
    auto back = rdmx::async(path, rdmx::action<&echo>, {1, 0}, serial::SerializeBuffer<char>::reference(bytes.data(), size)).get();
    if (times != nullptr) times->push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
    if (back.size() != size) throw rdmx::Error(rdmx::Errc::protocol, "async echo returned " + std::to_string(back.size()) + " bytes");
    g_sink += static_cast<unsigned char>(back[size - 1]);
  }
}

template <std::size_t N>
void time_call(std::size_t rounds, std::vector<double>* times) {
  std::array<std::byte, N> bytes;
  bytes.fill(std::byte{1});
  std::array<std::byte, N> back;
  for (std::size_t i = 0; i < rounds; ++i) {
    bytes[0] = static_cast<std::byte>(i);
    const auto t0 = Clock::now();
    rdmx::Synchronizer sync;
    rdmx::call_return(rdmx::ThreadId{1, 0}, [bytes] { return bytes; }, rdmx::into(back, sync));
    sync.wait();
    if (times != nullptr) times->push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
    if (back[0] != bytes[0]) throw rdmx::Error(rdmx::Errc::protocol, "call_return brought back other bytes");
  }
}

void time_ucx(RawUcx& raw, std::span<const std::byte> payload, std::size_t rounds, std::vector<double>* times) {
  for (std::size_t i = 0; i < rounds; ++i) {
    const auto t0 = Clock::now();
    am_round_trip(raw.worker, *raw.ep, raw.peer, payload);
    if (times != nullptr) times->push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
  }
}

void time_put(RawUcx& raw, RawPut& put, std::vector<char>& buffer, std::size_t size, std::size_t rounds,
              std::vector<double>* times) {
  const std::span<std::byte> bytes{reinterpret_cast<std::byte*>(buffer.data()), size};
  for (std::size_t i = 0; i < rounds; ++i) {
    const auto t0 = Clock::now();
    put.send(raw, bytes);
    put.receive(raw, bytes);
    if (times != nullptr) times->push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
  }
}

void time_call(std::size_t size, std::size_t rounds, std::vector<double>* times) {
  switch (size) {
    case 1: return time_call<1>(rounds, times);
    case 8: return time_call<8>(rounds, times);
    case 64: return time_call<64>(rounds, times);
    case 256: return time_call<256>(rounds, times);
    default: return time_call<1024>(rounds, times);
  }
}

double percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  const auto at = static_cast<std::size_t>(p * static_cast<double>(v.size() - 1) + 0.5);
  return v[std::min(at, v.size() - 1)];
}

struct Series {
  std::vector<double> all;          // every round trip
  std::vector<double> rep_medians;  // one per repetition
};

int caller(const Options& o, const std::string& pml, RawUcx& raw, RawPut& put) {
  const char* tls_env = std::getenv("UCX_TLS");
  const std::string tls = tls_env != nullptr ? tls_env : "default";
  // A setting of scripts/bench, not of rdmx's (so not read through rdmx::env).
  const char* hosts_env = std::getenv("RDMX_BENCH_HOSTS");
  const std::size_t hosts = hosts_env != nullptr && *hosts_env != '\0' ? rdmx::env::parse_count(hosts_env, "RDMX_BENCH_HOSTS") : 1;
  std::fprintf(stderr, "rdmx-bench-latency: UCX_TLS=%s, Open MPI pml %s, %zu host(s), %u x %u round trips (median)\n",
               tls.c_str(), pml.c_str(), hosts, o.reps, o.iterations);
  std::vector<char> bytes(all_sizes.back(), 'x');
  const std::size_t warm = std::max<std::size_t>(10, o.iterations / 10);
  std::map<std::pair<std::string, std::size_t>, Series> results;
  for (unsigned rep = 0; rep < o.reps; ++rep) {
    for (std::size_t size : o.sizes) {
      for (const std::string& variant : o.variants) {
        std::vector<double> t;
        t.reserve(o.iterations);
        if (variant.starts_with("async")) {
          const rdmx::parcel::Path path = variant == "async_send"        ? rdmx::parcel::Path::send
                                          : variant == "async_one_sided" ? rdmx::parcel::Path::one_sided
                                                                         : rdmx::parcel::Path::automatic;
          time_async(path, bytes, size, warm, nullptr);
          time_async(path, bytes, size, o.iterations, &t);
        } else if (variant == "call") {
          time_call(size, warm, nullptr);
          time_call(size, o.iterations, &t);
        } else if (variant == "ucx") {
          const std::vector<std::byte> payload(size, std::byte{1});
          set_phase(phase_ucx, size, warm + o.iterations);
          time_ucx(raw, payload, warm, nullptr);
          time_ucx(raw, payload, o.iterations, &t);
          set_phase(phase_rdmx);  // sent once rank 1 has answered every ping: it polls rdmx again
        } else if (variant == "put") {
          set_phase(phase_put, size, warm + o.iterations);
          time_put(raw, put, bytes, size, warm, nullptr);
          time_put(raw, put, bytes, size, o.iterations, &t);
          set_phase(phase_rdmx);
        } else {
          set_phase(phase_mpi, size, warm + o.iterations);
          mpi_pingpong(0, bytes, size, warm, nullptr);
          mpi_pingpong(0, bytes, size, o.iterations, &t);
          set_phase(phase_rdmx);  // rank 1 answers rdmx again once its MPI half is done
        }
        Series& s = results[{variant, size}];
        s.rep_medians.push_back(median(t));
        s.all.insert(s.all.end(), t.begin(), t.end());
      }
    }
  }
  // The cost of one poll with nothing to do, now that every path above has
  // been used (each used layer is polled on every call): a waiting caller
  // sees its answer up to one such poll late, on each side.
  double idle_ns = 0;
  {
    constexpr std::size_t polls = 200000;
    std::vector<double> per_rep;
    for (unsigned rep = 0; rep < std::max(3u, o.reps); ++rep) {
      const auto t0 = Clock::now();
      for (std::size_t i = 0; i < polls; ++i) rdmx::progress();
      per_rep.push_back(std::chrono::duration<double, std::nano>(Clock::now() - t0).count() / polls);
    }
    idle_ns = *std::min_element(per_rep.begin(), per_rep.end());
  }
  // Round trips to this very thread: the software of both ends on one core,
  // no second core and no cache line crossing between cores.
  std::map<std::string, double> self_ns;
  {
    const rdmx::ThreadId me{0, 0};
    constexpr std::size_t rounds = 20000;
    auto best = [&](auto&& round_trip) {
      for (std::size_t i = 0; i < rounds / 10; ++i) round_trip(i);  // warm
      double least = 1e300;
      for (unsigned rep = 0; rep < std::max(3u, o.reps); ++rep) {
        const auto t0 = Clock::now();
        for (std::size_t i = 0; i < rounds; ++i) round_trip(i);
        least = std::min(least, std::chrono::duration<double, std::nano>(Clock::now() - t0).count() / rounds);
      }
      return least;
    };
    self_ns["self_async"] = best([&](std::size_t) {
      auto back = rdmx::async(rdmx::action<&echo>, me, serial::SerializeBuffer<char>::reference(bytes.data(), 1)).get();
      g_sink += back.size();
    });
    self_ns["self_call"] = best([&](std::size_t i) {
      const std::array<std::byte, 1> b{static_cast<std::byte>(i)};
      std::array<std::byte, 1> back{};
      rdmx::Synchronizer sync;
      rdmx::call_return(me, [b] { return b; }, rdmx::into(back, sync));
      sync.wait();
      g_sink += std::to_integer<unsigned>(back[0]);
    });
    self_ns["self_one_sided"] = best([&](std::size_t i) {
      const std::array<std::byte, 1> b{static_cast<std::byte>(i)};
      std::array<std::byte, 1> back{};
      rdmx::Synchronizer sync;
      rdmx::MessengerGlobal().call_return(me, [b] { return b; }, rdmx::into(back, sync));
      sync.wait();
      g_sink += std::to_integer<unsigned>(back[0]);
    });
  }
  set_phase(phase_stop);

  JsonLine common;
  common.field("bench", "latency")
      .field("tls", tls)
      .field("mpi_pml", pml)
      .field("hosts", hosts)
      .field("processes", 2)
      .field("placement", "rank 0's main thread calls, rank 1's main thread answers; " + cores_text())
      .field("payload", "size bytes each way")
      .field("idle_spins", static_cast<std::size_t>(rdmx::Backoff::idle_spins()))
      .field("progress", rdmx::to_string(rdmx::Backoff::mode()));
  for (std::size_t size : o.sizes) {
    const auto mpi_series = results.find({"mpi", size});
    const double mpi = mpi_series != results.end() ? median(mpi_series->second.all) : std::nan("");
    std::string row;
    for (const std::string& variant : o.variants) {
      const Series& s = results[{variant, size}];
      const double value = median(s.all);
      JsonLine line = common.with("variant", variant);
      line.field("size", size).field("metric", "us").field("value", value).field("p99", percentile(s.all, 0.99));
      line.field("rep_min", *std::min_element(s.rep_medians.begin(), s.rep_medians.end()));
      line.field("rep_max", *std::max_element(s.rep_medians.begin(), s.rep_medians.end()));
      if (mpi_series != results.end()) line.field("vs_mpi", value / mpi);
      line.field("repetitions", o.reps).field("round_trips", s.all.size());
      line.print();
      char cell[64];
      std::snprintf(cell, sizeof cell, "  %s %.2f us (%.2f x mpi)", variant.c_str(), value, value / mpi);
      row += cell;
    }
    std::fprintf(stderr, "%6zu B:%s\n", size, row.c_str());
  }
  common.with("variant", "idle_poll").field("metric", "ns").field("value", idle_ns).print();
  std::fprintf(stderr, "  idle poll: %.1f ns (one rdmx::progress() with nothing to do, best of the repetitions)\n", idle_ns);
  for (const auto& [variant, ns] : self_ns) {
    common.with("variant", variant).field("size", 1).field("metric", "ns").field("value", ns).print();
    std::fprintf(stderr, "  %s: %.1f ns (a 1 B round trip to the calling thread itself, best of the repetitions)\n",
                 variant.c_str(), ns);
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
      throw rdmx::Error(rdmx::Errc::invalid_argument,
                        "rdmx-bench-latency needs exactly 2 processes: run it with `scripts/bench latency`");
    const std::string pml = rdmx::bench::mpi_pml();
    RawUcx raw(job);
    RawPut put(job, raw);
    if (job.rank() == 1)
      answer(raw, put);
    else
      rc = caller(o, pml, raw, put);
    job.barrier();
  } catch (const std::exception& e) {
    // The other process would wait for this one forever: leave at once.
    std::fprintf(stderr, "rdmx-bench-latency (rank %u): %s\n", job.rank(), e.what());
    std::fflush(stderr);
    std::_Exit(1);
  }
  MPI_Finalize();
  return rc;
}
