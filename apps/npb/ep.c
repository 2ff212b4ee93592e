/* EP, the embarrassingly parallel kernel of the NAS Parallel Benchmarks:
 * 2^M pairs of uniform random numbers become Gaussian deviates by the
 * Marsaglia polar method; the kernel sums them and counts them in ten
 * square annuli. Work is split into batches of 2^16 pairs, each of which
 * starts its stretch of the random sequence by skipping ahead, so any thread
 * can generate any batch and the sums do not depend on the thread count
 * (beyond rounding). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "common/npb.h"
#include "rdmx/omp/shared.h"

#if NPB_CLASS == NPB_CLASS_S
#define M 24
#define SX_REFERENCE -3.247834652034740e+3
#define SY_REFERENCE -6.958407078382297e+3
#elif NPB_CLASS == NPB_CLASS_W
#define M 25
#define SX_REFERENCE -2.863319731645753e+3
#define SY_REFERENCE -6.320053679109499e+3
#else
#define M 28
#define SX_REFERENCE -4.295875165629892e+3
#define SY_REFERENCE -1.580732573678431e+4
#endif

#define BATCH_LOG2 16
#define BATCH (1L << BATCH_LOG2)        /* pairs per batch */
#define BATCHES (1L << (M - BATCH_LOG2))
#define ANNULI 10
#define SEED 271828183.0
#define TOLERANCE 1e-8

RDMX_SHARED static double annulus_count[ANNULI];

int main(int argc, char **argv) {
  int status = npb_check_arguments(argc, argv, "ep");
  if (status != 0) return status;
  printf("\n NAS Parallel Benchmarks: EP, class %s, 2^%d pairs\n", NPB_CLASS_NAME, M);

  const int threads = npb_threads();
  double start = npb_seconds();
  /* Batch b starts at SEED * a^(2 * BATCH * b): two numbers per pair. */
  const double batch_stride = npb_lcg_power(NPB_LCG_MULTIPLIER, 2 * BATCH);
  double sx = 0, sy = 0;
  int out_of_memory = 0;

#pragma omp parallel reduction(+ : sx, sy)
  {
    double counts[ANNULI] = {0};
    double *uniform = malloc(2 * BATCH * sizeof *uniform);
    if (uniform == NULL) {
#pragma omp atomic write
      out_of_memory = 1;
    }
#pragma omp for schedule(static)
    for (long batch = 0; batch < BATCHES; batch++) {
      if (uniform == NULL) continue;
      double seed = SEED;
      npb_randlc(&seed, npb_lcg_power(batch_stride, (uint64_t)batch));
      npb_vranlc(2 * BATCH, &seed, NPB_LCG_MULTIPLIER, uniform);
      for (long i = 0; i < BATCH; i++) {
        double x1 = 2.0 * uniform[2 * i] - 1.0;
        double x2 = 2.0 * uniform[2 * i + 1] - 1.0;
        double t = x1 * x1 + x2 * x2;
        if (t <= 1.0) {
          double factor = sqrt(-2.0 * log(t) / t);
          double gx = x1 * factor, gy = x2 * factor;
          int annulus = (int)fmax(fabs(gx), fabs(gy));
          /* |gx| <= sqrt(-2 log t) reaches 10 only for t below e^-50: both
           * numbers within 2^-37 of 1/2. The last annulus takes such a pair. */
          if (annulus >= ANNULI) annulus = ANNULI - 1;
          counts[annulus] += 1.0;
          sx += gx;
          sy += gy;
        }
      }
    }
    free(uniform);
#pragma omp critical
    for (int i = 0; i < ANNULI; i++) annulus_count[i] += counts[i];
  }
  double seconds = npb_seconds() - start;
  if (out_of_memory) {
    fprintf(stderr, "ep: out of memory for a batch of random numbers\n");
    return 3;
  }

  double gaussian_pairs = 0;
  printf("\n Annulus  Gaussian pairs\n");
  for (int i = 0; i < ANNULI; i++) {
    printf(" %7d  %14.0f\n", i, annulus_count[i]);
    gaussian_pairs += annulus_count[i];
  }
  printf(" Total    %14.0f\n\n", gaussian_pairs);
  int verified = npb_verify_close("sx", sx, SX_REFERENCE, TOLERANCE);
  verified &= npb_verify_close("sy", sy, SY_REFERENCE, TOLERANCE);

  char size[32];
  snprintf(size, sizeof size, "%ld", 2L << M);
  struct npb_result result = {
      .kernel = "EP", .size = size, .iterations = 0, .seconds = seconds,
      .mops = (double)(2L << M) / seconds / 1e6, .operation = "Random numbers generated",
      .threads = threads, .verified = verified};
  return npb_report(&result);
}
