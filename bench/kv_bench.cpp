// rdmx-bench-kv: a sharded key-value store served by request/response, the
// way a user's first rdmx program looks, next to the same-shaped Open MPI
// program in the same processes. Start it with `scripts/bench kv`.
//
// The first half of the processes are clients, the second half servers; each
// server holds one shard of the store (an open-addressing table of 64-bit
// keys and values). A client picks random keys, finds the owning server
// (hash modulo servers) and issues `window` requests at a time, waiting for
// all of them before the next batch (OSU's message-rate shape):
//   get  returns the key's value;  put  stores a value and is acknowledged.
// The same program is written with each rdmx call kind:
//   send       rdmx::call_return / rdmx::call with when_run (UCX active messages)
//   one_sided  MessengerGlobal::call_return / call with when_run (RDMA writes into rings)
//   async      rdmx::async of an action, a Future per request
// and with MPI: MPI_Isend of the request, MPI_Irecv of the reply; servers
// loop on MPI_Recv(MPI_ANY_SOURCE) and answer with MPI_Send.
// Every value a get returns is checked (values are a function of the key,
// and puts store the same function), so nothing here is a no-op.
//
// Flags: --time=SECONDS (per measurement, default 0.5)  --reps=N (default 3)
//        --quick  --windows=1,64
// Output: JSON lines on stdout (rank 0), a table on stderr.
#define OMPI_SKIP_MPICXX 1
#include <mpi.h>

#include <array>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "common.hpp"
#include "json.hpp"
#include "rdmx/core/env.hpp"
#include "rdmx/fabric/call.hpp"
#include "rdmx/fabric/collective.hpp"
#include "rdmx/fabric/job.hpp"
#include "rdmx/action/action.hpp"
#include "rdmx/invoke/messenger.hpp"

namespace {

using namespace rdmx::bench;

constexpr std::size_t shard_slots = std::size_t{1} << 20;  // per server; 16 MiB
constexpr std::uint64_t keys_per_shard = shard_slots / 2;  // half full: short probes
constexpr int tag_get = 1, tag_put = 2, tag_stop = 3, tag_reply = 4;

std::uint64_t value_of(std::uint64_t key) { return key * 0x9E3779B97F4A7C15ull + 7; }
std::uint64_t mix(std::uint64_t k) {
  k ^= k >> 33;
  k *= 0xff51afd7ed558ccdull;
  return k ^ (k >> 33);
}

// One server's shard: linear probing, key 0 marks an empty slot (keys start at 1).
class Shard {
 public:
  Shard() : keys_(shard_slots, 0), values_(shard_slots, 0) {}
  void put(std::uint64_t key, std::uint64_t value) {
    std::size_t i = mix(key) & (shard_slots - 1);
    while (keys_[i] != 0 && keys_[i] != key) i = (i + 1) & (shard_slots - 1);
    keys_[i] = key;
    values_[i] = value;
  }
  std::uint64_t get(std::uint64_t key) const {
    std::size_t i = mix(key) & (shard_slots - 1);
    while (keys_[i] != 0) {
      if (keys_[i] == key) return values_[i];
      i = (i + 1) & (shard_slots - 1);
    }
    return 0;
  }

