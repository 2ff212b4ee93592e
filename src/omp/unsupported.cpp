// Entry points of constructs rdmx_omp does not run: each stops the job with
// a message naming the construct, rather than leaving the symbol to libgomp
// (which must not be linked) or to a link error far from the cause.
#include "runtime.hpp"

using rdmx::omp::unsupported;

extern "C" {

#define RDMX_OMP_UNSUPPORTED(symbol, construct) \
  void symbol() { unsupported(construct); }

RDMX_OMP_UNSUPPORTED(GOMP_task, "task")
RDMX_OMP_UNSUPPORTED(GOMP_taskloop, "taskloop")
RDMX_OMP_UNSUPPORTED(GOMP_taskloop_ull, "taskloop")
RDMX_OMP_UNSUPPORTED(GOMP_taskwait, "taskwait")
RDMX_OMP_UNSUPPORTED(GOMP_taskwait_depend, "taskwait depend")
RDMX_OMP_UNSUPPORTED(GOMP_taskyield, "taskyield")
RDMX_OMP_UNSUPPORTED(GOMP_taskgroup_start, "taskgroup")
RDMX_OMP_UNSUPPORTED(GOMP_taskgroup_end, "taskgroup")
RDMX_OMP_UNSUPPORTED(GOMP_ordered_start, "ordered")
RDMX_OMP_UNSUPPORTED(GOMP_ordered_end, "ordered")
RDMX_OMP_UNSUPPORTED(GOMP_doacross_post, "ordered depend")
RDMX_OMP_UNSUPPORTED(GOMP_doacross_wait, "ordered depend")
RDMX_OMP_UNSUPPORTED(GOMP_cancel, "cancel")
RDMX_OMP_UNSUPPORTED(GOMP_cancellation_point, "cancellation point")
RDMX_OMP_UNSUPPORTED(GOMP_barrier_cancel, "cancel")
RDMX_OMP_UNSUPPORTED(GOMP_loop_end_cancel, "cancel")
RDMX_OMP_UNSUPPORTED(GOMP_sections_end_cancel, "cancel")
RDMX_OMP_UNSUPPORTED(GOMP_sections2_start, "sections with task reductions")
RDMX_OMP_UNSUPPORTED(GOMP_loop_start, "a loop with task reductions or lastprivate(conditional)")
RDMX_OMP_UNSUPPORTED(GOMP_loop_ordered_start, "for ordered")
RDMX_OMP_UNSUPPORTED(GOMP_loop_doacross_start, "for ordered(n)")
RDMX_OMP_UNSUPPORTED(GOMP_loop_ordered_static_start, "for ordered")
RDMX_OMP_UNSUPPORTED(GOMP_loop_ordered_dynamic_start, "for ordered")
RDMX_OMP_UNSUPPORTED(GOMP_loop_ordered_guided_start, "for ordered")
RDMX_OMP_UNSUPPORTED(GOMP_loop_ordered_runtime_start, "for ordered")
RDMX_OMP_UNSUPPORTED(GOMP_loop_ull_start, "a loop with task reductions or lastprivate(conditional)")
RDMX_OMP_UNSUPPORTED(GOMP_loop_ull_ordered_static_start, "for ordered")
RDMX_OMP_UNSUPPORTED(GOMP_loop_ull_ordered_dynamic_start, "for ordered")
RDMX_OMP_UNSUPPORTED(GOMP_loop_ull_ordered_guided_start, "for ordered")
RDMX_OMP_UNSUPPORTED(GOMP_loop_ull_ordered_runtime_start, "for ordered")
RDMX_OMP_UNSUPPORTED(GOMP_loop_ull_doacross_start, "for ordered(n)")
RDMX_OMP_UNSUPPORTED(GOMP_parallel_reductions, "a parallel region with task reductions")
RDMX_OMP_UNSUPPORTED(GOMP_teams, "teams")
RDMX_OMP_UNSUPPORTED(GOMP_teams4, "teams")
RDMX_OMP_UNSUPPORTED(GOMP_teams_reg, "teams")
RDMX_OMP_UNSUPPORTED(GOMP_target_ext, "target")
RDMX_OMP_UNSUPPORTED(GOMP_target_data_ext, "target data")
RDMX_OMP_UNSUPPORTED(GOMP_target_update_ext, "target update")
RDMX_OMP_UNSUPPORTED(GOMP_target_enter_exit_data, "target enter/exit data")

#undef RDMX_OMP_UNSUPPORTED

}  // extern "C"
