/* MG, the multigrid kernel of the NAS Parallel Benchmarks: approximates
 * the solution of the discrete Poisson problem A u = v on a periodic cubic
 * grid with V-cycles: restrict the residual down to a 2^3 grid, smooth
 * there, then interpolate, recompute the residual and smooth on each finer
 * grid. v is zero except +1 at the ten points where a random field is
 * largest and -1 at the ten where it is smallest. The result is the L2
 * norm of the final residual.
 *
 * Grids carry one layer of ghost points on every side: level k has 2^k
 * interior points per dimension and 2^k + 2 in all, the ghosts holding the
 * periodic copies of the opposite faces. Each operator is one parallel
 * region that splits its outermost dimension among the threads. */
#include <math.h>
#include <stdio.h>

#include "common/npb.h"
#include "rdmx/omp/shared.h"

#if NPB_CLASS == NPB_CLASS_S
#define LT 5 /* the finest level: 32^3 */
#define RNM2_REFERENCE 0.5307707005734e-04
#elif NPB_CLASS == NPB_CLASS_W
#define LT 7 /* 128^3 */
#define RNM2_REFERENCE 0.6467329375339e-05
#else
#define LT 8 /* 256^3 */
#define RNM2_REFERENCE 0.2433365309069e-05
#endif

#define NIT 4
#define NX (1 << LT)
#define SEED 314159265.0
#define TOLERANCE 1e-8
#define EXTREMES 10 /* points set to +1 and to -1 */

/* Points per dimension of level k, ghosts included, and of all its grid. */
#define GRID(k) ((1 << (k)) + 2)
#define POINTS(k) ((k) <= LT ? GRID(k) * GRID(k) * GRID(k) : 0)
/* Levels 1..LT, one after the other (classes up to A: LT <= 8). */
#define ALL_LEVELS (POINTS(1) + POINTS(2) + POINTS(3) + POINTS(4) + POINTS(5) + POINTS(6) + \
                    POINTS(7) + POINTS(8))
#if LT > 8
#error "ALL_LEVELS sums levels up to 8"
#endif

/* The operator A and the smoother S, as weights of the centre, the 6 face,
 * the 12 edge and the 8 corner neighbours. */
static const double a[4] = {-8.0 / 3.0, 0.0, 1.0 / 6.0, 1.0 / 12.0};
static const double c[4] = {-3.0 / 8.0, 1.0 / 32.0, -1.0 / 64.0, 0.0};

RDMX_SHARED static double u[ALL_LEVELS]; /* the approximate solution, per level */
RDMX_SHARED static double r[ALL_LEVELS]; /* the residual, per level */
RDMX_SHARED static double v[POINTS(LT)]; /* the right-hand side */

static double *level(double *levels, int k) {
  long offset = 0;
  for (int l = 1; l < k; l++) offset += POINTS(l);
  return levels + offset;
}

/* Copies the faces of the interior into the opposite ghosts; an orphaned
 * worksharing construct, called inside a parallel region. */
static void comm3(double *grid, int n) {
  double(*g)[n][n] = (double(*)[n][n])grid;
#pragma omp for schedule(static)
  for (int i3 = 1; i3 < n - 1; i3++) {
    for (int i2 = 1; i2 < n - 1; i2++) {
      g[i3][i2][0] = g[i3][i2][n - 2];
      g[i3][i2][n - 1] = g[i3][i2][1];
    }
    for (int i1 = 0; i1 < n; i1++) {
      g[i3][0][i1] = g[i3][n - 2][i1];
      g[i3][n - 1][i1] = g[i3][1][i1];
    }
  }
#pragma omp for schedule(static)
  for (int i2 = 0; i2 < n; i2++)
    for (int i1 = 0; i1 < n; i1++) {
      g[0][i2][i1] = g[n - 2][i2][i1];
      g[n - 1][i2][i1] = g[1][i2][i1];
    }
}

static void zero3(double *grid, int n) {
  double(*g)[n][n] = (double(*)[n][n])grid;
#pragma omp parallel for schedule(static)
  for (int i3 = 0; i3 < n; i3++)
    for (int i2 = 0; i2 < n; i2++)
      for (int i1 = 0; i1 < n; i1++) g[i3][i2][i1] = 0.0;
}

