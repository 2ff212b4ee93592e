// Parallel regions, barriers, the omp_* queries and fatal errors.
#include <unistd.h>

#include <algorithm>
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
thread_local std::uint32_t job_team = 1;    // that region's team size
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
  ++team.barriers;
  off_heap([] { dsm::barrier(); });
}

namespace {
// The mark of region `number`'s last barrier, the team's `barrier`-th.
std::uint64_t end_mark(std::uint64_t number, std::uint64_t barrier) {
  if (barrier >= std::uint64_t{1} << 24) fatal("a region of part of the job met more than 2^24 barriers");
  return number << 24 | barrier;
}

// A thread outside a region's team: the DSM's barriers are the whole job's,
// so it meets each of the team's barriers until the one the master marked
// last. The mark is written before that barrier, and a thread of the
// master's process may read it after an earlier one, or after the last one
// the master's next region may be under way: it ends at the barrier whose
// number the mark names, whatever the master wrote since. Then it takes
// over the team's count of work-sharing constructs, as if it had met them.
void wait_out(const Region& region) {
  Runtime& rt = *runtime();
  for (std::uint64_t barrier = 1;; ++barrier) {
    dsm::barrier();
    if (std::atomic_ref<std::uint64_t>(rt.region->end_mark).load(std::memory_order_acquire) ==
        end_mark(region.number, barrier))
      break;
  }
  team.constructs = rt.region->constructs;
  team.ordered_loops = rt.region->ordered_loops;
}
}  // namespace

void join(const Region& region, std::uint32_t global_thread) {
  Runtime& rt = *runtime();
  if (global_thread >= region.size) {
    wait_out(region);
    return;
  }
  rt.joins.fetch_add(1, std::memory_order_relaxed);
  team = Team{global_thread, region.size, true, 1, team.constructs, team.ordered_loops, 0, {}};
  job_thread = global_thread;
  job_team = region.size;
  in_job_region = true;
  if (global_thread != 0) receive_threadprivate(region);
  if (region.loop.schedule != Schedule::none) start_loop(region.loop);
  region.fn(region.data);
  in_job_region = false;
  if (global_thread == 0 && region.size < rt.total) {
    rt.region->constructs = team.constructs;
    rt.region->ordered_loops = team.ordered_loops;
    std::atomic_ref<std::uint64_t>(rt.region->end_mark)
        .store(end_mark(region.number, team.barriers + 1), std::memory_order_release);
  }
  const Team done = team;
  team = Team{};
  team.constructs = done.constructs;
  team.ordered_loops = done.ordered_loops;
  off_heap([] { dsm::barrier(); });
}

void serve_team(std::uint32_t global_thread) {
  Runtime& rt = *runtime();
  for (;;) {
    dsm::barrier();
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
    team = Team{0, 1, false, outer.level + 1, outer.constructs, outer.ordered_loops, 0, {}};
    if (loop.schedule != Schedule::none) start_loop(loop);
    fn(data);
    team = outer;
    return;
  }
  // The job's threads are the thread limit (omp_get_thread_limit): a team
  // of more gets them all, as OpenMP lets an implementation do.
  const std::uint32_t size = std::min<std::uint32_t>(wanted, rt.total);
  size_work_shares(size);
  rt.region->fn = fn;
  rt.region->data = data;
  rt.region->loop = loop;
  rt.region->size = size;
  ++rt.region->number;
  publish_threadprivate(*rt.region);
  off_heap([] { dsm::barrier(); });
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
// The next regions' team size; above the job's threads, all of them.
void omp_set_num_threads(int n) {
  if (n < 1) fatal("omp_set_num_threads(%d): the count must be positive", n);
  require("omp_set_num_threads").max_threads.store(static_cast<std::uint32_t>(n), std::memory_order_relaxed);
}
// The one region that can be active (more than one thread) is the job-wide
// one, at level 1; regions nested in it are teams of one.
int omp_get_active_level() {
  const Runtime* rt = runtime();
  return in_job_region && rt != nullptr && job_team > 1 ? 1 : 0;
}
int omp_in_parallel() { return omp_get_active_level(); }
int omp_get_level() { return static_cast<int>(team.level); }
int omp_get_team_size(int level) {
  if (level < 0 || level > static_cast<int>(team.level)) return -1;
  const Runtime* rt = runtime();
  return level == 1 && in_job_region && rt != nullptr ? static_cast<int>(job_team) : 1;
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
