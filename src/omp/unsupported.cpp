// Entry points of constructs rdmx_omp does not run: each stops the job with
// a message naming the construct, rather than leaving the symbol to libgomp
// (which must not be linked) or to a link error far from the cause.
#include "runtime.hpp"

using rdmx::omp::unsupported;

extern "C" {

#define RDMX_OMP_UNSUPPORTED(symbol, construct) \
  void symbol() { unsupported(construct); }

RDMX_OMP_UNSUPPORTED(GOMP_taskgroup_reduction_register, "task reduction")
RDMX_OMP_UNSUPPORTED(GOMP_taskgroup_reduction_unregister, "task reduction")
RDMX_OMP_UNSUPPORTED(GOMP_task_reduction_remap, "task reduction")
RDMX_OMP_UNSUPPORTED(GOMP_workshare_task_reduction_unregister, "task reduction")
RDMX_OMP_UNSUPPORTED(GOMP_doacross_post, "ordered depend")
RDMX_OMP_UNSUPPORTED(GOMP_doacross_wait, "ordered depend")
RDMX_OMP_UNSUPPORTED(GOMP_cancel, "cancel")
RDMX_OMP_UNSUPPORTED(GOMP_cancellation_point, "cancellation point")
RDMX_OMP_UNSUPPORTED(GOMP_barrier_cancel, "cancel")
RDMX_OMP_UNSUPPORTED(GOMP_loop_end_cancel, "cancel")
RDMX_OMP_UNSUPPORTED(GOMP_sections_end_cancel, "cancel")
RDMX_OMP_UNSUPPORTED(GOMP_sections2_start, "sections with task reductions")
RDMX_OMP_UNSUPPORTED(GOMP_loop_start, "a loop with task reductions or lastprivate(conditional)")
RDMX_OMP_UNSUPPORTED(GOMP_loop_ordered_start, "for ordered with task reductions or lastprivate(conditional)")
RDMX_OMP_UNSUPPORTED(GOMP_loop_doacross_start, "for ordered(n)")
RDMX_OMP_UNSUPPORTED(GOMP_loop_ull_start, "a loop with task reductions or lastprivate(conditional)")
RDMX_OMP_UNSUPPORTED(GOMP_loop_ull_doacross_start, "for ordered(n)")
RDMX_OMP_UNSUPPORTED(GOMP_parallel_reductions, "a parallel region with task reductions")
RDMX_OMP_UNSUPPORTED(GOMP_teams, "teams")
RDMX_OMP_UNSUPPORTED(GOMP_teams4, "teams")
RDMX_OMP_UNSUPPORTED(GOMP_teams_reg, "teams")
RDMX_OMP_UNSUPPORTED(GOMP_target_ext, "target")
RDMX_OMP_UNSUPPORTED(GOMP_target_data_ext, "target data")
RDMX_OMP_UNSUPPORTED(GOMP_target_update_ext, "target update")
RDMX_OMP_UNSUPPORTED(GOMP_target_enter_exit_data, "target enter/exit data")
RDMX_OMP_UNSUPPORTED(GOMP_loop_ull_ordered_start, "for ordered with task reductions or lastprivate(conditional)")
RDMX_OMP_UNSUPPORTED(GOMP_loop_doacross_static_start, "for ordered(n)")
RDMX_OMP_UNSUPPORTED(GOMP_loop_doacross_dynamic_start, "for ordered(n)")
RDMX_OMP_UNSUPPORTED(GOMP_loop_doacross_guided_start, "for ordered(n)")
RDMX_OMP_UNSUPPORTED(GOMP_loop_doacross_runtime_start, "for ordered(n)")
RDMX_OMP_UNSUPPORTED(GOMP_loop_ull_doacross_static_start, "for ordered(n)")
RDMX_OMP_UNSUPPORTED(GOMP_loop_ull_doacross_dynamic_start, "for ordered(n)")
RDMX_OMP_UNSUPPORTED(GOMP_loop_ull_doacross_guided_start, "for ordered(n)")
RDMX_OMP_UNSUPPORTED(GOMP_loop_ull_doacross_runtime_start, "for ordered(n)")
RDMX_OMP_UNSUPPORTED(GOMP_doacross_ull_post, "ordered depend")
RDMX_OMP_UNSUPPORTED(GOMP_doacross_ull_wait, "ordered depend")
RDMX_OMP_UNSUPPORTED(GOMP_scope_start, "scope with reductions")
RDMX_OMP_UNSUPPORTED(GOMP_alloc, "allocate")
RDMX_OMP_UNSUPPORTED(GOMP_free, "allocate")
RDMX_OMP_UNSUPPORTED(GOMP_error, "error")
RDMX_OMP_UNSUPPORTED(GOMP_warning, "error")
// GCC's ABI before 4.9, which GCC no longer emits.
RDMX_OMP_UNSUPPORTED(GOMP_parallel_start, "parallel (GCC's ABI before 4.9)")
RDMX_OMP_UNSUPPORTED(GOMP_parallel_end, "parallel (GCC's ABI before 4.9)")
RDMX_OMP_UNSUPPORTED(GOMP_parallel_loop_static_start, "parallel for (GCC's ABI before 4.9)")
RDMX_OMP_UNSUPPORTED(GOMP_parallel_loop_dynamic_start, "parallel for (GCC's ABI before 4.9)")
RDMX_OMP_UNSUPPORTED(GOMP_parallel_loop_guided_start, "parallel for (GCC's ABI before 4.9)")
RDMX_OMP_UNSUPPORTED(GOMP_parallel_loop_runtime_start, "parallel for (GCC's ABI before 4.9)")
RDMX_OMP_UNSUPPORTED(GOMP_parallel_sections_start, "parallel sections (GCC's ABI before 4.9)")
RDMX_OMP_UNSUPPORTED(GOMP_target, "target")
RDMX_OMP_UNSUPPORTED(GOMP_target_data, "target data")
RDMX_OMP_UNSUPPORTED(GOMP_target_end_data, "target data")
RDMX_OMP_UNSUPPORTED(GOMP_target_update, "target update")
RDMX_OMP_UNSUPPORTED(GOMP_offload_register, "offloading")
RDMX_OMP_UNSUPPORTED(GOMP_offload_register_ver, "offloading")
RDMX_OMP_UNSUPPORTED(GOMP_offload_unregister, "offloading")
RDMX_OMP_UNSUPPORTED(GOMP_offload_unregister_ver, "offloading")

// omp_* routines that would change what only the master's process would
// see (the runtime schedule is read by every process at start-up) or that
// need what rdmx_omp has not: memory allocators, affinity, events, devices.
RDMX_OMP_UNSUPPORTED(omp_set_schedule, "omp_set_schedule (set OMP_SCHEDULE instead)")
RDMX_OMP_UNSUPPORTED(omp_alloc, "omp_alloc")
RDMX_OMP_UNSUPPORTED(omp_aligned_alloc, "omp_aligned_alloc")
RDMX_OMP_UNSUPPORTED(omp_calloc, "omp_calloc")
RDMX_OMP_UNSUPPORTED(omp_aligned_calloc, "omp_aligned_calloc")
RDMX_OMP_UNSUPPORTED(omp_realloc, "omp_realloc")
RDMX_OMP_UNSUPPORTED(omp_free, "omp_free")
RDMX_OMP_UNSUPPORTED(omp_init_allocator, "omp_init_allocator")
RDMX_OMP_UNSUPPORTED(omp_destroy_allocator, "omp_destroy_allocator")
RDMX_OMP_UNSUPPORTED(omp_get_default_allocator, "omp_get_default_allocator")
RDMX_OMP_UNSUPPORTED(omp_set_default_allocator, "omp_set_default_allocator")
RDMX_OMP_UNSUPPORTED(omp_capture_affinity, "omp_capture_affinity")
RDMX_OMP_UNSUPPORTED(omp_display_affinity, "omp_display_affinity")
RDMX_OMP_UNSUPPORTED(omp_get_affinity_format, "omp_get_affinity_format")
RDMX_OMP_UNSUPPORTED(omp_set_affinity_format, "omp_set_affinity_format")
RDMX_OMP_UNSUPPORTED(omp_display_env, "omp_display_env")
RDMX_OMP_UNSUPPORTED(omp_fulfill_event, "omp_fulfill_event")
RDMX_OMP_UNSUPPORTED(omp_pause_resource, "omp_pause_resource")
RDMX_OMP_UNSUPPORTED(omp_pause_resource_all, "omp_pause_resource_all")
RDMX_OMP_UNSUPPORTED(omp_set_num_teams, "omp_set_num_teams")
RDMX_OMP_UNSUPPORTED(omp_set_teams_thread_limit, "omp_set_teams_thread_limit")
RDMX_OMP_UNSUPPORTED(omp_target_alloc, "omp_target_alloc")
RDMX_OMP_UNSUPPORTED(omp_target_free, "omp_target_free")
RDMX_OMP_UNSUPPORTED(omp_target_is_present, "omp_target_is_present")
RDMX_OMP_UNSUPPORTED(omp_target_memcpy, "omp_target_memcpy")
RDMX_OMP_UNSUPPORTED(omp_target_memcpy_rect, "omp_target_memcpy_rect")
RDMX_OMP_UNSUPPORTED(omp_target_associate_ptr, "omp_target_associate_ptr")
RDMX_OMP_UNSUPPORTED(omp_target_disassociate_ptr, "omp_target_disassociate_ptr")

#undef RDMX_OMP_UNSUPPORTED

}  // extern "C"
