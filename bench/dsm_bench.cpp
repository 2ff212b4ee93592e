// rdmx-bench-dsm: what the DSM's operations cost, next to their floors
// (a bare page-protection fault, a bare UCX get of one block) and to Open
// MPI (MPI_Get of one block under a passive-target lock, MPI_Barrier)
// measured in the same processes. Process 0 measures; the others serve.
//
//   rdmx-bench-dsm [--reps=N] [--quick]
//
// Cases (JSON lines, bench "dsm"; metric us per operation, median):
//   floor          mprotect_fault: touch of a protected page, handler unprotects;
//                  ucx_get: rdmx::get of one block from process 1
//   first_read     fast_read: a block process 1 wrote, after a barrier (write notice names the writer);
//                  owner_lookup: a block nobody wrote (owner word, then get)
//   reread_clean   a read of a cached clean block (no fault), ns
//   first_write    a write to a cached clean block (fault, twin)
//   reread_written a read of a block this process wrote (no fault), ns
//   barrier        dsm: dsm::barrier with nothing written;
//                  floating_home / fixed_home: every process wrote its own bytes of the
//                  same `density` blocks before it (the two home policies)
//   mutex          dsm::Mutex lock + unlock, uncontended
//   mpi            MPI_Get of one block (lock/get/unlock) and MPI_Barrier
#define OMPI_SKIP_MPICXX 1
#include <mpi.h>
#include <signal.h>
#include <sys/mman.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "common.hpp"
#include "json.hpp"
#include "rdmx/dsm/counters.hpp"
#include "rdmx/dsm/fence.hpp"
#include "rdmx/dsm/mutex.hpp"
#include "rdmx/dsm/space.hpp"
#include "rdmx/fabric/job.hpp"
#include "rdmx/fabric/rma.hpp"

using rdmx::bench::Clock;
using rdmx::bench::JsonLine;
using rdmx::bench::median;

