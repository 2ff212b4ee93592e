// The omp_* routines about what rdmx_omp's OpenMP has none of or one of: no
// devices (the host is the only one), no places, no cancellation, no task
// priorities, no teams, one active level. Answered as OpenMP defines for
// that case, so that programs which ask (and most only print the answer)
// run. The routines that would change such a setting, or that need what is
// not there (allocators, affinity formats, events), stop the job naming
// themselves (unsupported.cpp).
#include "runtime.hpp"

extern "C" {

int omp_get_num_devices() { return 0; }
// The host is device number omp_get_num_devices(), the initial device.
int omp_get_initial_device() { return 0; }
int omp_get_default_device() { return 0; }
void omp_set_default_device(int) {}
int omp_get_device_num() { return 0; }
int omp_is_initial_device() { return 1; }

int omp_get_max_active_levels() { return 1; }
int omp_get_supported_active_levels() { return 1; }
// One active level is all there is: a larger limit changes nothing.
void omp_set_max_active_levels(int) {}

int omp_get_cancellation() { return 0; }
int omp_get_max_task_priority() { return 0; }

int omp_get_proc_bind() { return 0; }  // omp_proc_bind_false
int omp_get_num_places() { return 0; }
int omp_get_place_num() { return -1; }
int omp_get_partition_num_places() { return 0; }
void omp_get_partition_place_nums(int*) {}
int omp_get_place_num_procs(int) { return 0; }
void omp_get_place_proc_ids(int, int*) {}

int omp_get_num_teams() { return 1; }
int omp_get_team_num() { return 0; }
int omp_get_max_teams() { return 1; }
int omp_get_teams_thread_limit() { return 0; }

// The schedule of schedule(runtime) loops (OMP_SCHEDULE, read at start-up
// by every process alike). omp_sched_t: static 1, dynamic 2, guided 3.
void omp_get_schedule(int* kind, int* chunk) {
  const rdmx::omp::Runtime* rt = rdmx::omp::runtime();
  const rdmx::omp::LoopSpec s = rt != nullptr ? rt->runtime_schedule : rdmx::omp::LoopSpec{rdmx::omp::Schedule::fixed};
  *kind = s.schedule == rdmx::omp::Schedule::dynamic ? 2 : s.schedule == rdmx::omp::Schedule::guided ? 3 : 1;
  *chunk = static_cast<int>(s.chunk);
}

}  // extern "C"