/* For every i1 of the line (i2, i3): the sums of its 4 face and of its 4
 * edge neighbours in the plane across i1. A 27-point stencil at i1 takes
 * them at i1 - 1, i1 and i1 + 1, so three points share each sum. */
static void neighbour_sums(const double *grid, int n, int i3, int i2, double faces[],
                           double edges[]) {
  const double(*g)[n][n] = (const double(*)[n][n])grid;
  for (int i1 = 0; i1 < n; i1++) {
    faces[i1] = g[i3][i2 - 1][i1] + g[i3][i2 + 1][i1] + g[i3 - 1][i2][i1] + g[i3 + 1][i2][i1];
    edges[i1] = g[i3 - 1][i2 - 1][i1] + g[i3 - 1][i2 + 1][i1] + g[i3 + 1][i2 - 1][i1] +
                g[i3 + 1][i2 + 1][i1];
  }
}

/* out = in - A u (out may be in). */
static void resid(const double *u_grid, const double *in_grid, double *out_grid, int n) {
  const double(*uu)[n][n] = (const double(*)[n][n])u_grid;
  const double(*in)[n][n] = (const double(*)[n][n])in_grid;
  double(*out)[n][n] = (double(*)[n][n])out_grid;
#pragma omp parallel
  {
#pragma omp for schedule(static)
    for (int i3 = 1; i3 < n - 1; i3++) {
      double faces[n], edges[n];
      for (int i2 = 1; i2 < n - 1; i2++) {
        neighbour_sums(u_grid, n, i3, i2, faces, edges);
        /* a[1] is 0: the face neighbours do not appear. */
        for (int i1 = 1; i1 < n - 1; i1++)
          out[i3][i2][i1] = in[i3][i2][i1] - a[0] * uu[i3][i2][i1] -
                            a[2] * (edges[i1] + faces[i1 - 1] + faces[i1 + 1]) -
                            a[3] * (edges[i1 - 1] + edges[i1 + 1]);
      }
    }
    comm3(out_grid, n);
  }
}

/* u = u + S r: one smoothing step. */
static void psinv(const double *r_grid, double *u_grid, int n) {
  const double(*rr)[n][n] = (const double(*)[n][n])r_grid;
  double(*uu)[n][n] = (double(*)[n][n])u_grid;
#pragma omp parallel
  {
#pragma omp for schedule(static)
    for (int i3 = 1; i3 < n - 1; i3++) {
      double faces[n], edges[n];
      for (int i2 = 1; i2 < n - 1; i2++) {
        neighbour_sums(r_grid, n, i3, i2, faces, edges);
        /* c[3] is 0: the corner neighbours do not appear. */
        for (int i1 = 1; i1 < n - 1; i1++)
          uu[i3][i2][i1] = uu[i3][i2][i1] + c[0] * rr[i3][i2][i1] +
                           c[1] * (rr[i3][i2][i1 - 1] + rr[i3][i2][i1 + 1] + faces[i1]) +
                           c[2] * (edges[i1] + faces[i1 - 1] + faces[i1 + 1]);
      }
    }
    comm3(u_grid, n);
  }
}

/* coarse = P^T fine: full weighting onto the grid of half the points
 * (n = 2 m - 2). Coarse point j sits on fine point 2 j. */
static void rprj3(const double *fine_grid, int n, double *coarse_grid, int m) {
  const double(*f)[n][n] = (const double(*)[n][n])fine_grid;
  double(*s)[m][m] = (double(*)[m][m])coarse_grid;
#pragma omp parallel
  {
#pragma omp for schedule(static)
    for (int j3 = 1; j3 < m - 1; j3++) {
      double faces[n], corners[n]; /* around the line through i2 + 1, i3 + 1 */
      int i3 = 2 * j3 - 1;
      for (int j2 = 1; j2 < m - 1; j2++) {
        int i2 = 2 * j2 - 1;
        for (int j1 = 1; j1 < m; j1++) {
          int i1 = 2 * j1 - 1;
          faces[i1] = f[i3 + 1][i2][i1] + f[i3 + 1][i2 + 2][i1] + f[i3][i2 + 1][i1] + f[i3 + 2][i2 + 1][i1];
          corners[i1] = f[i3][i2][i1] + f[i3 + 2][i2][i1] + f[i3][i2 + 2][i1] + f[i3 + 2][i2 + 2][i1];
        }
        for (int j1 = 1; j1 < m - 1; j1++) {
          int i1 = 2 * j1 - 1;
          double edges = f[i3][i2][i1 + 1] + f[i3 + 2][i2][i1 + 1] + f[i3][i2 + 2][i1 + 1] +
                         f[i3 + 2][i2 + 2][i1 + 1];
          double centre_faces = f[i3 + 1][i2][i1 + 1] + f[i3 + 1][i2 + 2][i1 + 1] +
                                f[i3][i2 + 1][i1 + 1] + f[i3 + 2][i2 + 1][i1 + 1];
          s[j3][j2][j1] = 0.5 * f[i3 + 1][i2 + 1][i1 + 1] +
                          0.25 * (f[i3 + 1][i2 + 1][i1] + f[i3 + 1][i2 + 1][i1 + 2] + centre_faces) +
                          0.125 * (faces[i1] + faces[i1 + 2] + edges) +
                          0.0625 * (corners[i1] + corners[i1 + 2]);
        }
      }
    }
    comm3(coarse_grid, m);
  }
}

