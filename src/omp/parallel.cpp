// Parallel regions, barriers, the omp_* queries and fatal errors.
#include <unistd.h>

#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>

#include "rdmx/core/log.hpp"
#include "rdmx/dsm/fence.hpp"
#include "runtime.hpp"

namespace rdmx::omp {

namespace {
std::atomic<Runtime*> current{nullptr};

// After a region the master's stack blocks that other processes wrote are
// invalid, and the ones it wrote itself are read-only until written again.
// Fault the few blocks around the stack pointer in now, from here: later a
// fault there could come from inside malloc (whose lock the fault path may
// need) or from a system call writing to a stack buffer (EFAULT, no fault).
__attribute__((noinline)) void warm_stack() {
  const long page = ::sysconf(_SC_PAGESIZE);
  auto* sp = static_cast<volatile char*>(__builtin_frame_address(0));
  auto here = reinterpret_cast<std::uintptr_t>(sp) - 256;  // below every live byte of this frame
  Runtime* rt = runtime();
  for (int i = 0; i < 3; ++i) {
    auto* p = reinterpret_cast<volatile char*>(here / page * page - std::uintptr_t(i) * page);
    if (rt == nullptr || reinterpret_cast<std::byte*>(const_cast<char*>(p)) < rt->heap.data()) break;
    *p = *p;  // dead memory below the stack pointer: only this thread runs now
  }
}
}  // namespace

thread_local Team team;
thread_local bool in_job_region = false;
namespace {
thread_local std::uint32_t job_thread = 0;  // this thread's number in the job-wide region it is in
}  // namespace

Runtime* runtime() noexcept { return current.load(std::memory_order_acquire); }
void set_runtime(Runtime* rt) noexcept { current.store(rt, std::memory_order_release); }
Runtime& require(const char* what) {
  Runtime* rt = runtime();
  if (rt == nullptr) fatal("%s called outside rdmx_omp's job (before main or after it returned)", what);
  return *rt;
}

void fatal(const char* format, ...) {
  char text[512];
  va_list args;
  va_start(args, format);
  std::vsnprintf(text, sizeof text, format, args);
  va_end(args);
  std::fflush(nullptr);
  rdmx::log(LogLevel::error, "omp: %s", text);
  std::_Exit(1);
}

void unsupported(const char* construct) {
  fatal("%s is not supported by rdmx_omp (docs/omp.md, \"Supported\"); the job stops", construct);
}

void team_barrier() {
  if (!team.shared) return;
  runtime()->barriers.fetch_add(1, std::memory_order_relaxed);
  off_heap([] { dsm::thread_barrier(); });
}

void join(const Region& region, std::uint32_t global_thread) {
  Runtime& rt = *runtime();
  rt.joins.fetch_add(1, std::memory_order_relaxed);
  team = Team{global_thread, rt.total, true, 1, team.constructs, {}};
  job_thread = global_thread;
  in_job_region = true;
  if (global_thread != 0) receive_threadprivate(region);
  if (region.loop.schedule != Schedule::none) start_loop(region.loop);
  region.fn(region.data);
  in_job_region = false;
  const std::uint64_t constructs = team.constructs;
  team = Team{};
  team.constructs = constructs;
  off_heap([] { dsm::thread_barrier(); });
}

void serve_team(std::uint32_t global_thread) {
  Runtime& rt = *runtime();
  for (;;) {
    dsm::thread_barrier();
    const Region region = *rt.region;
    if (region.exit != 0) return;
    join(region, global_thread);
  }
}

void parallel(void (*fn)(void*), void* data, unsigned num_threads, const LoopSpec& loop) {
  Runtime& rt = require("GOMP_parallel");
  const unsigned wanted = num_threads != 0 ? num_threads : rt.max_threads.load(std::memory_order_relaxed);
  if (team.level > 0 || wanted == 1) {
    // Nested in a region, or one thread asked for: a team of this thread
    // alone (OpenMP's inactive region), work shares handed out locally.
    const Team outer = team;
    team = Team{0, 1, false, outer.level + 1, outer.constructs, {}};
    if (loop.schedule != Schedule::none) start_loop(loop);
    fn(data);
    team = outer;
    return;
  }
  if (wanted != rt.total)
    fatal("a parallel region asks for %u threads: rdmx_omp runs a region on all %u threads of the job "
          "(%u processes x %u) or on one",
          wanted, rt.total, rt.processes, rt.threads);
  rt.region->fn = fn;
  rt.region->data = data;
  rt.region->loop = loop;
  ++rt.region->number;
  publish_threadprivate(*rt.region);
  off_heap([] { dsm::thread_barrier(); });
  const Region region = *rt.region;
  join(region, 0);
  warm_stack();
}

}  // namespace rdmx::omp

using namespace rdmx::omp;

extern "C" {

void GOMP_parallel(void (*fn)(void*), void* data, unsigned num_threads, unsigned) {
  parallel(fn, data, num_threads, LoopSpec{});
}

void GOMP_barrier() { team_barrier(); }

int omp_get_thread_num() { return static_cast<int>(team.num); }
int omp_get_num_threads() { return static_cast<int>(team.size); }
int omp_get_max_threads() {
  Runtime* rt = runtime();
  return rt == nullptr ? 1 : static_cast<int>(rt->max_threads.load(std::memory_order_relaxed));
}
int omp_get_num_procs() {
  Runtime* rt = runtime();
  return rt == nullptr ? 1 : static_cast<int>(rt->total);
}
// Honoured when it names all the job's threads or one (docs/omp.md); any
// other count fails at the next parallel region, naming it.
void omp_set_num_threads(int n) {
  if (n < 1) fatal("omp_set_num_threads(%d): the count must be positive", n);
  require("omp_set_num_threads").max_threads.store(static_cast<std::uint32_t>(n), std::memory_order_relaxed);
}
// The one region that can be active (more than one thread) is the job-wide
// one, at level 1; regions nested in it are teams of one.
int omp_get_active_level() {
  const Runtime* rt = runtime();
  return in_job_region && rt != nullptr && rt->total > 1 ? 1 : 0;
}
int omp_in_parallel() { return omp_get_active_level(); }
int omp_get_level() { return static_cast<int>(team.level); }
int omp_get_team_size(int level) {
  if (level < 0 || level > static_cast<int>(team.level)) return -1;
  const Runtime* rt = runtime();
  return level == 1 && in_job_region && rt != nullptr ? static_cast<int>(rt->total) : 1;
}
int omp_get_ancestor_thread_num(int level) {
  if (level < 0 || level > static_cast<int>(team.level)) return -1;
  return level == 1 && in_job_region ? static_cast<int>(job_thread) : 0;
}
int omp_get_dynamic() { return 0; }
void omp_set_dynamic(int) {}
int omp_get_nested() { return 0; }
void omp_set_nested(int) {}
int omp_get_thread_limit() { return omp_get_num_procs(); }

double omp_get_wtime() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
double omp_get_wtick() { return 1e-9; }

}  // extern "C"
