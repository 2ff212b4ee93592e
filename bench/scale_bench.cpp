// rdmx-bench-scale: what a job costs as it grows (docs/scaling.md).
// One job of N processes (the launcher's) x T worker threads (--rdmx-threads)
// goes through the life of a program that talks to everyone once:
//   start     main() to a constructed Job (bootstrap, workers, address exchange)
//   barrier   the first Job::barrier
//   calls     every worker thread sends one send-based call (rdmx::call,
//             answered when consumed) to every worker thread of every other
//             process: endpoints are wired up lazily, here
//   calls_warm the same round again, on the endpoints now made
//   messenger every worker thread makes one one-sided call (MessengerGlobal)
//             to every worker thread of every other process: each pair of
//             threads gets its chunk ring here (--no-messenger skips it)
//   shutdown  Job's destructor (leaving collectively), rank 0's
// Times are the slowest process's. Memory is read per process (VmRSS from
// /proc/self/status; the arena's registered bytes mapped and in use) before
// and after each round, and reported as the mean over processes and per
// remote peer: per process, per pair of threads, so the figures extrapolate
// (docs/results/scaling.md, "A job's life and memory per peer").
#include <dirent.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <optional>
#include <string>

#include "json.hpp"
#include "rdmx/fabric/call.hpp"
#include "rdmx/fabric/collective.hpp"
#include "rdmx/fabric/job.hpp"
#include "rdmx/invoke/messenger.hpp"
#include "rdmx/memory/arena.hpp"

using namespace rdmx;
using Clock = std::chrono::steady_clock;

namespace {

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// Resident set of this process, bytes (VmRSS; 0 if /proc is not there).
double vm_rss_bytes() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line))
    if (line.rfind("VmRSS:", 0) == 0) return std::stod(line.substr(6)) * 1024;  // "VmRSS:   1234 kB"
  return 0;
}

// Open file descriptors of this process: over TCP each endpoint holds
// sockets, and the descriptor limit (ulimit -n) bounds a job's fan-out.
double open_fds() {
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) return 0;
  double n = 0;
  while (const dirent* e = readdir(dir))
    if (e->d_name[0] != '.') ++n;
  closedir(dir);
  return n - 1;  // the descriptor reading the directory
}

// One process's memory at one point of the run.
struct Memory {
  double rss = 0;           // bytes resident
  double arena_mapped = 0;  // registered bytes the arena holds
  double arena_used = 0;    // of them, handed out
  double fds = 0;           // open file descriptors
};

Memory sample(Job& job) {
  return {vm_rss_bytes(), static_cast<double>(job.arena().mapped_bytes()), static_cast<double>(job.arena().used_bytes()),
          open_fds()};
}

// Every process's Memory summed, through a worker collective (each thread
// of a process but thread 0 contributes zeros).
Memory summed(const Memory& mine, ThreadId me) {
  const Memory zero;
  return allreduce(me.thread == 0 ? mine : zero,
                   [](Memory a, Memory b) {
    return Memory{a.rss + b.rss, a.arena_mapped + b.arena_mapped, a.arena_used + b.arena_used, a.fds + b.fds};
  });
}

struct Config {
  bool messenger = true;
};

Config parse(int argc, char** argv) {
  Config c;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--no-messenger") c.messenger = false;
    else if (a == "--quick") {
    }  // every run is one round already: nothing to shorten
    else throw std::invalid_argument("unknown option " + a + " (--no-messenger, --quick)");
  }
  return c;
}

// Send-based calls from this thread to every worker thread of every other
// process, all in flight at once; returns once each has run.
void call_everyone(Job& job, ThreadId me) {
  Synchronizer sync;
  for (std::uint32_t p = 0; p < job.size(); ++p) {
    if (p == me.process) continue;
    for (std::uint32_t t = 0; t < job.threads_per_process(); ++t) call(ThreadId{p, t}, [] {}, when_run(sync));
  }
  sync.wait();
}

// The same with one-sided calls: the first call on each pair sets its ring up.
void message_everyone(Job& job, ThreadId me) {
  MessengerGlobal messenger;
  Synchronizer sync;
  for (std::uint32_t p = 0; p < job.size(); ++p) {
    if (p == me.process) continue;
    for (std::uint32_t t = 0; t < job.threads_per_process(); ++t)
      messenger.call(ThreadId{p, t}, [] {}, when_run(sync));
  }
  messenger.flush();
  sync.wait();
}

}  // namespace

