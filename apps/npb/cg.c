/* CG, the conjugate gradient kernel of the NAS Parallel Benchmarks:
 * estimates the smallest eigenvalue of a large sparse symmetric positive
 * definite matrix by inverse power iteration, each outer iteration solving
 * A z = x with 25 unpreconditioned conjugate gradient steps.
 *
 * The matrix is the benchmark's random one: a sum of NA outer products of
 * sparse random vectors, each scaled by a factor falling geometrically from
 * 1 to RCOND, shifted by (RCOND - SHIFT) on the diagonal. Its generation
 * consumes the random sequence in the order the specification gives, which
 * the official zeta values depend on. */
#include <math.h>
#include <stdio.h>

#include "common/npb.h"
#include "rdmx/omp/shared.h"

#if NPB_CLASS == NPB_CLASS_S
#define NA 1400
#define NONZER 7
#define SHIFT 10.0
#define ZETA_REFERENCE 8.5971775078648
#elif NPB_CLASS == NPB_CLASS_W
#define NA 7000
#define NONZER 8
#define SHIFT 12.0
#define ZETA_REFERENCE 10.362595087124
#else
#define NA 14000
#define NONZER 11
#define SHIFT 20.0
#define ZETA_REFERENCE 17.130235054029
#endif

#define NITER 15
#define CG_STEPS 25
#define RCOND 0.1
#define SEED 314159265.0
#define TOLERANCE 1e-10
/* Entries generated before duplicates are summed: at most NONZER + 1 per
 * vector, squared by the outer product. */
#define NZ (NA * (NONZER + 1) * (NONZER + 1))

/* The matrix in compressed rows. */
RDMX_SHARED static int row_start[NA + 1];
RDMX_SHARED static int column[NZ];
RDMX_SHARED static double value[NZ];
/* The sparse random vectors the matrix is built from. */
RDMX_SHARED static int vector_length[NA];
RDMX_SHARED static int vector_index[NA][NONZER + 1];
RDMX_SHARED static double vector_value[NA][NONZER + 1];

RDMX_SHARED static double x[NA], z[NA], p[NA], q[NA], r[NA];

/* Fills index/element with `count` distinct random positions in [0, NA)
 * and their random values: a value, then a position drawn from the next
 * number scaled to the power of two at or above NA; positions past NA and
 * repeats are drawn again. */
static void random_sparse_vector(double *seed, int count, int index[], double element[]) {
  int power = 1;
  while (power < NA) power *= 2;
  int filled = 0;
  while (filled < count) {
    double element_value = npb_randlc(seed, NPB_LCG_MULTIPLIER);
    int position = (int)(power * npb_randlc(seed, NPB_LCG_MULTIPLIER));
    if (position >= NA) continue;
    int repeated = 0;
    for (int k = 0; k < filled; k++) repeated |= index[k] == position;
    if (repeated) continue;
    index[filled] = position;
    element[filled] = element_value;
    filled++;
  }
}

/* Sets the vector's element at `position` to `element_value`, appending it
 * when the position is not among the nonzeros yet. */
static void set_element(int *length, int index[], double element[], int position,
                        double element_value) {
  for (int k = 0; k < *length; k++)
    if (index[k] == position) {
      element[k] = element_value;
      return;
    }
  index[*length] = position;
  element[*length] = element_value;
  (*length)++;
}

/* Builds the matrix: entries are generated vector by vector, row by row
 * of each outer product; duplicates of an entry are summed in the order
 * they were generated (a stable sort of each row by column, then a merge),
 * which keeps the sums bit for bit what the specification's generator
 * gives. */
static void make_matrix(double *seed) {
  for (int i = 0; i < NA; i++) {
    vector_length[i] = NONZER;
    random_sparse_vector(seed, NONZER, vector_index[i], vector_value[i]);
    set_element(&vector_length[i], vector_index[i], vector_value[i], i, 0.5);
  }

  /* Rows of the raw entries, in generation order. */
  for (int j = 0; j <= NA; j++) row_start[j] = 0;
  for (int i = 0; i < NA; i++)
    for (int k = 0; k < vector_length[i]; k++) row_start[vector_index[i][k] + 1] += vector_length[i];
  for (int j = 0; j < NA; j++) row_start[j + 1] += row_start[j];
  RDMX_SHARED static int row_fill[NA]; /* next free slot of a row */
  for (int j = 0; j < NA; j++) row_fill[j] = row_start[j];

  const double ratio = pow(RCOND, 1.0 / NA);
  double size = 1.0;
  for (int i = 0; i < NA; i++) {
    for (int k = 0; k < vector_length[i]; k++) {
      int row = vector_index[i][k];
      double scale = size * vector_value[i][k];
      for (int l = 0; l < vector_length[i]; l++) {
        int col = vector_index[i][l];
        double entry = vector_value[i][l] * scale;
        if (col == row && row == i) entry = entry + RCOND - SHIFT;
        column[row_fill[row]] = col;
        value[row_fill[row]] = entry;
        row_fill[row]++;
      }
    }
    size *= ratio;
  }

  /* Sort each row by column (insertion sort: stable) and merge duplicates
   * into the first of them; rows move down as they shrink. */
  int kept = 0;
  for (int j = 0; j < NA; j++) {
    int begin = row_start[j], end = row_start[j + 1];
    for (int k = begin + 1; k < end; k++) {
      int col = column[k];
      double entry = value[k];
      int m = k;
      for (; m > begin && column[m - 1] > col; m--) {
        column[m] = column[m - 1];
        value[m] = value[m - 1];
      }
      column[m] = col;
      value[m] = entry;
    }
    row_start[j] = kept;
    for (int k = begin; k < end; k++) {
      if (kept > row_start[j] && column[kept - 1] == column[k]) {
        value[kept - 1] += value[k];
      } else {
        column[kept] = column[k];
        value[kept] = value[k];
        kept++;
      }
    }
  }
  row_start[NA] = kept;
}