/* fine = fine + P coarse: trilinear interpolation onto the grid of twice
 * the points (n = 2 m - 2), ghosts included, so no comm3 is needed. */
static void interp(const double *coarse_grid, int m, double *fine_grid, int n) {
  const double(*z)[m][m] = (const double(*)[m][m])coarse_grid;
  double(*f)[n][n] = (double(*)[n][n])fine_grid;
#pragma omp parallel for schedule(static)
  for (int i3 = 0; i3 < m - 1; i3++) {
    double z1[m], z2[m], z3[m];
    for (int i2 = 0; i2 < m - 1; i2++) {
      for (int i1 = 0; i1 < m; i1++) {
        z1[i1] = z[i3][i2 + 1][i1] + z[i3][i2][i1];
        z2[i1] = z[i3 + 1][i2][i1] + z[i3][i2][i1];
        z3[i1] = z[i3 + 1][i2 + 1][i1] + z[i3 + 1][i2][i1] + z1[i1];
      }
      for (int i1 = 0; i1 < m - 1; i1++) {
        f[2 * i3][2 * i2][2 * i1] += z[i3][i2][i1];
        f[2 * i3][2 * i2][2 * i1 + 1] += 0.5 * (z[i3][i2][i1 + 1] + z[i3][i2][i1]);
        f[2 * i3][2 * i2 + 1][2 * i1] += 0.5 * z1[i1];
        f[2 * i3][2 * i2 + 1][2 * i1 + 1] += 0.25 * (z1[i1] + z1[i1 + 1]);
        f[2 * i3 + 1][2 * i2][2 * i1] += 0.5 * z2[i1];
        f[2 * i3 + 1][2 * i2][2 * i1 + 1] += 0.25 * (z2[i1] + z2[i1 + 1]);
        f[2 * i3 + 1][2 * i2 + 1][2 * i1] += 0.25 * z3[i1];
        f[2 * i3 + 1][2 * i2 + 1][2 * i1 + 1] += 0.125 * (z3[i1] + z3[i1 + 1]);
      }
    }
  }
}

/* The L2 norm of the interior, over NX^3 points. */
static double norm2u3(const double *grid, int n) {
  const double(*g)[n][n] = (const double(*)[n][n])grid;
  double sum = 0.0;
#pragma omp parallel for schedule(static) reduction(+ : sum)
  for (int i3 = 1; i3 < n - 1; i3++)
    for (int i2 = 1; i2 < n - 1; i2++)
      for (int i1 = 1; i1 < n - 1; i1++) sum += g[i3][i2][i1] * g[i3][i2][i1];
  return sqrt(sum / ((double)NX * NX * NX));
}

struct extreme {
  double value;
  int i1, i2, i3;
};

/* Keeps list[0..EXTREMES) ordered so that list[0] is the one a new point
 * must beat (`sign` 1: the largest values, list ascending; -1: the
 * smallest, descending), inserting the point when it does. */
static void consider(struct extreme list[], int sign, struct extreme point) {
  if (sign * point.value <= sign * list[0].value) return;
  int k = 0;
  for (; k + 1 < EXTREMES && sign * point.value > sign * list[k + 1].value; k++) list[k] = list[k + 1];
  list[k] = point;
}