 private:
  std::vector<std::uint64_t> keys_, values_;
};

Shard* shard = nullptr;  // this process's, when it serves

std::uint64_t kv_get(std::uint64_t key) { return shard->get(key); }
void kv_put(std::uint64_t key, std::uint64_t value) { shard->put(key, value); }

struct Options {
  double seconds = 0.5;
  unsigned reps = 3;
  std::vector<unsigned> windows{1, 64};
  std::string calls = "send,one_sided,async";  // the rdmx call kinds to measure (MPI always runs)
};

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--quick") {
      o.seconds = 0.05;
      o.reps = 1;
    } else if (a.rfind("--time=", 0) == 0) {
      o.seconds = std::stod(a.substr(7));
      if (!(o.seconds > 0 && o.seconds < 3600)) throw rdmx::Error(rdmx::Errc::invalid_argument, "--time wants 0 < SECONDS < 3600");
    } else if (a.rfind("--reps=", 0) == 0) {
      o.reps = static_cast<unsigned>(rdmx::env::parse_count(a.substr(7), "--reps"));
    } else if (a.rfind("--calls=", 0) == 0) {
      o.calls = a.substr(8);
      for (std::size_t at = 0; at <= o.calls.size();) {
        const std::size_t end = std::min(o.calls.find(',', at), o.calls.size());
        const std::string kind = o.calls.substr(at, end - at);
        if (kind != "send" && kind != "one_sided" && kind != "async")
          throw rdmx::Error(rdmx::Errc::invalid_argument, "--calls: unknown call kind '" + kind + "' (send, one_sided, async)");
        at = end + 1;
      }
    } else if (a.rfind("--windows=", 0) == 0) {
      o.windows.clear();
      std::string list = a.substr(10);
      for (std::size_t at = 0; at <= list.size();) {
        const std::size_t end = std::min(list.find(',', at), list.size());
        const auto w = rdmx::env::parse_count(list.substr(at, end - at), "--windows");
        if (w > 4096) throw rdmx::Error(rdmx::Errc::invalid_argument, "--windows: at most 4096 requests outstanding");
        o.windows.push_back(static_cast<unsigned>(w));
        at = end + 1;
      }
    } else {
      throw rdmx::Error(rdmx::Errc::invalid_argument,
                        "unknown argument '" + a + "'\nusage: rdmx-bench-kv [--time=SECONDS] [--reps=N] [--windows=W,...] [--calls=KIND,...] [--quick]");
    }
  }
  return o;
}

// Whether `list` (comma-separated) names `kind`.
bool wanted(const std::string& list, std::string_view kind) {
  for (std::size_t at = 0; at <= list.size();) {
    const std::size_t end = std::min(list.find(',', at), list.size());
    if (std::string_view(list).substr(at, end - at) == kind) return true;
    at = end + 1;
  }
  return false;
}

struct Roles {
  std::uint32_t clients, servers;
  bool client(std::uint32_t rank) const { return rank < clients; }
  std::uint32_t server_rank(std::uint64_t key) const { return clients + static_cast<std::uint32_t>(mix(key) % servers); }
};

// The keys a client asks for: uniform over every server's keys.
class KeyStream {
 public:
  KeyStream(std::uint32_t rank, const Roles& roles) : rng_(rank * 7919 + 1), dist_(1, keys_per_shard * roles.servers) {}
  std::uint64_t next() { return dist_(rng_); }

 private:
  std::mt19937_64 rng_;
  std::uniform_int_distribution<std::uint64_t> dist_;
};

[[noreturn]] void wrong_value(std::uint64_t key, std::uint64_t got) {
  throw rdmx::Error(rdmx::Errc::protocol, "get(" + std::to_string(key) + ") returned " + std::to_string(got) +
                                              ", expected " + std::to_string(value_of(key)));
}

// One batch of `window` requests by each rdmx call kind; returns requests made.
using Batch = void (*)(const Roles&, KeyStream&, bool get, unsigned window);

void batch_send(const Roles& roles, KeyStream& keys, bool get, unsigned window) {
  std::array<std::uint64_t, 4096> got;  // written before read: no zeroing per batch
  std::array<std::uint64_t, 4096> asked;
  rdmx::Synchronizer sync;
  for (unsigned i = 0; i < window; ++i) {
    const std::uint64_t k = asked[i] = keys.next();
    const rdmx::ThreadId owner{roles.server_rank(k), 0};
    if (get) rdmx::call_return(owner, [k] { return kv_get(k); }, rdmx::into(got[i], sync));
    else rdmx::call(owner, [k] { kv_put(k, value_of(k)); }, rdmx::when_run(sync));
  }
  sync.wait();
  if (get)
    for (unsigned i = 0; i < window; ++i)
      if (got[i] != value_of(asked[i])) wrong_value(asked[i], got[i]);
}

