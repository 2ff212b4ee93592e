/* What every NAS Parallel Benchmark kernel here shares: the benchmark's
 * random number generator, the class a binary was built for, verification
 * against the official values, and the report NPB prints.
 *
 * Nothing here holds mutable state, so the same object serves the libgomp
 * build and the build on rdmx's OpenMP runtime. */
#ifndef NPB_COMMON_H
#define NPB_COMMON_H

#include <stdint.h>

/* Each kernel is compiled for one class: -DCLASS=S, W or A (default S). */
#ifndef CLASS
#define CLASS S
#endif
#define NPB_STRINGIFY_(x) #x
#define NPB_STRINGIFY(x) NPB_STRINGIFY_(x)
#define NPB_CLASS_NAME NPB_STRINGIFY(CLASS)
/* The class as a number the preprocessor can compare:
 *   #if NPB_CLASS == NPB_CLASS_S */
#define NPB_CLASS_S 1
#define NPB_CLASS_W 2
#define NPB_CLASS_A 3
#define NPB_PASTE_(a, b) a##b
#define NPB_PASTE(a, b) NPB_PASTE_(a, b)
#define NPB_CLASS NPB_PASTE(NPB_CLASS_, CLASS)
#if NPB_CLASS != NPB_CLASS_S && NPB_CLASS != NPB_CLASS_W && NPB_CLASS != NPB_CLASS_A
#error "CLASS must be S, W or A"
#endif

/* The generator: x(k+1) = a * x(k) mod 2^46, a value returned as
 * x(k+1) * 2^-46. Seeds and multipliers are integers below 2^46 held in a
 * double, as the specification passes them. */
#define NPB_LCG_MULTIPLIER 1220703125.0 /* 5^13 */

/* Advances *x once with multiplier a; returns the new value in (0, 1). */
double npb_randlc(double *x, double a);
/* Advances *x n times with multiplier a, storing the values in y[0..n-1]. */
void npb_vranlc(long n, double *x, double a, double y[]);
/* a^n mod 2^46: the multiplier that skips n steps of the generator. */
double npb_lcg_power(double a, uint64_t n);

/* The class may also be named as the first argument (it must match the one
 * compiled in, so a script cannot silently run the wrong size). Returns 0
 * when the arguments are acceptable, else prints why and returns the exit
 * status the kernel must end with. */
int npb_check_arguments(int argc, char **argv, const char *kernel);

/* Whether the run compares against a deliberately wrong reference: set
 * NPB_CORRUPT_REFERENCE=1 to see that a kernel refuses a wrong result. */
int npb_reference_corrupted(void);
/* |value - reference| / |reference| <= tolerance, against the corrupted
 * reference when npb_reference_corrupted(). Prints both. */
int npb_verify_close(const char *what, double value, double reference, double tolerance);

/* Wall-clock seconds (omp_get_wtime). */
double npb_seconds(void);
/* The number of threads a parallel region gets. */
int npb_threads(void);

struct npb_result {
  const char *kernel;    /* "EP" */
  const char *size;      /* "33554432", "32x32x32" */
  int iterations;
  double seconds;
  double mops;
  const char *operation; /* what Mop/s counts */
  int threads;
  int verified;
};

/* Prints NPB's report, ending in VERIFICATION SUCCESSFUL or
 * VERIFICATION FAILED; returns the exit status (0 only if verified). */
int npb_report(const struct npb_result *result);

#endif
