/* Tasks: recursive Fibonacci with taskwait, tasks with firstprivate data
 * and depend clauses, a taskgroup, taskloop over long and unsigned long
 * long with a grainsize, all inside job-wide regions; the results checked
 * on every run, against the same source on libgomp. */
#include <omp.h>
#include <stdio.h>

static long fib(int n) {
  if (n < 2) return n;
  long a = 0, b = 0;
#pragma omp task shared(a)
  a = fib(n - 1);
#pragma omp task shared(b)
  b = fib(n - 2);
#pragma omp taskwait
  return a + b;
}

static double grid[1000];
static long long squares[600];

int main(void) {
  long bad = 0;
  long f = 0;
#pragma omp parallel
  {
#pragma omp single
    f = fib(20);
  }
  if (f != 6765) {
    printf("tasks: FAILED: fib(20) = %ld\n", f);
    ++bad;
  }

  /* Every thread creates tasks with firstprivate values; depend orders a
   * producer and a consumer. */
  long sum = 0;
#pragma omp parallel reduction(+ : sum)
  {
    const int me = omp_get_thread_num();
    int value = 0;
    for (int i = 0; i < 10; ++i) {
      int k = i * 100 + me;
#pragma omp task firstprivate(k) shared(value) depend(out : value)
      value = k;
#pragma omp task shared(value, sum) depend(in : value)
      sum += value;
    }
#pragma omp taskwait
  }
  long expect = 0;
  for (int t = 0; t < omp_get_max_threads(); ++t)
    for (int i = 0; i < 10; ++i) expect += i * 100 + t;
  if (sum != expect) {
    printf("tasks: FAILED: depend sum %ld, expected %ld\n", sum, expect);
    ++bad;
  }

  /* taskloop from one thread; a taskgroup around more tasks. */
#pragma omp parallel
  {
#pragma omp single
    {
#pragma omp taskloop grainsize(64)
      for (int i = 0; i < 1000; ++i) grid[i] = 0.5 * i;
#pragma omp taskgroup
      {
#pragma omp taskloop num_tasks(7)
        for (unsigned long long i = 0; i < 600; ++i) squares[i] = (long long)(i * i);
      }
    }
  }
  for (int i = 0; i < 1000; ++i) bad += grid[i] != 0.5 * i;
  for (int i = 0; i < 600; ++i) bad += squares[i] != (long long)i * i;

  printf("tasks: %s over %d threads\n", bad == 0 ? "all checks passed" : "FAILED", omp_get_max_threads());
  return bad == 0 ? 0 : 1;
}
