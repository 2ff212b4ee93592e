/* Reductions and atomics, checked across every thread of every process:
 * GCC merges one reduction variable with an atomic compare-and-swap loop or
 * fetch-add (library calls under -fno-inline-atomics), several at once
 * under GOMP_atomic_start/end; rdmx_omp must keep every contribution. */
#include <omp.h>
#include <stdio.h>

#include "check.h"
#include "rdmx/omp/shared.h"

#define N 20000
#define BINS 8

RDMX_SHARED static double x[N];
RDMX_SHARED static long global_count;
RDMX_SHARED static int hist[BINS];

int main(void) {
  #pragma omp parallel for
  for (int i = 0; i < N; i++) x[i] = (double)(i % 100);
  double expect_sum = 0;
  for (int i = 0; i < N; i++) expect_sum += (double)(i % 100);

  for (int round = 0; round < 3; round++) {
    double sum = 0;
    #pragma omp parallel for reduction(+:sum)
    for (int i = 0; i < N; i++) sum += x[i];
    CHECK(sum == expect_sum, "round %d: double sum %.1f, expected %.1f", round, sum, expect_sum);

    long count = 0;
    #pragma omp parallel for reduction(+:count) schedule(dynamic, 100)
    for (int i = 0; i < N; i++) count += i;
    CHECK(count == (long)N * (N - 1) / 2, "round %d: long sum %ld", round, count);

    double s1 = 0, s2 = 0;
    long mx = -1;
    #pragma omp parallel for reduction(+:s1, s2) reduction(max:mx)
    for (int i = 0; i < N; i++) {
      s1 += x[i];
      s2 += 2 * x[i];
      if (i > mx) mx = i;
    }
    CHECK(s1 == expect_sum && s2 == 2 * expect_sum && mx == N - 1, "round %d: s1 %.1f s2 %.1f max %ld", round, s1,
          s2, mx);

    double product = 1;
    #pragma omp parallel reduction(*:product)
    product *= 2;
    CHECK(product == (double)(1L << omp_get_max_threads()), "round %d: product %.1f", round, product);
  }

  /* omp atomic on a shared local and on an RDMX_SHARED global */
  long hits = 0;
  global_count = 0;
  /* Each is a job-wide mutex round trip: few, so TCP under load stays quick. */
  #pragma omp parallel for
  for (int i = 0; i < 200; i++) {
    #pragma omp atomic
    hits++;
    #pragma omp atomic
    global_count += 2;
  }
  CHECK(hits == 200 && global_count == 400, "atomics: %ld, %ld", hits, global_count);
  #pragma omp atomic
  global_count += 1; /* in serial code: no other thread runs, no mutex */
  CHECK(global_count == 401, "serial atomic: %ld", global_count);

  /* an array reduction (OpenMP 4.5 array sections) */
  #pragma omp parallel for reduction(+:hist[:BINS])
  for (int i = 0; i < N; i++) hist[i % BINS]++;
  for (int b = 0; b < BINS; b++) CHECK(hist[b] == N / BINS, "hist[%d] = %d", b, hist[b]);

  /* atomic capture */
  long ticket = 0;
  int duplicates = 0;
  #pragma omp parallel
  {
    long mine;
    #pragma omp atomic capture
    mine = ticket++;
    if (mine < 0 || mine >= omp_get_num_threads()) {
      #pragma omp atomic
      duplicates++;
    }
  }
  CHECK(ticket == omp_get_max_threads() && duplicates == 0, "capture: ticket %ld, bad %d", ticket, duplicates);

  printf("%s\n", failures == 0 ? "reduction: all checks passed" : "reduction: FAILED");
  return failures == 0 ? 0 : 1;
}
