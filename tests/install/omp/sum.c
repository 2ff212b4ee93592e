/* An OpenMP program as its author wrote it, built outside rdmx's tree
 * against an installed rdmx (tests/install/check_omp.cmake): a reduction
 * across every thread of every process, a shared global written by the
 * master and read in a region, and a main that ends without `return`,
 * which C defines as returning 0. */
#include <omp.h>
#include <stdio.h>

#include "rdmx/omp/shared.h"

RDMX_SHARED static long terms;

int main(void) {
  terms = 100000;
  double sum = 0;
  int threads = 0;
#pragma omp parallel for reduction(+ : sum)
  for (long i = 1; i <= terms; i++) sum += (double)i;
#pragma omp parallel
  {
#pragma omp master
    threads = omp_get_num_threads();
  }
  printf("omp sum %.0f over %d threads\n", sum, threads);
}