void batch_one_sided(const Roles& roles, KeyStream& keys, bool get, unsigned window) {
  std::array<std::uint64_t, 4096> got;  // written before read: no zeroing per batch
  std::array<std::uint64_t, 4096> asked;
  rdmx::MessengerGlobal messenger;
  rdmx::Synchronizer sync;
  for (unsigned i = 0; i < window; ++i) {
    const std::uint64_t k = asked[i] = keys.next();
    const rdmx::ThreadId owner{roles.server_rank(k), 0};
    if (get) messenger.call_return(owner, [k] { return kv_get(k); }, into(got[i], sync));
    else messenger.call(owner, [k] { kv_put(k, value_of(k)); }, when_run(sync));
  }
  messenger.flush();
  sync.wait();
  if (get)
    for (unsigned i = 0; i < window; ++i)
      if (got[i] != value_of(asked[i])) wrong_value(asked[i], got[i]);
}

void batch_async(const Roles& roles, KeyStream& keys, bool get, unsigned window) {
  std::vector<rdmx::Future<std::uint64_t>> gets;
  std::vector<rdmx::Future<void>> puts;
  std::array<std::uint64_t, 4096> asked;
  for (unsigned i = 0; i < window; ++i) {
    const std::uint64_t k = asked[i] = keys.next();
    const rdmx::ThreadId owner{roles.server_rank(k), 0};
    if (get) gets.push_back(rdmx::async(rdmx::action<&kv_get>, owner, k));
    else puts.push_back(rdmx::async(rdmx::action<&kv_put>, owner, k, value_of(k)));
  }
  for (unsigned i = 0; i < gets.size(); ++i) {
    const std::uint64_t v = gets[i].get();
    if (v != value_of(asked[i])) wrong_value(asked[i], v);
  }
  for (auto& f : puts) f.get();
}

void batch_mpi(const Roles& roles, KeyStream& keys, bool get, unsigned window) {
  std::array<std::array<std::uint64_t, 2>, 4096> request;
  std::array<std::uint64_t, 4096> reply;
  std::vector<MPI_Request> pending(2 * window);
  for (unsigned i = 0; i < window; ++i) {
    const std::uint64_t k = keys.next();
    request[i] = {k, value_of(k)};
    const int owner = static_cast<int>(roles.server_rank(k));
    MPI_Irecv(&reply[i], 1, MPI_UINT64_T, owner, tag_reply, MPI_COMM_WORLD, &pending[2 * i]);
    MPI_Isend(request[i].data(), get ? 1 : 2, MPI_UINT64_T, owner, get ? tag_get : tag_put, MPI_COMM_WORLD,
              &pending[2 * i + 1]);
  }
  MPI_Waitall(static_cast<int>(pending.size()), pending.data(), MPI_STATUSES_IGNORE);
  if (get)
    for (unsigned i = 0; i < window; ++i)
      if (reply[i] != request[i][1]) wrong_value(request[i][0], reply[i]);
}

// A server's MPI loop: answers until every client said stop.
void serve_mpi(const Roles& roles) {
  std::uint32_t stopped = 0;
  std::array<std::uint64_t, 2> request{};
  while (stopped < roles.clients) {
    MPI_Status status;
    MPI_Recv(request.data(), 2, MPI_UINT64_T, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &status);
    if (status.MPI_TAG == tag_stop) {
      ++stopped;
      continue;
    }
    std::uint64_t answer = 0;
    if (status.MPI_TAG == tag_get) answer = kv_get(request[0]);
    else kv_put(request[0], request[1]);
    MPI_Send(&answer, 1, MPI_UINT64_T, status.MPI_SOURCE, tag_reply, MPI_COMM_WORLD);
  }
}

struct Variant {
  const char* name;  // the call kind, or "mpi"
  Batch batch;
};

