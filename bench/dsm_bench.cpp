// rdmx-bench-dsm: what the DSM's operations cost, next to their floors
// (a bare page-protection fault, a bare UCX get of one block) and to Open
// MPI (MPI_Get of one block under a passive-target lock, MPI_Barrier)
// measured in the same processes. Process 0 measures; the others serve.
//
//   rdmx-bench-dsm [--reps=N] [--quick] [--rdmx-threads=T]
//
// With T > 1 worker threads per process only the fault floor (the T threads
// of every process faulting at once, each on its own page) and read_shared (reads and writes
// split among the threads) run; the other cases time one thread.
//
// Cases (JSON lines, bench "dsm"; metric us per operation, median):
//   floor          mprotect_fault: touch of a protected page, handler unprotects;
//                  ucx_get: rdmx::get of one block from process 1
//   first_read     fast_read: a block process 1 wrote, after a barrier (write notice names the writer);
//                  owner_lookup: a block nobody wrote (owner word, then get)
//   reread_clean   a read of a cached clean block (no fault), ns
//   first_write    a write to a cached clean block (fault, twin)
//   reread_written a read of a block this process wrote (no fault), ns
//   barrier        dsm: dsm::process_barrier with nothing written;
//                  floating_home / fixed_home: every process wrote its own bytes of the
//                  same `density` blocks before it (the two home policies)
//                  full_signature: every process wrote one word of each of `notices`
//                  blocks of its own (the signature holds a notice per block)
//   mutex          dsm: dsm::Mutex lock + unlock (its word at process 1);
//                  mpi: MPI_Win_lock exclusive + MPI_Win_unlock of process
//                  1's window. `pattern` reacquire: process 0 alone;
//                  contended: every process at once; contended_counter:
//                  every process, incrementing a counter inside (a word of
//                  the heap; MPI_Get, flush, MPI_Put), checked at the end;
//                  median us (reacquire) or mean us (contended: with the waits)
//   fig1           MENPS Fig. 1, 32 KiB, random bytes written at `density` %:
//                  pack_diff (runs packed into a buffer), discontiguous_write
//                  (a put per run, then flush: the fixed home's merge),
//                  contiguous_write (the whole block in one put, then flush)
//   migratory      256 blocks homed elsewhere (by the fixed home's rule)
//                  written whole by the same process every phase, then a
//                  barrier (BT's shape): floating / fixed home, us per phase
//   write_sweep    256 blocks per process rewritten in order every phase,
//                  the slices rotating among the processes (MG's shape):
//                  write_ahead / block_at_a_time, us and write faults per phase
//   read_shared    a read-only matrix (256 blocks) and a vector (64 blocks,
//                  each process rewrites its slice every phase) that every
//                  process reads whole after the barrier (CG's shape):
//                  signature / directory, us and read faults per phase
//   wn_sweep       read_shared with signatures holding `notices` 0/64/128/1024
//   mpi            MPI_Get of one block (lock/get/unlock) and MPI_Barrier
#define OMPI_SKIP_MPICXX 1
#include <mpi.h>
#include <signal.h>
#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
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

// The floor: a fault whose handler only unprotects the page. With T
// threads, each faults on a page of its own at the same time: what the
// kernel's protection changes cost when several threads share the address
// space (the threaded read_shared's floor).
char* floor_area = nullptr;
std::size_t floor_pages = 0;
void floor_handler(int, siginfo_t* info, void*) {
  auto* at = static_cast<char*>(info->si_addr);
  if (at < floor_area || at >= floor_area + floor_pages * 4096) std::abort();
  mprotect(floor_area + (at - floor_area) / 4096 * 4096, 4096, PROT_READ | PROT_WRITE);
}

