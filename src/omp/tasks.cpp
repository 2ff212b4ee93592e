// Tasks, run undeferred: the thread that meets a `task` runs it at once,
// to its end, as OpenMP lets any task run (libgomp does the same for a task
// whose if clause is false). Program order then satisfies every depend
// clause, a `taskwait` or a `taskgroup`'s end finds all children done, and
// a `taskloop` is one task over all its iterations. Correct for every
// program that does not need two tasks to run at once (a task that waits
// for a sibling spins for ever); what tasks would add, parallelism among
// them, they do not: a program's tasks run on the threads that create
// them, so `single` + tasks runs on one thread. Detached tasks and task
// reductions stop the job, naming them.
#include <cstdint>
#include <cstring>
#include <vector>

#include "runtime.hpp"

namespace rdmx::omp {
namespace {

// GCC's flags (gcc/omp-general.h, GOMP_TASK_FLAG_*).
constexpr unsigned flag_up = 1u << 8, flag_reduction = 1u << 12, flag_detach = 1u << 18;

// The task's own copy of its data, aligned as asked: what cpyfn (firstprivate
// constructors) or a byte copy makes of the creator's block.
struct TaskData {
  std::vector<unsigned char> bytes;
  void* at = nullptr;
  TaskData(void* data, void (*cpyfn)(void*, void*), long size, long align) {
    const auto a = static_cast<std::size_t>(align > 0 ? align : 1);
    bytes.resize(static_cast<std::size_t>(size > 0 ? size : 0) + a);
    const auto raw = reinterpret_cast<std::uintptr_t>(bytes.data());
    at = reinterpret_cast<void*>((raw + a - 1) / a * a);
    if (cpyfn != nullptr)
      cpyfn(at, data);
    else if (size > 0)
      std::memcpy(at, data, static_cast<std::size_t>(size));
  }
};

void check_flags(unsigned flags, const char* construct) {
  if ((flags & flag_detach) != 0) unsupported("task detach");
  if ((flags & flag_reduction) != 0) unsupported(construct);
}

// A taskloop over [start, end), as one task: the outlined body reads its
// bounds from the first two words of its data, and steps itself.
template <class T>
void taskloop(void (*fn)(void*), void* data, void (*cpyfn)(void*, void*), long size, long align, unsigned flags,
              T start, T end) {
  require("taskloop");
  check_flags(flags, "taskloop reduction");
  const bool up = (flags & flag_up) != 0;
  if (up ? start >= end : start <= end) return;  // no iterations
  TaskData copy(data, cpyfn, size, align);
  static_cast<T*>(copy.at)[0] = start;
  static_cast<T*>(copy.at)[1] = end;
  fn(copy.at);
}

}  // namespace
}  // namespace rdmx::omp

using namespace rdmx::omp;

extern "C" {

void GOMP_task(void (*fn)(void*), void* data, void (*cpyfn)(void*, void*), long size, long align, bool /*if*/,
               unsigned flags, void** /*depend*/, int /*priority*/, void* /*detach*/) {
  require("task");
  check_flags(flags, "task reduction");
  if (cpyfn == nullptr) {
    // Without constructors to run, the creator's block is the task's as
    // long as the task runs now: libgomp passes it as it is, too.
    fn(data);
    return;
  }
  TaskData copy(data, cpyfn, size, align);
  fn(copy.at);
}

void GOMP_taskloop(void (*fn)(void*), void* data, void (*cpyfn)(void*, void*), long size, long align, unsigned flags,
                   unsigned long /*num_tasks*/, int /*priority*/, long start, long end, long /*step*/) {
  taskloop<long>(fn, data, cpyfn, size, align, flags, start, end);
}

void GOMP_taskloop_ull(void (*fn)(void*), void* data, void (*cpyfn)(void*, void*), long size, long align,
                       unsigned flags, unsigned long /*num_tasks*/, int /*priority*/, unsigned long long start,
                       unsigned long long end, unsigned long long /*step*/) {
  taskloop<unsigned long long>(fn, data, cpyfn, size, align, flags, start, end);
}

// Every task this thread created has run to its end already.
void GOMP_taskwait() { require("taskwait"); }
void GOMP_taskwait_depend(void** /*depend*/) { require("taskwait depend"); }
void GOMP_taskyield() {}
void GOMP_taskgroup_start() { require("taskgroup"); }
void GOMP_taskgroup_end() { require("taskgroup"); }

int omp_in_final() { return 0; }

}  // extern "C"
