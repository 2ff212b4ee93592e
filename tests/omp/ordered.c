/* `for ordered`: each loop's ordered regions append their iteration to a
 * shared log, which must then hold every iteration once, in order, as on
 * one thread. Every schedule (static with and without a chunk, dynamic,
 * guided, runtime), a loop over unsigned long long counting down, a chunk
 * whose iterations skip the ordered region (the turn still passes), an
 * ordered loop without iterations, two ordered loops in a nowait chain, and
 * the work outside the ordered region running in parallel. */
#include <omp.h>
#include <stdio.h>

#include "check.h"

#define N 61
/* Two logs: loops of a nowait chain are not ordered with each other. */
struct log {
  long entries[N];
  int count;
};
static struct log logs[2];

static void check_log(const char* loop, int which, long first, long step, int count) {
  struct log* l = &logs[which];
  CHECK(l->count == count, "%s: %d ordered regions ran, not %d", loop, l->count, count);
  for (int k = 0; k < l->count && k < count; ++k)
    if (l->entries[k] != first + k * step) {
      CHECK(0, "%s: region %d ran iteration %ld, not %ld", loop, k, l->entries[k], first + k * step);
      break;
    }
  l->count = 0;
}

static void append(int which, long i) {
  struct log* l = &logs[which];
  if (l->count < N) l->entries[l->count] = i;
  l->count++;
}

int main(void) {
  long work = 0;
#define ORDERED_LOOP(name, clause)                              \
  _Pragma("omp parallel reduction(+ : work)") {                 \
    _Pragma(clause) for (long i = 0; i < N; i++) {              \
      work += i;                                                \
      _Pragma("omp ordered") append(0, i);                      \
    }                                                           \
  }                                                             \
  check_log(name, 0, 0, 1, N);
  ORDERED_LOOP("static", "omp for ordered schedule(static)")
  ORDERED_LOOP("static,3", "omp for ordered schedule(static, 3)")
  ORDERED_LOOP("dynamic,2", "omp for ordered schedule(dynamic, 2)")
  ORDERED_LOOP("guided", "omp for ordered schedule(guided)")
  ORDERED_LOOP("runtime", "omp for ordered schedule(runtime)")
  CHECK(work == 5L * N * (N - 1) / 2, "the loops' own work summed to %ld", work);

#pragma omp parallel
  {
#pragma omp for ordered schedule(dynamic, 4)
    for (unsigned long long u = 3ULL * N; u > 0; u -= 3) {
#pragma omp ordered
      append(0, (long)u);
    }
  }
  check_log("unsigned long long, down", 0, 3L * N, -3, N);

  /* Odd iterations only: chunks of even ones pass the turn unused. */
#pragma omp parallel
  {
#pragma omp for ordered schedule(static, 1)
    for (long i = 0; i < N; i++)
      if (i % 2 == 1) {
#pragma omp ordered
        append(0, i);
      }
  }
  check_log("odd iterations", 0, 1, 2, N / 2);

  /* An ordered loop without iterations: the next one still gets its turn. */
  int empty = 0;
#pragma omp parallel for ordered
  for (long i = 0; i < empty; i++) {
#pragma omp ordered
    append(0, -1);
  }
  check_log("empty", 0, 0, 1, 0);

  /* A nowait chain of two ordered loops. */
#pragma omp parallel
  {
#pragma omp for ordered schedule(dynamic) nowait
    for (long i = 0; i < N; i++) {
#pragma omp ordered
      append(0, i);
    }
#pragma omp for ordered schedule(static, 2)
    for (long i = 10; i < N; i++) {
#pragma omp ordered
      append(1, i);
    }
  }
  check_log("nowait chain, first", 0, 0, 1, N);
  check_log("nowait chain, third", 1, 10, 1, N - 10);

  if (failures == 0) printf("ordered: all checks passed on %d threads\n", omp_get_max_threads());
  return failures != 0;
}