double mprotect_fault(rdmx::Job& job, int reps) {
  const std::uint32_t threads = job.threads_per_process();
  floor_pages = threads;
  floor_area = static_cast<char*>(mmap(nullptr, 4096 * floor_pages, PROT_READ | PROT_WRITE,
                                       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  struct sigaction sa {}, old{};
  sa.sa_sigaction = floor_handler;
  sa.sa_flags = SA_SIGINFO | SA_NODEFER;
  sigaction(SIGSEGV, &sa, &old);
  std::vector<std::vector<double>> t(threads);
  auto faults = [&](std::uint32_t me) {
    char* page = floor_area + std::size_t{me} * 4096;
    for (int i = 0; i < reps; ++i) {
      mprotect(page, 4096, PROT_NONE);
      const auto t0 = Clock::now();
      *reinterpret_cast<volatile char*>(page) = 1;
      t[me].push_back(us_since(t0));
    }
  };
  if (threads == 1)
    faults(0);
  else
    job.run([&](rdmx::ThreadId me) { faults(me.thread); });
  sigaction(SIGSEGV, &old, nullptr);
  munmap(floor_area, 4096 * floor_pages);
  std::vector<double> all;
  for (const auto& mine : t) all.insert(all.end(), mine.begin(), mine.end());
  return median(all);
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

[[noreturn]] void wrong(const std::string& what) {
  std::fprintf(stderr, "rdmx-bench-dsm: wrong result: %s\n", what.c_str());
  std::exit(3);
}

rdmx::dsm::Config config_for(std::size_t block, std::size_t heap_blocks) {
  rdmx::dsm::Config c = rdmx::dsm::Config::from_env();
  c.block_bytes = block;
  c.heap_bytes = heap_blocks * block;
  return c;
}

std::uint64_t faults(const rdmx::dsm::Counters& c) { return c.read_faults + c.write_faults; }

// A barrier whose signature is full: every process writes one word of each
// of `notices` blocks only it writes, so its signature carries that many
// notices (and each is a merge at the release).
template <class Line>
void full_signature_barrier(rdmx::Job& job, const Options& opt, const Line& line) {
  constexpr std::size_t block = 4096;
  rdmx::dsm::Config config = rdmx::dsm::Config::from_env();
  const std::size_t per = config.notices;
  if (per == 0) return;  // RDMX_DSM_NOTICES=0: no signature is ever full
  const std::size_t processes = job.size();
  config = config_for(block, per * processes + 8);
  rdmx::dsm::Space space(job, config);
  auto* area = static_cast<volatile std::uint64_t*>(rdmx::dsm::allocate(per * processes * block, block));
  auto word = [&](std::size_t process, std::size_t i) -> volatile std::uint64_t& {
    return area[(process * per + i) * (block / sizeof(std::uint64_t))];
  };
  const int rounds = std::max(10, opt.reps / 20);
  std::vector<double> t;
  for (int r = 1; r <= rounds + 2; ++r) {
    for (std::size_t i = 0; i < per; ++i) word(job.rank(), i) = static_cast<std::uint64_t>(r);
    const auto t0 = Clock::now();
    rdmx::dsm::process_barrier();
    if (r > 2) t.push_back(us_since(t0));
  }
  for (std::size_t p = 0; p < processes; ++p)
    for (std::size_t i = 0; i < per; ++i)
      if (word(p, i) != static_cast<std::uint64_t>(rounds + 2))
        wrong("full_signature: block " + std::to_string(i) + " of process " + std::to_string(p));
  rdmx::dsm::process_barrier();
  if (job.rank() == 0)
    line("barrier", "full_signature", block, double(per)).field("notices", per).field("metric", "us")
        .field("value", median(t)).print();
}

// A global mutex against an MPI exclusive lock: lock and unlock alone
// (`pattern` reacquire: process 0 alone; contended: every process at once),
// and around an increment of a counter (contended_counter: in the shared
// heap for the DSM; MPI_Get, flush, MPI_Put in a window for MPI), whose final
// value is checked.
template <class Line>
void mutexes(rdmx::Job& job, const Options& opt, const Line& line) {
  constexpr std::size_t block = 4096;
  const bool me0 = job.rank() == 0;
  const std::uint64_t processes = job.size();
  const int n = opt.reps;
  // Reacquire: the median. Contended: the mean, which counts the waits
  // for the other holders (the median is a process re-taking the lock).
  auto print = [&](const char* variant, const char* pattern, const std::vector<double>& t) {
    if (!me0) return;
    double value = median(t);
    if (std::string_view(pattern) != "reacquire") {
      value = 0;
      for (double x : t) value += x;
      value /= double(t.size());
    }
    line("mutex", variant, block, 0.0).field("pattern", pattern).field("metric", "us").field("value", value).print();
  };
  // Times n calls of `critical`, by process 0 alone or by every process.
  auto time = [&](bool everyone, auto&& critical) {
    std::vector<double> t;
    if (everyone || me0)
      for (int i = 0; i < n; ++i) {
        const auto t0 = Clock::now();
        critical();
        t.push_back(us_since(t0));
      }
    return t;
  };
  {
    rdmx::dsm::Space space(job, config_for(block, 8));
    auto* counter = static_cast<volatile std::uint64_t*>(rdmx::dsm::allocate(block, block));
    rdmx::dsm::Mutex mutex(1);  // its word lives at process 1 (mutex mod P)
    const auto alone = time(false, [&] { mutex.lock(); mutex.unlock(); });
    rdmx::dsm::process_barrier();
    const auto all = time(true, [&] { mutex.lock(); mutex.unlock(); });
    rdmx::dsm::process_barrier();
    const auto counted = time(true, [&] {
      mutex.lock();
      *counter = *counter + 1;
      mutex.unlock();
    });
    rdmx::dsm::process_barrier();
    if (*counter != std::uint64_t(n) * processes) wrong("mutex: the counter reached " + std::to_string(*counter));
    print("dsm", "reacquire", alone);
    print("dsm", "contended", all);
    print("dsm", "contended_counter", counted);
  }
  std::int64_t memory = 0;
  MPI_Win win;
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  const int made = MPI_Win_create(&memory, sizeof memory, sizeof memory, MPI_INFO_NULL, MPI_COMM_WORLD, &win);
  int all_made = 0;
  const int mine_made = made == MPI_SUCCESS ? 1 : 0;
  MPI_Allreduce(&mine_made, &all_made, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (all_made == 0) {
    if (made == MPI_SUCCESS) MPI_Win_free(&win);
    if (me0) std::fprintf(stderr, "rdmx-bench-dsm: MPI_Win_create failed: no mpi mutex lines\n");
    return;
  }
  auto lock_unlock = [&] {
    MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 1, 0, win);
    MPI_Win_unlock(1, win);
  };
  const auto alone = time(false, lock_unlock);
  MPI_Barrier(MPI_COMM_WORLD);
  const auto all = time(true, lock_unlock);
  MPI_Barrier(MPI_COMM_WORLD);
  const auto counted = time(true, [&] {
    std::int64_t value = 0;
    MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 1, 0, win);
    MPI_Get(&value, 1, MPI_INT64_T, 1, 0, 1, MPI_INT64_T, win);
    MPI_Win_flush(1, win);
    ++value;
    MPI_Put(&value, 1, MPI_INT64_T, 1, 0, 1, MPI_INT64_T, win);
    MPI_Win_unlock(1, win);
  });
  MPI_Barrier(MPI_COMM_WORLD);
  std::int64_t value = 0;
  MPI_Win_lock(MPI_LOCK_SHARED, 1, 0, win);
  MPI_Get(&value, 1, MPI_INT64_T, 1, 0, 1, MPI_INT64_T, win);
  MPI_Win_unlock(1, win);
  if (std::uint64_t(value) != std::uint64_t(n) * processes) wrong("MPI mutex: the counter reached " + std::to_string(value));
  MPI_Barrier(MPI_COMM_WORLD);
  MPI_Win_free(&win);
  print("mpi", "reacquire", alone);
  print("mpi", "contended", all);
  print("mpi", "contended_counter", counted);
}

// MENPS Fig. 1: what merging a diff costs as a packed diff, as a put per
// run (what the fixed home does) and as one contiguous transfer of the whole
// block (what a migration moves), by the density of written bytes.
template <class Line>
void fig1(rdmx::Job& job, const Options& opt, const Line& line) {
  constexpr std::size_t block = 32768;
  const int reps = std::max(10, opt.reps / 4);
  if (job.rank() == 0) {
    const rdmx::RemoteLocator remote = rdmx::allocate_remote(1, block);
    std::vector<std::byte> twin(block), mine(block), packed(5 * block);
    std::mt19937_64 random(42);
    for (std::byte& b : twin) b = std::byte(random());
    std::vector<std::uint32_t> order(block);
    for (std::uint32_t i = 0; i < block; ++i) order[i] = i;
    std::uint64_t sink = 0;
    for (const double density : {0.01, 0.1, 1.0, 10.0, 100.0}) {
      mine = twin;
      std::shuffle(order.begin(), order.end(), random);
      const auto written = std::max<std::size_t>(1, static_cast<std::size_t>(double(block) * density / 100 + 0.5));
      for (std::size_t k = 0; k < written; ++k) mine[order[k]] = twin[order[k]] ^ std::byte{0xff};
      // Calls run(offset, length) for each run of bytes that differ from the twin.
      auto each_run = [&](auto&& run) {
        std::size_t runs = 0;
        for (std::size_t i = 0; i < block;) {
          if (mine[i] == twin[i]) {
            ++i;
            continue;
          }
          std::size_t end = i + 1;
          while (end < block && mine[end] != twin[end]) ++end;
          run(i, end - i);
          ++runs;
          i = end;
        }
        return runs;
      };
      std::vector<double> pack, discontiguous, contiguous;
      std::size_t runs = 0;
      for (int r = 0; r < reps; ++r) {
        auto t0 = Clock::now();
        std::size_t at = 0;
        runs = each_run([&](std::size_t i, std::size_t n) {
          const std::uint32_t header[2] = {static_cast<std::uint32_t>(i), static_cast<std::uint32_t>(n)};
          std::memcpy(packed.data() + at, header, sizeof header);
          std::memcpy(packed.data() + at + sizeof header, mine.data() + i, n);
          at += sizeof header + n;
        });
        pack.push_back(us_since(t0));
        sink += std::to_integer<std::uint64_t>(packed[at - 1]);
        t0 = Clock::now();
        each_run([&](std::size_t i, std::size_t n) { rdmx::post_put(mine.data() + i, remote.slice(i, n)); });
        rdmx::flush(1);
        discontiguous.push_back(us_since(t0));
        t0 = Clock::now();
        rdmx::post_put(mine.data(), remote);
        rdmx::flush(1);
        contiguous.push_back(us_since(t0));
      }
      for (auto [variant, t] : {std::pair{"pack_diff", &pack}, std::pair{"discontiguous_write", &discontiguous},
                                std::pair{"contiguous_write", &contiguous}})
        line("fig1", variant, block, density).field("runs", runs).field("metric", "us").field("value", median(*t)).print();
    }
    rdmx::free_remote(remote);
    if (sink == 42) std::printf(" ");
  }
  job.barrier();
}

// BT's shape: every process rewrites the same 256 blocks each phase, blocks
// the fixed home places at another process, then meets the others.
template <class Line>
void migratory(rdmx::Job& job, const Options& opt, const Line& line) {
  constexpr std::size_t block = 4096, per = 256;
  const std::size_t processes = job.size(), rank = job.rank();
  const int phases = std::max(10, opt.reps / 20);
  auto value = [](int phase) { return static_cast<unsigned char>(phase % 250 + 1); };
  for (const rdmx::dsm::HomePolicy policy : {rdmx::dsm::HomePolicy::floating, rdmx::dsm::HomePolicy::fixed}) {
    rdmx::dsm::Config config = config_for(block, per * processes + 8);
    config.home = policy;
    rdmx::dsm::Space space(job, config);
    auto* area = static_cast<unsigned char*>(rdmx::dsm::allocate(per * processes * block, block));
    const std::size_t first = static_cast<std::size_t>(reinterpret_cast<std::byte*>(area) - space.heap().data()) / block;
    // Process p writes the blocks whose fixed home is process p + 1.
    auto blocks_of = [&](std::size_t p) {
      std::vector<std::size_t> mine;
      for (std::size_t i = 0; i < per * processes; ++i)
        if ((first + i) % processes == (p + 1) % processes) mine.push_back(i);
      return mine;
    };
    const std::vector<std::size_t> mine = blocks_of(rank);
    std::vector<double> t;
    std::uint64_t faults_before = 0;
    for (int phase = 1; phase <= phases + 2; ++phase) {
      if (phase == 3) faults_before = faults(rdmx::dsm::counters());
      const auto t0 = Clock::now();
      for (std::size_t b : mine) std::memset(area + b * block, value(phase), block);
      rdmx::dsm::process_barrier();
      if (phase > 2) t.push_back(us_since(t0));
    }
    const double faults_per_phase = double(faults(rdmx::dsm::counters()) - faults_before) / phases;
    for (std::size_t p = 0; p < processes; ++p)
      for (std::size_t b : blocks_of(p))
        if (area[b * block] != value(phases + 2) || area[b * block + block - 1] != value(phases + 2))
          wrong(std::string("migratory: block ") + std::to_string(b) + " of process " + std::to_string(p));
    rdmx::dsm::process_barrier();
    const char* variant = policy == rdmx::dsm::HomePolicy::fixed ? "fixed" : "floating";
    if (job.rank() == 0) {
      line("migratory", variant, block, double(per)).field("metric", "us").field("value", median(t)).print();
      line("migratory", variant, block, double(per)).field("metric", "faults").field("value", faults_per_phase).print();
    }
  }
}

// MG's shape: a grid of 256 blocks per process, each process rewriting a
// contiguous slice in order every phase, the slices rotating among the
// processes, so every write lands on a block another process wrote last
// (invalid here: a fetch, then the twin). With write-ahead (up to 8 blocks
// made writable after a sequential write fault) and without, us and write
// faults per phase.
template <class Line>
void write_sweep(rdmx::Job& job, const Options& opt, const Line& line) {
  constexpr std::size_t block = 4096, per = 256;
  const std::size_t processes = job.size(), rank = job.rank();
  const int phases = std::max(10, opt.reps / 20);
  auto value = [](int phase, std::size_t b) { return static_cast<unsigned char>((phase * 7 + b) % 251 + 1); };
  for (const std::uint32_t ahead : {8u, 0u}) {
    rdmx::dsm::Config config = config_for(block, per * processes + 8);
    config.write_ahead = ahead;
    rdmx::dsm::Space space(job, config);
    auto* grid = static_cast<unsigned char*>(rdmx::dsm::allocate(per * processes * block, block));
    std::vector<double> t;
    std::uint64_t faults_before = 0;
    for (int phase = 1; phase <= phases + 2; ++phase) {
      if (phase == 3) faults_before = rdmx::dsm::counters().write_faults;
      const std::size_t first = (rank + static_cast<std::size_t>(phase)) % processes * per;
      const auto t0 = Clock::now();
      for (std::size_t b = first; b < first + per; ++b) std::memset(grid + b * block, value(phase, b), block);
      rdmx::dsm::process_barrier();
      if (phase > 2) t.push_back(us_since(t0));
    }
    const double faults_per_phase = double(rdmx::dsm::counters().write_faults - faults_before) / phases;
    for (std::size_t b = 0; b < per * processes; ++b)
      if (grid[b * block] != value(phases + 2, b) || grid[b * block + block - 1] != value(phases + 2, b))
        wrong("write_sweep: block " + std::to_string(b));
    rdmx::dsm::process_barrier();
    const char* variant = ahead > 0 ? "write_ahead" : "block_at_a_time";
    if (job.rank() == 0) {
      line("write_sweep", variant, block, double(per)).field("metric", "us").field("value", median(t)).print();
      line("write_sweep", variant, block, double(per)).field("metric", "faults").field("value", faults_per_phase).print();
    }
  }
}

// CG's shape: a matrix nobody writes after the start and a vector each
// process rewrites its slice of every phase; after a barrier every process
// reads both whole, then a second barrier ends the phase. Run with
// signatures (the list length swept) and with the directory. With several
// worker threads per process (--rdmx-threads) the threads split each
// process's writes and reads into contiguous chunks (OpenMP's static
// schedule), so they fault on different blocks of the one cache at once, and
// meet in dsm::barrier.
template <class Line>
void read_shared(rdmx::Job& job, const Options& opt, const Line& line) {
  constexpr std::size_t block = 4096, matrix_blocks = 256, vector_blocks = 256;
  const std::size_t processes = job.size(), rank = job.rank();
  const std::uint32_t threads = job.threads_per_process();
  const int phases = std::max(10, opt.reps / 20);
  const std::size_t slice = vector_blocks / processes;
  auto value = [](int phase) { return static_cast<unsigned char>(phase % 250 + 1); };
  auto matrix_value = [](std::size_t b) { return static_cast<unsigned char>(b % 251 + 1); };
  struct Run {
    rdmx::dsm::Invalidation invalidation;
    std::uint32_t notices;
  };
  const Run runs[] = {{rdmx::dsm::Invalidation::signature, 1024}, {rdmx::dsm::Invalidation::directory, 1024},
                      {rdmx::dsm::Invalidation::signature, 0},    {rdmx::dsm::Invalidation::signature, 64},
                      {rdmx::dsm::Invalidation::signature, 128}};
  for (const Run& run : runs) {
    if (run.invalidation == rdmx::dsm::Invalidation::directory && processes > 63) continue;
    if (threads > 1 && run.notices != 1024) continue;  // the sweep is a one-thread study
    rdmx::dsm::Config config = config_for(block, matrix_blocks + vector_blocks + 8);
    config.invalidation = run.invalidation;
    config.notices = run.notices;
    rdmx::dsm::Space space(job, config);
    auto* matrix = static_cast<unsigned char*>(rdmx::dsm::allocate(matrix_blocks * block, block));
    auto* vector = static_cast<unsigned char*>(rdmx::dsm::allocate(vector_blocks * block, block));
    for (std::size_t b = rank; b < matrix_blocks; b += processes) std::memset(matrix + b * block, matrix_value(b), block);
    rdmx::dsm::process_barrier();
    std::vector<double> t;
    std::uint64_t faults_before = 0;
    std::atomic<std::uint64_t> sink{0};
    // Thread `me`'s share of blocks [first, first + count): a contiguous
    // chunk, as OpenMP's static schedule gives.
    auto share = [&](std::uint32_t me, std::size_t first, std::size_t count) {
      return std::pair{first + count * me / threads, first + count * (me + 1) / threads};
    };
    // One phase as thread `me` of `threads` does its part, `meet` the barrier.
    auto phase_of = [&](std::uint32_t me, int phase, auto&& meet) {
      for (auto [b, end] = share(me, rank * slice, slice); b < end; ++b)
        std::memset(vector + b * block, value(phase), block);
      meet();
      std::uint64_t sum = 0;
      for (auto [b, end] = share(me, 0, matrix_blocks); b < end; ++b) {
        if (matrix[b * block] != matrix_value(b)) wrong("read_shared: matrix block " + std::to_string(b));
        for (std::size_t i = 0; i < block; i += 64) sum += matrix[b * block + i];
      }
      for (auto [b, end] = share(me, 0, slice * processes); b < end; ++b) {
        if (vector[b * block] != value(phase))
          wrong("read_shared: vector block " + std::to_string(b) + " in phase " + std::to_string(phase));
        for (std::size_t i = 0; i < block; i += 64) sum += vector[b * block + i];
      }
      sink.fetch_add(sum, std::memory_order_relaxed);
      meet();
    };
    auto timed = [&](std::uint32_t me, auto&& meet) {
      for (int phase = 1; phase <= phases + 2; ++phase) {
        if (me == 0 && phase == 3) faults_before = rdmx::dsm::counters().read_faults;
        const auto t0 = Clock::now();
        phase_of(me, phase, meet);
        if (me == 0 && phase > 2) t.push_back(us_since(t0));
      }
    };
    if (threads == 1)
      timed(0, [] { rdmx::dsm::process_barrier(); });
    else
      job.run([&](rdmx::ThreadId me) { timed(me.thread, [] { rdmx::dsm::barrier(); }); });
    const double faults_per_phase = double(rdmx::dsm::counters().read_faults - faults_before) / phases;
    if (sink.load() == 42) std::printf(" ");
    if (job.rank() != 0) continue;
    const bool signature = run.invalidation == rdmx::dsm::Invalidation::signature;
    if (run.notices == 1024) {
      const char* variant = signature ? "signature" : "directory";
      line("read_shared", variant, block, 0.0).field("notices", run.notices).field("metric", "us").field("value", median(t)).print();
      line("read_shared", variant, block, 0.0).field("notices", run.notices).field("metric", "faults").field("value", faults_per_phase).print();
    }
    if (signature && threads == 1) {
      line("wn_sweep", "signature", block, 0.0).field("notices", run.notices).field("metric", "us").field("value", median(t)).print();
      line("wn_sweep", "signature", block, 0.0).field("notices", run.notices).field("metric", "faults").field("value", faults_per_phase).print();
    }
  }
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
  const std::uint32_t threads = job.threads_per_process();
  const char* tls_env = std::getenv("UCX_TLS");
  const std::string tls = tls_env != nullptr && std::string(tls_env).find("tcp") != std::string::npos ? "tcp" : "shm";
  JsonLine common;
  common.field("bench", "dsm").field("procs", job.size()).field("threads", threads).field("tls", tls);
  // A result line with the fields every case has; a case adds its own.
  auto line = [&](const char* c, const char* variant, std::size_t size, double density) {
    return common.with("case", c).field("variant", variant).field("size", size).field("density", density)
        .field("mpi_pml", pml)
        .field("placement", rdmx::bench::cores_text() + (job.oversubscribed() ? ", oversubscribed" : ""));
  };
  auto emit = [&](const char* c, const char* variant, std::size_t size, double density, const char* metric, double v) {
    if (me0) line(c, variant, size, density).field("metric", metric).field("value", v).print();
  };

  // With several worker threads: only the case that uses them (the others
  // measure one thread's operations, the one-thread run has them).
  if (threads > 1) {
    if (me0) std::fprintf(stderr, "rdmx-bench-dsm: %u threads per process: the fault floor and read_shared only\n", threads);
    const double floor = mprotect_fault(job, opt.reps);
    if (me0) emit("floor", "mprotect_fault", 4096, 0, "us", floor);
    job.barrier();
    read_shared(job, opt, line);
    MPI_Finalize();
    return 0;
  }

  // Before any Space: the DSM's handler is not in the way yet.
  if (me0) emit("floor", "mprotect_fault", 4096, 0, "us", mprotect_fault(job, opt.reps));
  job.barrier();

  for (std::size_t block : {std::size_t{4096}, std::size_t{32768}}) {
    rdmx::dsm::Config config = rdmx::dsm::Config::from_env();
    config.block_bytes = block;
    config.heap_bytes = rdmx::bench::round_up(std::size_t(2 * opt.reps + 8) * block, block);
    config.read_ahead = 0;  // these cases time one miss or write fault each (their blocks are in order)
    config.write_ahead = 0;
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
    rdmx::dsm::process_barrier();

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
    rdmx::dsm::process_barrier();
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
        rdmx::dsm::process_barrier();
        t.push_back(us_since(t0));
      }
      emit("barrier", "dsm", block, 0, "us", median(t));
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
        rdmx::dsm::process_barrier();
        t.push_back(us_since(t0));
      }
      emit("barrier", policy == rdmx::dsm::HomePolicy::fixed ? "fixed_home" : "floating_home", block, density, "us",
           median(t));
    }
    if (me0)
      std::fprintf(stderr, "rdmx-bench-dsm: %s home: %s\n", rdmx::dsm::to_string(policy),
                   rdmx::dsm::to_string(rdmx::dsm::counters()).c_str());
  }
  full_signature_barrier(job, opt, line);
  mutexes(job, opt, line);
  fig1(job, opt, line);
  migratory(job, opt, line);
  write_sweep(job, opt, line);
  read_shared(job, opt, line);
  MPI_Finalize();
  return 0;
}
