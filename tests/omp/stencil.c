/* A kernel in the style of the NAS benchmarks: a 1-D heat stencil over
 * 1 MiB of doubles in RDMX_SHARED arrays, many regions, orphaned loops in a
 * region whose every thread runs the time loop, and a norm reduced each step;
 * checked against the same computation done by the master alone on private
 * arrays. */
#include <math.h>
#include <omp.h>
#include <stdio.h>

#include "check.h"
#include "rdmx/omp/shared.h"

#define N (1 << 17)
#define STEPS 20

RDMX_SHARED static double u[N], v[N];
static double pu[N], pv[N]; /* the master's private reference */

static void step(double* restrict to, const double* restrict from) {
  #pragma omp for schedule(static)
  for (int i = 1; i < N - 1; i++) to[i] = from[i] + 0.25 * (from[i - 1] - 2 * from[i] + from[i + 1]);
}

int main(void) {
  #pragma omp parallel for
  for (int i = 0; i < N; i++) u[i] = v[i] = (double)((i * 7919) % 1000) / 1000.0;
  for (int i = 0; i < N; i++) pu[i] = pv[i] = (double)((i * 7919) % 1000) / 1000.0;

  double norms[STEPS];
  /* one region per step (a parallel for each) */
  for (int s = 0; s < STEPS / 2; s++) {
    double* to = s % 2 ? u : v;
    const double* from = s % 2 ? v : u;
    double norm = 0;
    #pragma omp parallel for reduction(+:norm)
    for (int i = 1; i < N - 1; i++) {
      to[i] = from[i] + 0.25 * (from[i - 1] - 2 * from[i] + from[i + 1]);
      norm += to[i] * to[i];
    }
    norms[s] = norm;
  }
  /* one region for the other steps: every thread runs the time loop */
  #pragma omp parallel
  for (int s = STEPS / 2; s < STEPS; s++) {
    if (s % 2) step(u, v); else step(v, u);
    double local = 0;
    const double* cur = s % 2 ? u : v;
    #pragma omp for nowait
    for (int i = 1; i < N - 1; i++) local += cur[i] * cur[i];
    #pragma omp single
    norms[s] = 0;
    #pragma omp atomic
    norms[s] += local;
    #pragma omp barrier
  }

  double max_error = 0, max_norm_error = 0;
  for (int s = 0; s < STEPS; s++) {
    double* to = s % 2 ? pu : pv;
    const double* from = s % 2 ? pv : pu;
    double norm = 0;
    for (int i = 1; i < N - 1; i++) {
      to[i] = from[i] + 0.25 * (from[i - 1] - 2 * from[i] + from[i + 1]);
      norm += to[i] * to[i];
    }
    const double e = fabs(norm - norms[s]) / norm;
    if (e > max_norm_error) max_norm_error = e;
  }
  for (int i = 0; i < N; i++) {
    const double e = fabs(u[i] - pu[i]) + fabs(v[i] - pv[i]);
    if (e > max_error) max_error = e;
  }
  CHECK(max_error == 0, "grid differs from the serial run by %g", max_error);
  CHECK(max_norm_error < 1e-12, "norms differ by a relative %g", max_norm_error);
  printf("%s\n", failures == 0 ? "stencil: all checks passed" : "stencil: FAILED");
  return failures == 0 ? 0 : 1;
}