/* v: the random field, interior point (i1, i2, i3) holding number
 * 1 + (i1 - 1) + NX ((i2 - 1) + NX (i3 - 1)) of the sequence from SEED,
 * reduced to +1 at its EXTREMES largest and -1 at its EXTREMES smallest
 * points (the values are distinct). */
static void zran3(void) {
  const int n = GRID(LT);
  double(*g)[n][n] = (double(*)[n][n])v;
  zero3(v, n);
#pragma omp parallel for schedule(static)
  for (int i3 = 1; i3 < n - 1; i3++) {
    double seed = SEED;
    npb_randlc(&seed, npb_lcg_power(NPB_LCG_MULTIPLIER, (uint64_t)NX * NX * (i3 - 1)));
    for (int i2 = 1; i2 < n - 1; i2++) npb_vranlc(NX, &seed, NPB_LCG_MULTIPLIER, &g[i3][i2][1]);
  }

  struct extreme largest[EXTREMES], smallest[EXTREMES];
  for (int k = 0; k < EXTREMES; k++) {
    largest[k] = (struct extreme){0.0, 0, 0, 0};  /* below every random number */
    smallest[k] = (struct extreme){1.0, 0, 0, 0}; /* above every random number */
  }
  for (int i3 = 1; i3 < n - 1; i3++)
    for (int i2 = 1; i2 < n - 1; i2++)
      for (int i1 = 1; i1 < n - 1; i1++) {
        struct extreme point = {g[i3][i2][i1], i1, i2, i3};
        consider(largest, 1, point);
        consider(smallest, -1, point);
      }

  zero3(v, n);
  for (int k = 0; k < EXTREMES; k++) {
    g[smallest[k].i3][smallest[k].i2][smallest[k].i1] = -1.0;
    g[largest[k].i3][largest[k].i2][largest[k].i1] = 1.0;
  }
#pragma omp parallel
  comm3(v, n);
}

/* One V-cycle on u (finest level LT) for the residual r. */
static void mg3p(void) {
  for (int k = LT; k > 1; k--) rprj3(level(r, k), GRID(k), level(r, k - 1), GRID(k - 1));
  zero3(level(u, 1), GRID(1));
  psinv(level(r, 1), level(u, 1), GRID(1));
  for (int k = 2; k < LT; k++) {
    zero3(level(u, k), GRID(k));
    interp(level(u, k - 1), GRID(k - 1), level(u, k), GRID(k));
    resid(level(u, k), level(r, k), level(r, k), GRID(k));
    psinv(level(r, k), level(u, k), GRID(k));
  }
  interp(level(u, LT - 1), GRID(LT - 1), level(u, LT), GRID(LT));
  resid(level(u, LT), v, level(r, LT), GRID(LT));
  psinv(level(r, LT), level(u, LT), GRID(LT));
}

int main(int argc, char **argv) {
  int status = npb_check_arguments(argc, argv, "mg");
  if (status != 0) return status;
  printf("\n NAS Parallel Benchmarks: MG, class %s, %dx%dx%d, %d iterations\n", NPB_CLASS_NAME,
         NX, NX, NX, NIT);
  const int threads = npb_threads();

  double *top_u = level(u, LT), *top_r = level(r, LT);
  zran3();
  /* Untimed: one cycle touches every array once; then start again. */
  resid(top_u, v, top_r, GRID(LT));
  mg3p();
  zero3(top_u, GRID(LT));

  double start = npb_seconds();
  resid(top_u, v, top_r, GRID(LT));
  printf(" initial residual norm %20.13e\n", norm2u3(top_r, GRID(LT)));
  for (int iteration = 1; iteration <= NIT; iteration++) {
    mg3p();
    resid(top_u, v, top_r, GRID(LT));
  }
  double rnm2 = norm2u3(top_r, GRID(LT));
  double seconds = npb_seconds() - start;

  int verified = npb_verify_close("rnm2", rnm2, RNM2_REFERENCE, TOLERANCE);
  char size[48];
  snprintf(size, sizeof size, "%dx%dx%d", NX, NX, NX);
  struct npb_result result = {
      .kernel = "MG", .size = size, .iterations = NIT, .seconds = seconds,
      .mops = 58.0 * NIT * NX * NX * NX / seconds / 1e6, .operation = "floating point",
      .threads = threads, .verified = verified};
  return npb_report(&result);
}