namespace {

double us_since(Clock::time_point t0) { return std::chrono::duration<double, std::micro>(Clock::now() - t0).count(); }

// The floor: a fault whose handler only unprotects the page.
char* floor_page = nullptr;
void floor_handler(int, siginfo_t* info, void*) {
  auto* at = static_cast<char*>(info->si_addr);
  if (at < floor_page || at >= floor_page + 4096) std::abort();
  mprotect(floor_page, 4096, PROT_READ | PROT_WRITE);
}

double mprotect_fault(int reps) {
  floor_page = static_cast<char*>(mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  struct sigaction sa {}, old{};
  sa.sa_sigaction = floor_handler;
  sa.sa_flags = SA_SIGINFO | SA_NODEFER;
  sigaction(SIGSEGV, &sa, &old);
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    mprotect(floor_page, 4096, PROT_NONE);
    const auto t0 = Clock::now();
    *reinterpret_cast<volatile char*>(floor_page) = 1;
    t.push_back(us_since(t0));
  }
  sigaction(SIGSEGV, &old, nullptr);
  munmap(floor_page, 4096);
  return median(t);
}

struct Options {
  int reps = 400;
};

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--quick") o.reps = 40;
    else if (a.rfind("--reps=", 0) == 0) o.reps = std::max(4, std::atoi(a.c_str() + 7));
    else {
      std::fprintf(stderr, "rdmx-bench-dsm: unknown argument '%s'\nusage: rdmx-bench-dsm [--reps=N] [--quick]\n", a.c_str());
      std::exit(2);
    }
  }
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  rdmx::Job job(argc, argv);
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
  const Options opt = parse(argc, argv);
  if (job.size() < 2) {
    std::fprintf(stderr, "rdmx-bench-dsm: needs at least 2 processes\n");
    return 2;
  }
  const bool me0 = job.rank() == 0;
  const std::string pml = rdmx::bench::mpi_pml();
  const char* tls_env = std::getenv("UCX_TLS");
  const std::string tls = tls_env != nullptr && std::string(tls_env).find("tcp") != std::string::npos ? "tcp" : "shm";
  JsonLine common;
  common.field("bench", "dsm").field("procs", job.size()).field("threads", 1).field("tls", tls);
  auto emit = [&](const char* c, const char* variant, std::size_t size, int density, const char* metric, double v) {
    if (!me0) return;
    common.with("case", c).field("variant", variant).field("size", size).field("density", density)
        .field("mpi_pml", pml).field("metric", metric).field("value", v)
        .field("placement", rdmx::bench::cores_text() + (job.oversubscribed() ? ", oversubscribed" : ""))
        .print();
  };

  // Before any Space: the DSM's handler is not in the way yet.
  if (me0) emit("floor", "mprotect_fault", 4096, 0, "us", mprotect_fault(opt.reps));
  job.barrier();

  for (std::size_t block : {std::size_t{4096}, std::size_t{32768}}) {
    rdmx::dsm::Config config = rdmx::dsm::Config::from_env();
    config.block_bytes = block;
    config.heap_bytes = rdmx::bench::round_up(std::size_t(2 * opt.reps + 8) * block, block);
    rdmx::dsm::Space space(job, config);
    const int n = opt.reps;

    // floor: a bare get of one block from process 1's registered memory.
    {
      const rdmx::RemoteLocator remote = rdmx::allocate_remote(1, block);
      std::vector<std::byte> into(block);
      std::vector<double> t;
      if (me0)
        for (int i = 0; i < n; ++i) {
          const auto t0 = Clock::now();
          rdmx::get(into.data(), remote).get();
          t.push_back(us_since(t0));
        }
      job.barrier();
      if (me0) emit("floor", "ucx_get", block, 0, "us", median(t));
    }

    auto* written = static_cast<volatile char*>(rdmx::dsm::allocate(std::size_t(n) * block, block));
    auto* untouched = static_cast<volatile char*>(rdmx::dsm::allocate(std::size_t(n) * block, block));
    if (job.rank() == 1)
      for (int i = 0; i < n; ++i) written[std::size_t(i) * block] = 1;
    rdmx::dsm::barrier();

    std::vector<double> fast, lookup, reread, first_write, reread_written;
    if (me0) {
      long sum = 0;
      for (int i = 0; i < n; ++i) {
        auto t0 = Clock::now();
        sum += written[std::size_t(i) * block];
        fast.push_back(us_since(t0));
      }
      // Process 0 is the initial home of every block: read untouched blocks
      // the others' way, from process 1 below; here, the cached reread.
      const auto t0 = Clock::now();
      for (int r = 0; r < 100; ++r)
        for (int i = 0; i < n; ++i) sum += written[std::size_t(i) * block + 64];
      reread.push_back(us_since(t0) * 1000 / (100.0 * n));
      for (int i = 0; i < n; ++i) {
        auto t1 = Clock::now();
        written[std::size_t(i) * block + 8] = 2;
        first_write.push_back(us_since(t1));
      }
      const auto t2 = Clock::now();
      for (int r = 0; r < 100; ++r)
        for (int i = 0; i < n; ++i) sum += written[std::size_t(i) * block + 8];
      reread_written.push_back(us_since(t2) * 1000 / (100.0 * n));
      if (sum == 42) std::printf(" ");
    }
    job.barrier();
    if (job.rank() == 1) {
      long sum = 0;
      for (int i = 0; i < n; ++i) {
        auto t0 = Clock::now();
        sum += untouched[std::size_t(i) * block];
        lookup.push_back(us_since(t0));
      }
      const double m = median(lookup);
      std::vector<std::byte> out(sizeof m);
      std::memcpy(out.data(), &m, sizeof m);
      job.allgather(out);
      if (sum == 42) std::printf(" ");
    } else {
      std::vector<std::byte> none(sizeof(double));
      auto all = job.allgather(none);
      double m;
      std::memcpy(&m, all[1].data(), sizeof m);
      if (me0) lookup.push_back(m);
    }
    rdmx::dsm::barrier();
    emit("first_read", "fast_read", block, 1, "us", me0 ? median(fast) : 0);
    emit("first_read", "owner_lookup", block, 0, "us", me0 ? median(lookup) : 0);
    emit("reread_clean", "dsm", block, 0, "ns", me0 ? median(reread) : 0);
    emit("first_write", "dsm", block, 0, "us", me0 ? median(first_write) : 0);
    emit("reread_written", "dsm", block, 0, "ns", me0 ? median(reread_written) : 0);

    // barrier with nothing written
    {
      std::vector<double> t;
      for (int i = 0; i < n; ++i) {
        const auto t0 = Clock::now();
        rdmx::dsm::barrier();
        t.push_back(us_since(t0));
      }
      emit("barrier", "dsm", block, 0, "us", median(t));
    }
    // an uncontended mutex
    {
      std::vector<double> t;
      rdmx::dsm::Mutex m(0);
      if (me0)
        for (int i = 0; i < n; ++i) {
          const auto t0 = Clock::now();
          m.lock();
          m.unlock();
          t.push_back(us_since(t0));
        }
      rdmx::dsm::barrier();
      emit("mutex", "dsm", block, 0, "us", me0 ? median(t) : 0);
    }
    if (me0) std::fprintf(stderr, "rdmx-bench-dsm: block %zu: %s\n", block, rdmx::dsm::to_string(rdmx::dsm::counters()).c_str());

    // Open MPI in the same processes: one block by MPI_Get, and MPI_Barrier.
    {
      std::vector<char> window_memory(block, 1), into(block);
      MPI_Win win;
      // Open MPI's ob1 over TCP alone has no one-sided component: say so and go on.
      MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
      const int made =
          MPI_Win_create(window_memory.data(), static_cast<MPI_Aint>(block), 1, MPI_INFO_NULL, MPI_COMM_WORLD, &win);
      int all_made = 0;
      const int mine_made = made == MPI_SUCCESS ? 1 : 0;
      MPI_Allreduce(&mine_made, &all_made, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
      std::vector<double> t;
      if (all_made == 0) {
        if (me0) std::fprintf(stderr, "rdmx-bench-dsm: MPI_Win_create failed with pml %s: no mpi_get line\n", pml.c_str());
        if (made == MPI_SUCCESS) MPI_Win_free(&win);
      } else if (me0)
        for (int i = 0; i < n; ++i) {
          const auto t0 = Clock::now();
          MPI_Win_lock(MPI_LOCK_SHARED, 1, 0, win);
          MPI_Get(into.data(), static_cast<int>(block), MPI_BYTE, 1, 0, static_cast<int>(block), MPI_BYTE, win);
          MPI_Win_unlock(1, win);
          t.push_back(us_since(t0));
        }
      MPI_Barrier(MPI_COMM_WORLD);
      if (all_made != 0) {
        MPI_Win_free(&win);
        emit("first_read", "mpi_get", block, 0, "us", me0 ? median(t) : 0);
      }
      std::vector<double> b;
      for (int i = 0; i < n; ++i) {
        const auto t0 = Clock::now();
        MPI_Barrier(MPI_COMM_WORLD);
        b.push_back(us_since(t0));
      }
      emit("barrier", "mpi", block, 0, "us", me0 ? median(b) : 0);
    }
  }
  // The protocols at a barrier: every process writes its own bytes of the
  // same `density` blocks, then meets the others. Floating home: each block
  // migrates through every writer; fixed home: each writer puts its runs to
  // the block's home. Both in this binary, by configuration.
  for (const rdmx::dsm::HomePolicy policy : {rdmx::dsm::HomePolicy::floating, rdmx::dsm::HomePolicy::fixed}) {
    constexpr std::size_t block = 4096;
    constexpr int most = 64;
    rdmx::dsm::Config config = rdmx::dsm::Config::from_env();
    config.block_bytes = block;
    config.heap_bytes = std::size_t{most} * block;
    config.home = policy;
    rdmx::dsm::Space space(job, config);
    auto* area = static_cast<volatile char*>(rdmx::dsm::allocate(std::size_t{most} * block, block));
    for (int density : {1, 16, most}) {
      std::vector<double> t;
      for (int r = 0; r < std::max(10, opt.reps / 8); ++r) {
        for (int b = 0; b < density; ++b) area[std::size_t(b) * block + job.rank() * 8 + r % 8] = static_cast<char>(r);
        const auto t0 = Clock::now();
        rdmx::dsm::barrier();
        t.push_back(us_since(t0));
      }
      emit("barrier", policy == rdmx::dsm::HomePolicy::fixed ? "fixed_home" : "floating_home", block, density, "us",
           median(t));
    }
    if (me0)
      std::fprintf(stderr, "rdmx-bench-dsm: %s home: %s\n", rdmx::dsm::to_string(policy),
                   rdmx::dsm::to_string(rdmx::dsm::counters()).c_str());
  }
  MPI_Finalize();
  return 0;
}
