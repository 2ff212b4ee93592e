#include "npb.h"

#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Residues modulo 2^46 are the low 46 bits of the product, and 2^46
 * divides 2^64, so a wrapping 64-bit multiplication gives them exactly: the
 * same values the specification's split double-precision arithmetic gives. */
#define LCG_MASK ((UINT64_C(1) << 46) - 1)
#define LCG_SCALE 0x1p-46

double npb_randlc(double *x, double a) {
  uint64_t next = ((uint64_t)*x * (uint64_t)a) & LCG_MASK;
  *x = (double)next;
  return (double)next * LCG_SCALE;
}

void npb_vranlc(long n, double *x, double a, double y[]) {
  uint64_t state = (uint64_t)*x;
  const uint64_t multiplier = (uint64_t)a;
  for (long i = 0; i < n; i++) {
    state = (state * multiplier) & LCG_MASK;
    y[i] = (double)state * LCG_SCALE;
  }
  *x = (double)state;
}

double npb_lcg_power(double a, uint64_t n) {
  uint64_t result = 1, square = (uint64_t)a;
  for (; n != 0; n >>= 1) {
    if (n & 1) result = (result * square) & LCG_MASK;
    square = (square * square) & LCG_MASK;
  }
  return (double)result;
}

int npb_check_arguments(int argc, char **argv, const char *kernel) {
  if (argc > 2 || (argc == 2 && strcmp(argv[1], NPB_CLASS_NAME) != 0)) {
    fprintf(stderr,
            "%s: this binary is built for class %s; run it without arguments or with %s "
            "(other classes are other binaries, built with -DCLASS=<class>)\n",
            argc > 0 ? argv[0] : kernel, NPB_CLASS_NAME, NPB_CLASS_NAME);
    return 2;
  }
  return 0;
}

int npb_reference_corrupted(void) {
  const char *value = getenv("NPB_CORRUPT_REFERENCE");
  return value != NULL && strcmp(value, "") != 0 && strcmp(value, "0") != 0;
}

int npb_verify_close(const char *what, double value, double reference, double tolerance) {
  if (npb_reference_corrupted()) reference *= 1.0 + 1e3 * tolerance;
  double error = value - reference;
  if (error < 0) error = -error;
  double scale = reference < 0 ? -reference : reference;
  int ok = error <= tolerance * scale;
  printf(" %-8s %25.13e  reference %25.13e  relative error %.3e%s\n", what, value, reference,
         scale > 0 ? error / scale : error, ok ? "" : "  (too large)");
  return ok;
}

double npb_seconds(void) { return omp_get_wtime(); }

int npb_threads(void) {
  int threads = 1;
#pragma omp parallel
#pragma omp master
  threads = omp_get_num_threads();
  return threads;
}

int npb_report(const struct npb_result *r) {
  printf("\n %s Benchmark Completed.\n", r->kernel);
  printf(" Class           = %24s\n", NPB_CLASS_NAME);
  printf(" Size            = %24s\n", r->size);
  printf(" Iterations      = %24d\n", r->iterations);
  printf(" Time in seconds = %24.2f\n", r->seconds);
  printf(" Total threads   = %24d\n", r->threads);
  printf(" Mop/s total     = %24.2f\n", r->mops);
  printf(" Operation type  = %24s\n", r->operation);
  printf(" VERIFICATION %s\n", r->verified ? "SUCCESSFUL" : "FAILED");
  fflush(stdout);
  return r->verified ? 0 : 1;
}
