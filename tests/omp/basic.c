/* Parallel regions, loops, single, master, barrier, critical and thread
 * numbers: an ordinary OpenMP program that checks its own results. Built
 * twice: against rdmx_omp (every thread of every process) and against
 * libgomp (the reference). Exit status 0 when every check holds. */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "rdmx/omp/shared.h"

#define N 10007
#define MAX_THREADS 64

RDMX_SHARED static long a[N];
RDMX_SHARED static int seen[MAX_THREADS];
RDMX_SHARED static int owner[N];
/* threadprivate, one variable and an array over a page */
static int tp_value;
#pragma omp threadprivate(tp_value)
static double tp_array[3000];
#pragma omp threadprivate(tp_array)
#define CHAIN 300
RDMX_SHARED static char chained[CHAIN][4];
RDMX_SHARED static char chained_single[CHAIN];


int main(int argc, char** argv) {
  /* Without address randomization every process's first thread has its
   * threadprivate block where the master has it, so rdmx_omp cannot mirror
   * the master's there (it warns at start-up): that run skips copyin. */
  const int copyin_checked = !(argc > 1 && strcmp(argv[1], "--no-copyin") == 0);
  int threads = 0;
  long local[64] = {0}; /* a shared local of main, written in regions */
  int singles = 0, masters = 0, criticals = 0;

  #pragma omp parallel
  {
    int me = omp_get_thread_num();
    #pragma omp single
    threads = omp_get_num_threads();
    if (me < MAX_THREADS) seen[me] = 1;
    if (me < 64) local[me] = 100 + me;
  }
  printf("threads %d (max %d)\n", threads, omp_get_max_threads());
  CHECK(threads >= 1 && threads <= MAX_THREADS, "threads %d", threads);
  CHECK(threads == omp_get_max_threads(), "threads %d, max %d", threads, omp_get_max_threads());
  CHECK(!omp_in_parallel() && omp_get_num_threads() == 1 && omp_get_thread_num() == 0, "outside a region");
  /* The nesting and device queries: one active level at most, the host
   * the only device. */
  int query_errors = 0;
  #pragma omp parallel reduction(+ : query_errors)
  {
    const int me = omp_get_thread_num(), n = omp_get_num_threads();
    query_errors += omp_get_level() != 1 || omp_get_active_level() != (n > 1) || omp_in_parallel() != (n > 1);
    query_errors += omp_get_team_size(1) != n || omp_get_team_size(0) != 1 || omp_get_team_size(2) != -1;
    query_errors += omp_get_ancestor_thread_num(1) != me || omp_get_ancestor_thread_num(0) != 0;
    #pragma omp parallel
    {
      /* Nested: a team of one at level 2, the outer thread its ancestor. */
      query_errors += omp_get_level() != 2 || omp_get_num_threads() != 1 || omp_get_active_level() != (n > 1);
      query_errors += omp_get_ancestor_thread_num(1) != me || omp_get_team_size(1) != n;
    }
  }
  CHECK(query_errors == 0, "%d nesting queries answered wrongly", query_errors);
  CHECK(omp_get_num_devices() == 0 && omp_is_initial_device() && omp_get_team_num() == 0 && omp_get_num_teams() == 1,
        "device and team queries");
  for (int t = 0; t < threads; t++) {
    CHECK(seen[t] == 1, "thread %d never ran", t);
    CHECK(local[t] == 100 + t, "local[%d] = %ld", t, local[t]);
  }

  /* static (the default), static with a chunk, dynamic, guided, runtime */
  #pragma omp parallel for
  for (int i = 0; i < N; i++) a[i] = 2 * i;
  #pragma omp parallel for schedule(static, 7)
  for (int i = 0; i < N; i++) a[i] += 1;
  #pragma omp parallel for schedule(dynamic, 13)
  for (int i = 0; i < N; i++) owner[i] = omp_get_thread_num();
  #pragma omp parallel
  {
    #pragma omp for schedule(guided, 3)
    for (int i = N - 1; i >= 0; i--) a[i] += 10;
    #pragma omp for schedule(dynamic) nowait
    for (int i = 0; i < N; i += 2) a[i] += 100;
    #pragma omp for schedule(runtime)
    for (int i = 1; i < N; i += 2) a[i] += 100;
  }
  long bad = 0;
  for (int i = 0; i < N; i++) {
    if (a[i] != 2 * i + 111) bad++;
    if (owner[i] < 0 || owner[i] >= threads) bad++;
  }
  CHECK(bad == 0, "%ld loop elements wrong", bad);

  /* Loops over unsigned long long, up and down, near 2^64 (GOMP_loop_ull_*):
   * every element exactly once, whatever the schedule.
   * Bounds known only at run time: with constants that fit in a long, GCC
   * calls the long entry points instead. */
  volatile unsigned long long opaque_top = 18446744073709551615ULL, opaque_n = N;
  const unsigned long long top = opaque_top, n = opaque_n, base = top - 3 * n;
  for (int i = 0; i < N; i++) a[i] = 0;
  #pragma omp parallel
  {
    #pragma omp for schedule(dynamic, 11)
    for (unsigned long long u = base; u < base + 3 * n; u += 3) a[(u - base) / 3] += 1;
    #pragma omp for schedule(guided, 2)
    for (unsigned long long u = top; u > base; u -= 3) a[(top - u) / 3] += 10;
    #pragma omp for schedule(runtime)
    for (unsigned long long u = 0; u < n; u++) a[u] += 100;
    #pragma omp for schedule(static, 5)
    for (unsigned long long u = n; u > 0; u--) a[u - 1] += 1000;
  }
  bad = 0;
  for (int i = 0; i < N; i++) bad += a[i] != 1111;
  CHECK(bad == 0, "%ld elements of the unsigned long long loops wrong", bad);

  /* A chain of nowait constructs longer than rdmx_omp's ring of work-share
   * slots (RDMX_OMP_WORK_SHARES, 256 by default), with the last thread
   * slowed at its start so that the others run far ahead: every iteration
   * and every single runs exactly once (the counts), and all of them run
   * (the marks). */
  long iterations_run = 0, singles_run = 0;
  #pragma omp parallel reduction(+:iterations_run, singles_run)
  {
    if (omp_get_thread_num() == omp_get_num_threads() - 1) {
      volatile long spin = 0;
      for (long k = 0; k < 3000000; k++) spin += k;
    }
    for (int c = 0; c < CHAIN; c++) {
      #pragma omp for schedule(dynamic) nowait
      for (int i = 0; i < 4; i++) {
        chained[c][i] = 1;
        iterations_run++;
      }
      #pragma omp single nowait
      {
        chained_single[c] = 1;
        singles_run++;
      }
    }
  }
  bad = 0;
  for (int c = 0; c < CHAIN; c++) {
    bad += chained_single[c] != 1;
    for (int i = 0; i < 4; i++) bad += chained[c][i] != 1;
  }
  CHECK(bad == 0 && iterations_run == 4 * CHAIN && singles_run == CHAIN,
        "nowait chain: %ld marks missing, %ld iterations and %ld singles run (expected %d and %d)", bad,
        iterations_run, singles_run, 4 * CHAIN, CHAIN);

  /* copyin: every thread of every process starts with the master's
   * threadprivate values; without it, each keeps its own across regions. */
  tp_value = 42;
  for (int i = 0; i < 3000; i++) tp_array[i] = i;
  bad = 0;
  if (copyin_checked) {
    #pragma omp parallel copyin(tp_value, tp_array) reduction(+:bad)
    {
      bad += tp_value != 42;
      for (int i = 0; i < 3000; i++) bad += tp_array[i] != i;
    }
  }
  CHECK(bad == 0, "%ld threadprivate values not copied in", bad);
  #pragma omp parallel
  tp_value = 1000 + omp_get_thread_num();
  bad = 0;
  #pragma omp parallel reduction(+:bad)
  bad += tp_value != 1000 + omp_get_thread_num();
  CHECK(bad == 0, "%ld threads lost their threadprivate value between regions", bad);

  /* single copyprivate: every thread leaves it with the values the single
   * set, in private variables of its own. */
  bad = 0;
  #pragma omp parallel reduction(+:bad)
  {
    int mine = -1;
    double several[3] = {0, 0, 0};
    for (int round = 0; round < 3; round++) {
      #pragma omp single copyprivate(mine, several)
      {
        mine = 42 + round;
        several[0] = 1;
        several[2] = 3 + round;
      }
      bad += mine != 42 + round || several[0] != 1 || several[2] != 3 + round;
    }
  }
  CHECK(bad == 0, "%ld threads without the single's copyprivate values", bad);

  /* single, master, critical, barrier */
  #pragma omp parallel
  {
    #pragma omp single
    singles++;
    #pragma omp master
    masters++;
    #pragma omp critical
    criticals++;
    #pragma omp barrier
    #pragma omp critical(second)
    criticals += 10;
    #pragma omp barrier
    if (omp_get_thread_num() == threads - 1) {
      #pragma omp critical
      local[0] = criticals; /* after the barrier every increment is visible */
    }
  }
  CHECK(singles == 1, "single ran %d times", singles);
  CHECK(masters == 1, "master ran %d times", masters);
  CHECK(criticals == 11 * threads, "criticals %d, expected %d", criticals, 11 * threads);
  CHECK(local[0] == 11 * threads, "read after the barrier: %ld", local[0]);

  /* sections, combined and inside a region */
  int sec[4] = {0, 0, 0, 0};
  #pragma omp parallel sections
  {
    #pragma omp section
    sec[0] += 1;
    #pragma omp section
    sec[1] += 1;
    #pragma omp section
    sec[2] += 1;
  }
  #pragma omp parallel
  {
    #pragma omp sections
    {
      #pragma omp section
      sec[3] += 1;
      #pragma omp section
      sec[0] += 10;
    }
    #pragma omp sections nowait
    {
      #pragma omp section
      sec[1] += 10;
    }
  }
  CHECK(sec[0] == 11 && sec[1] == 11 && sec[2] == 1 && sec[3] == 1, "sections ran %d %d %d %d", sec[0], sec[1],
        sec[2], sec[3]);

  /* a region with one thread, and one nested in a region */
  int inner = 0;
  #pragma omp parallel num_threads(1)
  inner = omp_get_num_threads();
  CHECK(inner == 1, "num_threads(1) ran %d threads", inner);
  omp_set_num_threads(1);
  inner = 0;
  #pragma omp parallel
  inner = omp_get_num_threads();
  CHECK(inner == 1 && omp_get_max_threads() == 1, "omp_set_num_threads(1): %d threads", inner);
  omp_set_num_threads(threads);
  #pragma omp parallel
  {
    #pragma omp single
    inner = omp_get_num_threads();
  }
  CHECK(inner == threads, "omp_set_num_threads(%d): %d threads", threads, inner);
  int nested_bad = 0;
  #pragma omp parallel
  {
    #pragma omp parallel
    {
      if (omp_get_num_threads() != 1 || omp_get_thread_num() != 0) {
        #pragma omp atomic
        nested_bad++;
      }
    }
  }
  CHECK(nested_bad == 0, "%d nested regions had more than one thread", nested_bad);

  /* heap data shared through rdmx_shared_malloc, freed and allocated again */
  long* h = rdmx_shared_malloc(N * sizeof(long));
  long* h2 = rdmx_shared_malloc(100 * sizeof(long));
  CHECK(h != NULL && h2 != NULL, "rdmx_shared_malloc failed");
  #pragma omp parallel for schedule(dynamic, 50)
  for (int i = 0; i < N; i++) h[i] = 3 * i;
  bad = 0;
  for (int i = 0; i < N; i++) bad += h[i] != 3 * i;
  CHECK(bad == 0, "%ld shared heap elements wrong", bad);
  rdmx_shared_free(h);
  long* h3 = rdmx_shared_malloc(N * sizeof(long)); /* reuses h's memory: zeroed again */
  bad = 0;
  #pragma omp parallel for reduction(+:bad)
  for (int i = 0; i < N; i++) bad += h3[i] != 0;
  CHECK(bad == 0, "%ld reused shared heap elements not zero", bad);
  rdmx_shared_free(h3);
  rdmx_shared_free(h2);

  double t0 = omp_get_wtime();
  CHECK(omp_get_wtime() >= t0, "omp_get_wtime went back");
  printf("%s\n", failures == 0 ? "basic: all checks passed" : "basic: FAILED");
  return failures == 0 ? 0 : 1;
}