/* out = A in; an orphaned worksharing loop, called inside a parallel region. */
static void multiply(const double *in, double *out) {
#pragma omp for schedule(static)
  for (int j = 0; j < NA; j++) {
    double sum = 0.0;
    for (int k = row_start[j]; k < row_start[j + 1]; k++) sum += value[k] * in[column[k]];
    out[j] = sum;
  }
}

/* z ~ A^-1 x by CG_STEPS conjugate gradient steps from z = 0; returns
 * ||x - A z||. */
static double conj_grad(void) {
  double rho = 0, next_rho = 0, d = 0, residual = 0;
#pragma omp parallel
  {
#pragma omp for schedule(static) reduction(+ : next_rho)
    for (int j = 0; j < NA; j++) {
      q[j] = 0.0;
      z[j] = 0.0;
      r[j] = x[j];
      p[j] = r[j];
      next_rho += r[j] * r[j];
    }
    for (int step = 0; step < CG_STEPS; step++) {
      /* Every thread read rho, next_rho and d of the previous step before
       * that step's last loop ended. */
#pragma omp single
      {
        rho = next_rho;
        next_rho = 0.0;
        d = 0.0;
      }
      multiply(p, q);
#pragma omp for schedule(static) reduction(+ : d)
      for (int j = 0; j < NA; j++) d += p[j] * q[j];
      const double alpha = rho / d;
#pragma omp for schedule(static) reduction(+ : next_rho)
      for (int j = 0; j < NA; j++) {
        z[j] = z[j] + alpha * p[j];
        r[j] = r[j] - alpha * q[j];
        next_rho += r[j] * r[j];
      }
      const double beta = next_rho / rho;
#pragma omp for schedule(static)
      for (int j = 0; j < NA; j++) p[j] = r[j] + beta * p[j];
    }
    multiply(z, r);
#pragma omp for schedule(static) reduction(+ : residual)
    for (int j = 0; j < NA; j++) {
      double difference = x[j] - r[j];
      residual += difference * difference;
    }
  }
  return sqrt(residual);
}

/* One inverse power step: solves, then x = z / ||z||; returns zeta. */
static double power_step(double *residual_norm) {
  *residual_norm = conj_grad();
  double xz = 0.0, zz = 0.0;
#pragma omp parallel for schedule(static) reduction(+ : xz, zz)
  for (int j = 0; j < NA; j++) {
    xz += x[j] * z[j];
    zz += z[j] * z[j];
  }
  const double inverse_norm = 1.0 / sqrt(zz);
#pragma omp parallel for schedule(static)
  for (int j = 0; j < NA; j++) x[j] = inverse_norm * z[j];
  return SHIFT + 1.0 / xz;
}

static void reset_x(void) {
#pragma omp parallel for schedule(static)
  for (int j = 0; j < NA; j++) x[j] = 1.0;
}

int main(int argc, char **argv) {
  int status = npb_check_arguments(argc, argv, "cg");
  if (status != 0) return status;
  printf("\n NAS Parallel Benchmarks: CG, class %s, size %d, %d nonzeros per vector\n",
         NPB_CLASS_NAME, NA, NONZER);
  const int threads = npb_threads();

  double seed = SEED;
  npb_randlc(&seed, NPB_LCG_MULTIPLIER); /* the specification draws one number first */
  make_matrix(&seed);
  printf(" %d nonzeros\n", row_start[NA]);

  double residual_norm;
  reset_x();
  power_step(&residual_norm); /* untimed: touches every array once */
  reset_x();

  double zeta = 0.0;
  double start = npb_seconds();
  for (int iteration = 1; iteration <= NITER; iteration++) {
    zeta = power_step(&residual_norm);
    printf(" %5d %20.14e %20.13e\n", iteration, residual_norm, zeta);
  }
  double seconds = npb_seconds() - start;

  int verified = npb_verify_close("zeta", zeta, ZETA_REFERENCE, TOLERANCE);
  const double per_vector = NONZER * (NONZER + 1.0);
  char size[32];
  snprintf(size, sizeof size, "%d", NA);
  struct npb_result result = {
      .kernel = "CG", .size = size, .iterations = NITER, .seconds = seconds,
      .mops = 2.0 * NITER * NA * (3.0 + per_vector + 25.0 * (5.0 + per_vector) + 3.0) / seconds / 1e6,
      .operation = "floating point", .threads = threads, .verified = verified};
  return npb_report(&result);
}