int main(int argc, char** argv) {
  const auto t_main = Clock::now();
  try {
    const Memory before_job{vm_rss_bytes(), 0, 0, open_fds()};
    std::optional<Job> job;
    job.emplace(argc, argv);
    const double start_s = seconds_since(t_main);
    const Config cfg = parse(argc, argv);
    const std::uint32_t n = job->size(), threads = job->threads_per_process();
    const char* tls_env = std::getenv("UCX_TLS");
    const std::string tls = tls_env == nullptr ? "auto" : tls_env;
    bench::JsonLine common;
    common.field("bench", "scale")
        .field("variant", "lifecycle")
        .field("procs", n)
        .field("threads", threads)
        .field("tls", tls)
        .field("oversubscribed", job->oversubscribed());

    auto t = Clock::now();
    job->barrier();
    const double barrier_s = seconds_since(t);
    const Memory after_job = sample(*job);

    struct Times {
      double start, barrier, calls, calls_warm, messenger;
    };
    Times slowest{};
    Memory job_total, calls_total, messenger_total;
    job->run([&](ThreadId me) {
      const Times mine{start_s, barrier_s, 0, 0, 0};
      // Every thread takes part in each collective; thread 0 keeps the result.
      const bool keep = me.thread == 0;
      const Memory at_job = summed(after_job, me);
      if (keep) job_total = at_job;

      auto round = [&](auto&& fn) {
        rdmx::barrier();
        const auto t0 = Clock::now();
        fn(*job, me);
        const double s = seconds_since(t0);
        rdmx::barrier();  // every thread of the job is done: memory is stable
        return s;
      };
      Times times = mine;
      times.calls = round(call_everyone);
      const Memory at_calls = summed(sample(*job), me);
      if (keep) calls_total = at_calls;
      times.calls_warm = round(call_everyone);
      if (cfg.messenger) times.messenger = round(message_everyone);
      const Memory at_messenger = summed(sample(*job), me);
      if (keep) messenger_total = at_messenger;
      const Times worst = allreduce(times, [](Times a, Times b) {
        return Times{std::max(a.start, b.start), std::max(a.barrier, b.barrier), std::max(a.calls, b.calls),
                     std::max(a.calls_warm, b.calls_warm), std::max(a.messenger, b.messenger)};
      });
      if (me == ThreadId{0, 0}) slowest = worst;
    });

    const bool print = job->rank() == 0;
    // Bytes per process, then per remote peer process and per pair of
    // threads (sender thread, receiver thread in another process): each
    // process holds T*T*(N-1) such pairs as sender and as many as receiver,
    // so the per-pair figure is one pair's cost on both of its ends.
    const double peers = n > 1 ? n - 1 : 1, pairs = peers * threads * threads;
    auto metric = [&](const char* name, double value, const char* unit) {
      if (print) common.with("metric", name).field("value", value).field("unit", unit).print();
    };
    metric("start_s", slowest.start, "s");
    metric("first_barrier_s", slowest.barrier, "s");
    metric("calls_to_all_s", slowest.calls, "s");
    metric("calls_to_all_warm_s", slowest.calls_warm, "s");
    if (cfg.messenger) metric("messenger_to_all_s", slowest.messenger, "s");
    metric("rss_before_job_bytes", before_job.rss, "bytes/process");
    metric("rss_after_job_bytes", job_total.rss / n, "bytes/process");
    metric("arena_mapped_after_job_bytes", job_total.arena_mapped / n, "bytes/process");
    metric("arena_used_after_job_bytes", job_total.arena_used / n, "bytes/process");
    metric("rss_after_calls_bytes", calls_total.rss / n, "bytes/process");
    metric("arena_used_after_calls_bytes", calls_total.arena_used / n, "bytes/process");
    metric("fds_before_job", before_job.fds, "descriptors/process");
    metric("fds_after_job", job_total.fds / n, "descriptors/process");
    metric("fds_after_calls", calls_total.fds / n, "descriptors/process");
    metric("calls_rss_per_peer_bytes", (calls_total.rss - job_total.rss) / n / peers, "bytes/peer process");
    metric("calls_rss_per_thread_pair_bytes", (calls_total.rss - job_total.rss) / n / pairs, "bytes/thread pair");
    if (cfg.messenger) {
      metric("rss_after_messenger_bytes", messenger_total.rss / n, "bytes/process");
      metric("fds_after_messenger", messenger_total.fds / n, "descriptors/process");
      metric("arena_mapped_after_messenger_bytes", messenger_total.arena_mapped / n, "bytes/process");
      metric("arena_used_after_messenger_bytes", messenger_total.arena_used / n, "bytes/process");
      metric("messenger_rss_per_thread_pair_bytes", (messenger_total.rss - calls_total.rss) / n / pairs, "bytes/thread pair");
      metric("messenger_arena_per_thread_pair_bytes", (messenger_total.arena_used - calls_total.arena_used) / n / pairs,
             "bytes/thread pair");
      // The arena maps whole segments (RDMX_ARENA_SEGMENT) on demand, all
      // resident: what the rings cost beside them is endpoints to the
      // service threads, rkeys and the channels' own state.
      metric("messenger_rss_beside_arena_per_thread_pair_bytes",
             ((messenger_total.rss - calls_total.rss) - (messenger_total.arena_mapped - calls_total.arena_mapped)) / n / pairs,
             "bytes/thread pair");
    }

    t = Clock::now();
    job.reset();
    const double shutdown_s = seconds_since(t);
    if (print) {
      common.with("metric", "shutdown_s").field("value", shutdown_s).field("unit", "s").print();
      common.with("metric", "main_s").field("value", seconds_since(t_main)).field("unit", "s").print();
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rdmx-bench-scale: %s\n", e.what());
    return 1;
  }
}
