/* Teams of part of the job: num_threads(k) for every k from 1 to one more
 * than the job has (which gets them all), and omp_set_num_threads. In each
 * team: the size and distinct thread numbers, a static and a dynamic loop
 * that cover their iterations once, a reduction, a barrier between two
 * phases, single and ordered; and after teams of every size, a region of
 * all threads whose work shares still agree (the ring counts each team's
 * threads). The threads outside a team wait its region out. */
#include <omp.h>
#include <stdio.h>

#include "check.h"

#define N 97
#define MAX 64
static int seen[N];
static int member[MAX];
static int phase[MAX];

static void team_of(int k, int total) {
  const int want = k < total ? k : total;
  int size = 0, singles = 0;
  long sum = 0;
  for (int i = 0; i < N; ++i) seen[i] = 0;
  for (int t = 0; t < MAX; ++t) member[t] = phase[t] = 0;
#pragma omp parallel num_threads(k) reduction(+ : sum)
  {
    const int me = omp_get_thread_num();
#pragma omp single
    {
      size = omp_get_num_threads();
      singles++;
    }
    if (me < MAX) member[me]++;
#pragma omp for schedule(static)
    for (int i = 0; i < N; ++i) sum += i;
#pragma omp for schedule(dynamic, 3)
    for (int i = 0; i < N; ++i) {
#pragma omp atomic
      seen[i]++;
    }
    if (me < MAX) phase[me] = 1;
#pragma omp barrier
    /* Everyone's first phase is over: every member's mark is there. */
    for (int t = 0; t < omp_get_num_threads() && t < MAX; ++t)
      if (phase[t] != 1) {
#pragma omp atomic
        singles += 100;
      }
#pragma omp for ordered schedule(dynamic)
    for (int i = 0; i < 8; ++i) {
#pragma omp ordered
      seen[i] += 10;
    }
  }
  CHECK(size == want, "num_threads(%d): a team of %d, not %d", k, size, want);
  CHECK(singles == 1, "num_threads(%d): single ran %d times (or a barrier let a thread through early)", k, singles);
  CHECK(sum == (long)N * (N - 1) / 2, "num_threads(%d): the static loop summed %ld", k, sum);
  for (int t = 0; t < MAX; ++t)
    CHECK(member[t] == (t < want ? 1 : 0), "num_threads(%d): thread %d ran the region %d times", k, t, member[t]);
  for (int i = 0; i < N; ++i)
    CHECK(seen[i] == (i < 8 ? 11 : 1), "num_threads(%d): iteration %d ran %d times", k, i, seen[i]);
}

int main(void) {
  const int total = omp_get_max_threads();
  if (total > MAX) {
    printf("teams: FAILED: at most %d threads\n", MAX);
    return 1;
  }
  /* rdmx_omp's thread limit is the job's threads; libgomp's, unlimited. */
  const int limit = omp_get_thread_limit();
  for (int k = 1; k <= total + 1; ++k) team_of(k, limit);
  team_of(total, limit);
  omp_set_num_threads(total > 1 ? total - 1 : 1);
  int size = 0;
#pragma omp parallel
  {
#pragma omp master
    size = omp_get_num_threads();
  }
  CHECK(size == (total > 1 ? total - 1 : 1), "omp_set_num_threads(%d): a team of %d", total - 1, size);
  if (failures == 0) printf("teams: all checks passed on %d threads\n", total);
  return failures != 0;
}