// Runs one measurement on every process; returns the job's requests per
// second (rank 0's value is the one reported).
double measure(const Roles& roles, const Variant& v, bool get, unsigned window, double seconds, KeyStream& keys) {
  const bool mpi = v.batch == &batch_mpi;
  const std::uint32_t rank = rdmx::Job::current().rank();
  MPI_Barrier(MPI_COMM_WORLD);
  rdmx::barrier();
  double ops = 0, elapsed = 0;
  if (roles.client(rank)) {
    // Untimed: first use sets up endpoints, rings and registrations, one
    // server at a time as the random keys reach it; 64 requests reach every
    // server (with one request only, a quick run timed another server's
    // set-up: 0.06x MPI for the first 4-process cell).
    for (unsigned sent = 0; sent < 64; sent += window) v.batch(roles, keys, get, window);
    const auto t0 = Clock::now();
    do {
      v.batch(roles, keys, get, window);
      ops += window;
      elapsed = std::chrono::duration<double>(Clock::now() - t0).count();
    } while (elapsed < seconds);
    if (mpi) {
      const std::uint64_t none = 0;
      for (std::uint32_t s = 0; s < roles.servers; ++s)
        MPI_Send(&none, 1, MPI_UINT64_T, static_cast<int>(roles.clients + s), tag_stop, MPI_COMM_WORLD);
    }
  } else if (mpi) {
    serve_mpi(roles);
  }
  // rdmx servers serve inside this barrier: waiting progresses their worker.
  rdmx::barrier();
  double total = 0, longest = 0;
  MPI_Allreduce(&ops, &total, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  MPI_Allreduce(&elapsed, &longest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return total / longest;
}

}  // namespace

int main(int argc, char** argv) {
  rdmx::Job job(argc, argv);
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
  try {
    const Options o = parse(argc, argv);
    if (job.size() < 2 || job.size() % 2 != 0)
      throw rdmx::Error(rdmx::Errc::invalid_argument, "rdmx-bench-kv needs an even number of processes (half clients, half servers)");
    if (job.threads_per_process() != 1)
      throw rdmx::Error(rdmx::Errc::invalid_argument, "rdmx-bench-kv runs one worker thread per process");
    const Roles roles{job.size() / 2, job.size() / 2};
    const std::string pml = rdmx::bench::mpi_pml();
    const char* tls_env = std::getenv("UCX_TLS");
    const std::string tls = tls_env != nullptr && std::string(tls_env).find("tcp") != std::string::npos ? "tcp" : "shm";
    Shard own;
    if (!roles.client(job.rank())) {
      shard = &own;
      for (std::uint64_t k = 1; k <= keys_per_shard * roles.servers; ++k)
        if (roles.server_rank(k) == job.rank()) own.put(k, value_of(k));
    }
    const std::array<Variant, 4> variants{{{"send", &batch_send}, {"one_sided", &batch_one_sided}, {"async", &batch_async}, {"mpi", &batch_mpi}}};
    job.run([&](rdmx::ThreadId me) {
      KeyStream keys(me.process, roles);
      for (const unsigned window : o.windows)
        for (const bool get : {true, false}) {
          double mpi_rate = 0;
          // MPI first, so that every rdmx line can carry its ratio to it.
          for (std::size_t vi = variants.size(); vi-- > 0;) {
            const Variant& v = variants[vi];
            const bool is_mpi = v.batch == &batch_mpi;
            if (!is_mpi && !wanted(o.calls, v.name)) continue;
            std::vector<double> rates;
            for (unsigned r = 0; r < o.reps; ++r) rates.push_back(measure(roles, v, get, window, o.seconds, keys));
            const double rate = median(rates);
            if (is_mpi) mpi_rate = rate;
            if (me.process != 0) continue;
            JsonLine line;
            line.field("bench", "kv").field("variant", is_mpi ? "mpi" : "rdmx");
            if (is_mpi) line.field("mpi_pml", pml);
            else line.field("call", v.name);
            line.field("op", get ? "get" : "put")
                .field("procs", job.size())
                .field("tls", tls)
                .field("window", window)
                .field("metric", "ops_per_s")
                .field("value", rate)
                .field("vs_mpi", is_mpi ? 1.0 : rate / mpi_rate)
                .field("mpi_pml_compared", pml)
                .field("repetitions", o.reps)
                .field("seconds", o.seconds)
                .field("placement", cores_text() + (job.oversubscribed() ? ", oversubscribed" : ""))
                .print();
            std::fprintf(stderr, "kv %-4s %-3s window %4u %-10s %10s ops/s  %.2fx MPI(%s)\n", tls.c_str(), get ? "get" : "put",
                         window, is_mpi ? "mpi" : v.name, human_rate(rate).c_str(), is_mpi ? 1.0 : rate / mpi_rate, pml.c_str());
          }
        }
    });
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rdmx-bench-kv (rank %u): %s\n", job.rank(), e.what());
    std::fflush(stderr);
    std::_Exit(1);
  }
  MPI_Finalize();
  return 0;
}
