// rdmx-bench-firstuse: what the FIRST remote action with a large argument
// costs, against the second (warm) one, for a SerializeBuffer (ordinary
// memory: registered on the fly, pulled as a pointer chunk) and an
// RmaVector (registered arena memory), with Open MPI's first MPI_Send of
// the same bytes in the same processes. Two processes, one worker thread
// each; start it with `scripts/bench firstuse`.
//
// Per size, each rdmx call is async(sink, rank 1, argument).get() from rank
// 0, timed from the call to the reply; the data was written by the program
// beforehand (its pages exist), as real data would be. The memory is fresh
// for every size (mmap), so "first" pays for everything a program meets the
// first time: the sender's registration, the receiver's landing memory and
// its page faults, the pull. Then a SerializeBuffer over another fresh
// buffer ("other"): the sender's first use again, the receiver already warm.
// MPI: rank 0 MPI_Send, rank 1 MPI_Recv into a
// fresh buffer and a 1-byte answer, first and second time.
//
// The breakdown of the first SerializeBuffer call, measured apart on fresh
// memory of the same size:
//   register      bare ucp_mem_map of the sender's bytes (no allocation)
//   rkey_pack     ucp_rkey_pack of that registration
//   fault         first touch (memset) of fresh anonymous memory: what the
//                 receiver's landing memory costs where it is new
// The receiver's landing memory comes from its arena, which grows on first
// use and keeps its segments: whichever variant goes first at a size pays
// for that (--first=SerializeBuffer|RmaVector picks it).
// Every call also counts the receiver's page faults (getrusage, minor
// faults, asked of rank 1 just before and after): they show where fresh
// memory was touched even when the machine is too busy for stable timings.
// Flags: --sizes=1M,16M,...  --first=SerializeBuffer|RmaVector  --quick
// Output: JSON lines on stdout (rank 0), a table on stderr.
#define OMPI_SKIP_MPICXX 1
#include <mpi.h>
#include <sys/mman.h>
#include <sys/resource.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "common.hpp"
#include "json.hpp"
#include "rdmx/action/action.hpp"
#include "rdmx/core/backoff.hpp"
#include "rdmx/core/env.hpp"
#include "rdmx/fabric/job.hpp"
#include "rdmx/invoke/messenger.hpp"
#include "rdmx/serial/registration_cache.hpp"
#include "rdmx/transfer/context.hpp"

namespace {

using namespace rdmx::bench;
namespace serial = rdmx::serial;

struct Options {
  std::vector<std::size_t> sizes{1 * MiB, 16 * MiB, 256 * MiB, 1024 * MiB};
  bool rma_first = false;
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
    } else if (key == "--first" && (value == "serialize_buffer" || value == "rma_vector")) {
      o.rma_first = value == "rma_vector";
    } else if (key == "--sizes") {
      o.sizes.clear();
      for (const std::string& s : split(value)) o.sizes.push_back(rdmx::env::parse_size(s, "--sizes"));
    } else {
      throw rdmx::Error(rdmx::Errc::invalid_argument,
                        "unknown argument '" + arg + "'\nusage: rdmx-bench-firstuse [--sizes=1M,16M,256M,1G] [--first=SerializeBuffer|RmaVector] [--quick]");
    }
  }
  if (o.quick) o.sizes = {1 * MiB, 16 * MiB};
  if (o.sizes.empty()) throw rdmx::Error(rdmx::Errc::invalid_argument, "--sizes: no size");
  return o;
}

// Fresh anonymous memory, unmapped when dropped (the registration cache hears of it).
class Fresh {
 public:
  explicit Fresh(std::size_t n) : n_(n) {
    void* p = mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw rdmx::Error(rdmx::Errc::out_of_memory, "mmap of " + std::to_string(n) + " bytes");
    p_ = static_cast<char*>(p);
  }
  ~Fresh() { munmap(p_, n_); }
  Fresh(const Fresh&) = delete;
  Fresh& operator=(const Fresh&) = delete;
  char* data() const noexcept { return p_; }

 private:
  char* p_ = nullptr;
  std::size_t n_ = 0;
};

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// ---- actions ----

