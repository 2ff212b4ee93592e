// rdmx_omp's state: one Runtime per process, set up by __wrap_main (main.cpp),
// and one Team per thread, the OpenMP view of the region it runs in.
//
// A parallel region runs on every worker thread of every process (the team);
// thread p*T + t of the team is worker thread t of process p, and thread 0,
// the master, is the one running the program's main on process 0. The other
// threads wait in a team loop: a DSM barrier, then the Region the master
// published in the shared heap before the barrier.
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <span>
#include <type_traits>
#include <utility>
#include <vector>

#include "rdmx/transfer/remote_locator.hpp"

namespace rdmx {
class Job;
}

namespace rdmx::omp {

enum class Schedule : std::uint32_t { none, fixed, dynamic, guided };  // fixed: OpenMP's static

// A loop's iteration space and how it is handed out. A loop over unsigned
// long long keeps its bounds' bits in start, end and incr, with `up` its
// direction (a downward loop's increment is negative, as two's complement).
struct LoopSpec {
  Schedule schedule = Schedule::none;
  long start = 0, end = 0, incr = 1, chunk = 0;
  bool ull = false, up = true;
};

// What the master publishes in the shared heap before a region's first barrier.
struct Region {
  void (*fn)(void*) = nullptr;
  void* data = nullptr;
  LoopSpec loop;       // a combined `parallel for` starts this work share first
  std::uint32_t exit = 0;  // the program is over: leave the team loop
  int status = 0;          // its exit status
  std::uint64_t number = 0;      // regions the master has started
  void* threadprivate = nullptr;  // the master's threadprivate block as of this region's start
  void* copyprivate = nullptr;    // single copyprivate: the master's values, on its stack (loop.cpp)
  // The team: the job's threads 0 .. size-1. The others wait out the region
  // in its barriers (parallel.cpp): before the last one the master writes
  // the work-share counts they take over, then the region's number and that
  // barrier's (end_mark, one word).
  std::uint32_t size = 0;
  std::uint64_t constructs = 0, ordered_loops = 0;
  std::uint64_t end_mark = 0;
};

struct Runtime {
  std::uint32_t processes = 0, threads = 0, total = 0;
  std::span<std::byte> heap;  // the DSM heap: atomics there are serialized job-wide
  Region* region = nullptr;   // in the heap
  // Work-share slots on process 0 (two words each, loop.cpp), one per
  // construct modulo `slots`, then the ordered loops' turn word.
  RemoteLocator ring;
  std::uint32_t slots = 0;
  std::uint32_t ring_team = 0;  // the team size the ring's finished words count (loop.cpp)
  std::uint32_t mutexes = 0;
  std::atomic<std::uint32_t> max_threads{1};  // nthreads-var (omp_set_num_threads)
  LoopSpec runtime_schedule;                  // OMP_SCHEDULE, for schedule(runtime)
  // For RDMX_OMP_STATS: regions joined and team barriers met, by all threads of this process.
  std::atomic<std::uint64_t> joins{0}, barriers{0};
};

// The runtime, once __wrap_main has built it; nullptr before and after.
Runtime* runtime() noexcept;
void set_runtime(Runtime* rt) noexcept;
// The runtime, or a fatal error naming `what` (a GOMP_* call before or after the job).
Runtime& require(const char* what);

// The loop a thread works on (one at a time: loops do not nest in one region).
struct Loop {
  LoopSpec spec;
  std::uint64_t iterations = 0;
  std::uint64_t construct = 0;  // which work share of the job (its word: construct % slots)
  std::uint64_t guess = 0;      // the word's value as last seen (a CAS starts from it)
  bool guessed = false;
  std::uint64_t taken = 0;  // fixed schedule: chunks this thread took; one thread: iterations handed out
  bool finished = false;    // counted in its slot's finished word (loop.cpp)
  // `for ordered` (loop.cpp): which ordered loop of the job (from 1), and
  // the chunk this thread runs, [first, last), whether it holds the turn.
  bool ordered = false;
  std::uint64_t ordinal = 0, first = 0, last = 0;
  bool in_chunk = false, has_turn = false;
};

struct Team {
  std::uint32_t num = 0;   // omp_get_thread_num
  std::uint32_t size = 1;  // omp_get_num_threads
  bool shared = false;     // a team of the whole job (not one thread): work shares use the ring
  std::uint32_t level = 0;
  std::uint64_t constructs = 0;     // work-sharing constructs this thread has met in job-wide teams
  std::uint64_t ordered_loops = 0;  // of them, `for ordered` loops
  std::uint64_t barriers = 0;       // team barriers met in the current job-wide region
  Loop loop;
};
extern thread_local Team team;
// True while this thread runs inside a job-wide region (also in regions nested in it).
extern thread_local bool in_job_region;

// Runs a parallel region (GOMP_parallel and the combined forms).
void parallel(void (*fn)(void*), void* data, unsigned num_threads, const LoopSpec& loop);
// The team loop of every thread but the master; returns when the program ends.
void serve_team(std::uint32_t global_thread);
// Joins the region the master published (master included).
void join(const Region& region, std::uint32_t global_thread);

// Runs fn off the shared heap: on the master, whose stack is in the heap,
// a DSM synchronization would fault on that stack while it holds the lock of
// one of its blocks (a release merging it, an acquire dropping it), so the
// master's synchronizations run on a private stack. Elsewhere: a plain call.
void off_heap(void (*fn)(void*), void* arg);
template <class F>
void off_heap(F&& f) {
  off_heap([](void* p) { (*static_cast<std::remove_reference_t<F>*>(p))(); }, &f);
}

// The master's threadprivate variables for copyin (threadprivate.cpp):
// set up once the shared heap is (process 0 fills in region.threadprivate),
// published by the master as a region starts, received by every other
// process before its threads run the region.
void setup_threadprivate(Job& job, Region& region);
void publish_threadprivate(Region& region);
void receive_threadprivate(const Region& region);

// The program's heap (heap.cpp): the shared blocks come from `pool`.
void reset_shared_heap(std::span<std::byte> pool);
// A zeroed shared block for the runtime's own use (the master's, outside
// regions, or before the job runs); nullptr when the pool is exhausted.
void* shared_block(std::size_t bytes);
// The program's private heap blocks still live from before main (address,
// bytes); from this call on, none is counted.
struct PremainBlocks {
  std::vector<std::pair<std::uintptr_t, std::size_t>> blocks;
  bool overflow = false;  // more than were counted
};
PremainBlocks end_premain();

// The program's globals (globals.cpp): its .data and .bss, which
// rdmx_omp_object moved to sections rdmx_shared_data and rdmx_shared.
struct Globals {
  std::byte* begin = nullptr;  // [begin, end), block-aligned; initialized data up to data_end
  std::byte* data_end = nullptr;
  std::byte* end = nullptr;
  std::size_t bytes() const { return static_cast<std::size_t>(end - begin); }
};
Globals program_globals();
// The globals' bytes as start-up left them: the pages that are not zero.
struct Image {
  std::vector<std::pair<std::size_t, std::vector<std::byte>>> pages;  // offset, contents
};
// Saves the image (every process: each refuses the same program alike). A
// global that points into a block of `premain`, private and different on
// every process, is refused.
Image save_globals(const Globals& globals, const PremainBlocks& premain);
// Unmaps the globals, whose range the DSM heap takes.
void release_globals(const Globals& globals);
// Process 0 writes its image into the DSM, before the first barrier.
void publish_globals(const Globals& globals, const Image& image);
// After the job: zeroed private memory where the globals were, for code that
// still touches them as the process exits (libc's exit, say).
void restore_globals(const Globals& globals);

// The program's own exit handlers (exit_handlers.cpp): atexit and the
// destructors of its globals, which rdmx_omp_object routes here. The master
// runs them when the program ends, while the DSM is up; other processes
// never ran main, and drop theirs.
void run_exit_handlers();

// True on the master while it runs the program (on its stack in the DSM
// heap), not in the DSM's signal handler or on a private stack (off_heap).
bool on_master_stack_now() noexcept;

// The DSM mutexes (sync.cpp): atomics and flushes synchronize through the
// first, unnamed critical sections through the second; named ones and
// OpenMP locks share the rest.
inline constexpr std::uint32_t atomic_mutex = 0, critical_mutex = 1, first_named = 2;

// Whether the program contains a flush: rdmx_omp_object defines this
// symbol in every object whose fence it made a call (weak, so absent from
// a program that has none). Such a program may read data after seeing a
// flag with no flush between (NPB LU does): its space makes misses causal
// (dsm::Config::causal_mutex).
bool program_flushes() noexcept;

// The DSM mutexes that named critical sections and OpenMP locks share
// (sync.cpp): `object`'s address, the same in every process (the program is
// not position independent, and shared objects live in the DSM heap),
// hashed onto one of them. A thread that would take one it already holds
// for another object stops the job with a message naming both.
void lock_named(const void* object, const char* what);
bool try_lock_named(const void* object, const char* what);
void unlock_named(const void* object);
// The object this thread holds `object`'s mutex for, or nullptr.
const void* held_for(const void* object);

void team_barrier();
// A flush of all memory (sync.cpp): on the DSM an acquire and a release
// through the atomics' mutex, in a job-wide region of more than one process.
extern "C" void rdmx_omp_flush();
// `ordered`: a `for ordered` loop, whose chunks take turns (loop.cpp).
void start_loop(const LoopSpec& spec, bool ordered = false);
// Between regions, on the master: makes the work-share ring count `size`
// threads as a construct's whole team (loop.cpp).
void size_work_shares(std::uint32_t size);
bool next_chunk(long* istart, long* iend);
bool next_chunk_ull(unsigned long long* istart, unsigned long long* iend);
bool single();

// Ends this process: stdout flushed, the message logged as an error, exit
// status 1. Peers waiting for it see a failed process and end too.
[[noreturn]] void fatal(const char* format, ...) __attribute__((format(printf, 1, 2)));
[[noreturn]] void unsupported(const char* construct);

}  // namespace rdmx::omp