// Reads one byte per page: the argument is there, and nothing is copied.
std::uint64_t sink_buffer(serial::SerializeBuffer<char> b) {
  std::uint64_t sum = 0;
  for (std::size_t i = 0; i < b.size(); i += 4096) sum += static_cast<unsigned char>(b[i]);
  return sum;
}
std::uint64_t sink_rma(serial::RmaVector<char> v) {
  std::uint64_t sum = 0;
  for (std::size_t i = 0; i < v.size(); i += 4096) sum += static_cast<unsigned char>(v[i]);
  return sum;
}
std::atomic<bool> stop_serving{false};
void stop() { stop_serving = true; }

// Rank 1 serves until rank 0 sends stop.
void serve() {
  rdmx::Backoff backoff;
  while (!stop_serving.load()) backoff(rdmx::progress() != 0);
  stop_serving = false;
}

// The receiver's page faults so far (minor: fresh memory touched).
std::uint64_t faults() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<std::uint64_t>(usage.ru_minflt);
}

struct Call {
  double seconds = 0;
  std::uint64_t receiver_faults = 0;  // the receiver's page faults during the call: robust where timings are noisy
};
struct Times {
  Call first, second;
  Call other;  // SerializeBuffer: a call with another fresh buffer, the receiver warm
};

// One call of `f` from rank 0: its wall time, and the faults rank 1 took meanwhile.
template <class F>
Call timed(F&& f) {
  const std::uint64_t before = rdmx::async(rdmx::action<&faults>, {1, 0}).get();
  const auto t0 = Clock::now();
  f();
  Call c;
  c.seconds = seconds_since(t0);
  c.receiver_faults = rdmx::async(rdmx::action<&faults>, {1, 0}).get() - before;
  return c;
}

// Rank 0: the first and the second action on fresh data of `size` bytes.
Times time_calls(std::size_t size, bool rma, serial::RmaMemory& memory, double& make_seconds) {
  Times t;
  const std::uint64_t expected = (size + 4095) / 4096 * static_cast<std::uint64_t>('x');
  auto check = [&](std::uint64_t sum) {
    if (sum != expected) throw rdmx::Error(rdmx::Errc::bad_archive, "the argument arrived damaged");
  };
  if (rma) {
    auto t0 = Clock::now();
    serial::RmaVector<char> v(size, 'x', &memory);
    make_seconds = seconds_since(t0);
    t.first = timed([&] { check(rdmx::async(rdmx::action<&sink_rma>, {1, 0}, v).get()); });
    t.second = timed([&] { check(rdmx::async(rdmx::action<&sink_rma>, {1, 0}, v).get()); });
  } else {
    Fresh data(size);
    auto t0 = Clock::now();
    std::memset(data.data(), 'x', size);
    make_seconds = seconds_since(t0);
    auto buffer = serial::SerializeBuffer<char>::reference(data.data(), size);
    t.first = timed([&] { check(rdmx::async(rdmx::action<&sink_buffer>, {1, 0}, buffer).get()); });
    t.second = timed([&] { check(rdmx::async(rdmx::action<&sink_buffer>, {1, 0}, buffer).get()); });
    Fresh more(size);
    std::memset(more.data(), 'x', size);
    auto other = serial::SerializeBuffer<char>::reference(more.data(), size);
    t.other = timed([&] { check(rdmx::async(rdmx::action<&sink_buffer>, {1, 0}, other).get()); });
  }
  return t;
}

struct MpiTimes {
  double first = 0, second = 0;
};
MpiTimes mpi_calls(std::size_t size, int rank) {
  MpiTimes t;
  Fresh out(size), in(size);
  if (rank == 0) std::memset(out.data(), 'x', size);
  char ack = 0;
  MPI_Barrier(MPI_COMM_WORLD);
  for (double* slot : {&t.first, &t.second}) {
    const auto t0 = Clock::now();
    if (rank == 0) {
      MPI_Send(out.data(), static_cast<int>(size), MPI_CHAR, 1, 30, MPI_COMM_WORLD);
      MPI_Recv(&ack, 1, MPI_CHAR, 1, 31, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    } else {
      MPI_Recv(in.data(), static_cast<int>(size), MPI_CHAR, 0, 30, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      MPI_Send(&ack, 1, MPI_CHAR, 0, 31, MPI_COMM_WORLD);
    }
    *slot = seconds_since(t0);
  }
  return t;
}

struct Breakdown {
  double register_s = 0, rkey_pack_s = 0, fault_s = 0;
};

// Rank 0: registration and rkey pack of written fresh memory. Rank 1: the
// first touch of fresh memory.
Breakdown breakdown(rdmx::Job& job, std::size_t size) {
  Breakdown b;
  if (job.rank() == 0) {
    Fresh data(size);
    std::memset(data.data(), 'x', size);
    ucp_mem_map_params_t params{};
    params.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH;
    params.address = data.data();
    params.length = size;
    ucp_mem_h handle = nullptr;
    auto t0 = Clock::now();
    if (ucp_mem_map(job.context().get(), &params, &handle) != UCS_OK)
      throw rdmx::Error(rdmx::Errc::transport, "ucp_mem_map");
    b.register_s = seconds_since(t0);
    void* packed = nullptr;
    std::size_t length = 0;
    t0 = Clock::now();
    if (ucp_rkey_pack(job.context().get(), handle, &packed, &length) != UCS_OK)
      throw rdmx::Error(rdmx::Errc::transport, "ucp_rkey_pack");
    b.rkey_pack_s = seconds_since(t0);
    ucp_rkey_buffer_release(packed);
    ucp_mem_unmap(job.context().get(), handle);
  } else {
    Fresh landing(size);
    const auto t0 = Clock::now();
    std::memset(landing.data(), 0, size);
    b.fault_s = seconds_since(t0);
  }
  double mine[3] = {b.register_s, b.rkey_pack_s, b.fault_s}, most[3];
  MPI_Allreduce(mine, most, 3, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return {most[0], most[1], most[2]};
}

void emit(const JsonLine& common, const char* variant, std::size_t size, const char* metric, double value) {
  common.with("variant", variant).field("size", size).field("metric", metric).field("value", value).print();
}
void emit(const JsonLine& common, const char* variant, std::size_t size, const Call& c) {
  common.with("variant", variant)
      .field("size", size)
      .field("metric", "s")
      .field("value", c.seconds)
      .field("receiver_faults", c.receiver_faults)
      .print();
}

int run(rdmx::Job& job, const Options& o, const std::string& pml) {
  if (job.size() != 2)
    throw rdmx::Error(rdmx::Errc::invalid_argument, "rdmx-bench-firstuse needs exactly 2 processes: run it with `scripts/bench firstuse`");
  const char* tls = std::getenv("UCX_TLS");
  const bool root = job.rank() == 0;
  int rank = static_cast<int>(job.rank());
  JsonLine cfg;
  cfg.field("bench", "firstuse");
  cfg.field("tls", tls != nullptr ? tls : "default");
  cfg.field("mpi_pml", pml);
  cfg.field("processes", 2);
  cfg.field("reg_cache_bytes", serial::RegistrationCacheOptions::env_budget());
  cfg.field("first", o.rma_first ? "rma_vector" : "serialize_buffer");
  cfg.field("placement", "rank 0 thread 0 calls rank 1 thread 0; " + cores_text());
  serial::RmaMemory memory(job.arena());
  if (root) {
    std::fprintf(stderr, "rdmx-bench-firstuse: UCX_TLS=%s, Open MPI pml %s, registration budget %zu MiB\n",
                 tls != nullptr ? tls : "default", pml.c_str(), serial::RegistrationCacheOptions::env_budget() >> 20);
    std::fprintf(stderr, "%6s %8s %8s %8s %8s %8s %8s %8s | %8s %8s %8s | %7s %7s %7s %7s (seconds | receiver page faults)\n", "MiB", "sbuf 1st",
                 "sbuf 2nd", "sbuf new", "rma 1st", "rma 2nd", "mpi 1st", "mpi 2nd", "register", "rkeypack", "fault",
                 "pf sb1", "pf sb2", "pf sbnew", "pf rma1");
  }
  // Endpoints, messengers and MPI's connections are made by a small call
  // first: they are not what this measures.
  {
    job.barrier();
    job.run([&](rdmx::ThreadId me) {
      if (me.process == 0) {
        double ignored = 0;
        time_calls(64 * 1024, false, memory, ignored);
        time_calls(64 * 1024, true, memory, ignored);
        rdmx::async(rdmx::action<&stop>, {1, 0}).get();
      } else {
        serve();
      }
    });
    mpi_calls(64 * 1024, rank);
  }
  for (std::size_t size : o.sizes) {
    Times sbuf, rma;
    double write_s = 0, make_rma_s = 0;
    std::string sbuf_error, rma_error;  // a variant that failed at this size (e.g. a limit), reported
    auto attempt = [&](bool is_rma) {
      try {
        (is_rma ? rma : sbuf) = time_calls(size, is_rma, memory, is_rma ? make_rma_s : write_s);
      } catch (const rdmx::Error& e) {
        (is_rma ? rma_error : sbuf_error) = e.what();
      }
    };
    job.barrier();
    job.run([&](rdmx::ThreadId me) {
      if (me.process == 0) {
        attempt(o.rma_first);
        attempt(!o.rma_first);
        rdmx::async(rdmx::action<&stop>, {1, 0}).get();
      } else {
        serve();
      }
    });
    job.barrier();
    const MpiTimes mpi = mpi_calls(size, rank);
    const Breakdown b = breakdown(job, size);
    if (!root) continue;
    for (const auto& [variant, error] : {std::pair{"serialize_buffer", &sbuf_error}, std::pair{"rma_vector", &rma_error}})
      if (!error->empty()) {
        std::fprintf(stderr, "%6zu %s failed: %s\n", size >> 20, variant, error->c_str());
        cfg.with("variant", std::string(variant) + "-error").field("size", size).field("metric", *error).print();
      }
    if (sbuf_error.empty()) {
      emit(cfg, "serialize_buffer-first", size, sbuf.first);
      emit(cfg, "serialize_buffer-second", size, sbuf.second);
      emit(cfg, "serialize_buffer-other", size, sbuf.other);
    }
    if (rma_error.empty()) {
      emit(cfg, "rma_vector-first", size, rma.first);
      emit(cfg, "rma_vector-second", size, rma.second);
      emit(cfg, "rma_vector-make", size, "s", make_rma_s);
    }
    emit(cfg, "mpi-first", size, "s", mpi.first);
    emit(cfg, "mpi-second", size, "s", mpi.second);
    emit(cfg, "ucp_mem_map", size, "s", b.register_s);
    emit(cfg, "ucp_rkey_pack", size, "s", b.rkey_pack_s);
    emit(cfg, "first-touch", size, "s", b.fault_s);
    const double nan = std::numeric_limits<double>::quiet_NaN();
    auto or_nan = [&](const std::string& error, const Call& c) { return error.empty() ? c.seconds : nan; };
    auto faults_or_0 = [&](const std::string& error, const Call& c) { return error.empty() ? c.receiver_faults : 0; };
    std::fprintf(stderr, "%6zu %8.4f %8.4f %8.4f %8.4f %8.4f %8.4f %8.4f | %8.4f %8.4f %8.4f | %7lu %7lu %7lu %7lu\n", size >> 20,
                 or_nan(sbuf_error, sbuf.first), or_nan(sbuf_error, sbuf.second), or_nan(sbuf_error, sbuf.other),
                 or_nan(rma_error, rma.first), or_nan(rma_error, rma.second), mpi.first, mpi.second, b.register_s,
                 b.rkey_pack_s, b.fault_s, static_cast<unsigned long>(faults_or_0(sbuf_error, sbuf.first)),
                 static_cast<unsigned long>(faults_or_0(sbuf_error, sbuf.second)),
                 static_cast<unsigned long>(faults_or_0(sbuf_error, sbuf.other)),
                 static_cast<unsigned long>(faults_or_0(rma_error, rma.first)));
  }
  if (job.rank() == 1) std::fprintf(stderr, "receiver: %s\n", job.describe().c_str());
  job.barrier();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  rdmx::JobOptions job_options;
  job_options.threads = 1;
  rdmx::Job job(argc, argv, job_options);
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
    std::fprintf(stderr, "rdmx-bench-firstuse, process %u: %s\n", job.rank(), e.what());
    std::fflush(stderr);
    std::_Exit(1);
  }
}
