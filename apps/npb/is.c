/* IS, the integer sort kernel of the NAS Parallel Benchmarks: ranks keys
 * drawn from a bell-shaped distribution (each the sum of four uniform
 * random numbers) by counting sort. Keys are first distributed into buckets
 * by their high bits, each thread counting its own share, so that each
 * bucket's key range can then be counted and prefix-summed by one thread
 * with no write shared between threads. Each of the ten timed iterations
 * changes two keys and checks the rank of five keys against the official
 * values; the last ranking then sorts the keys, and the sort is checked. */
#include <omp.h>
#include <stdio.h>

#include "common/npb.h"
#include "rdmx/omp/shared.h"

#if NPB_CLASS == NPB_CLASS_S
#define TOTAL_KEYS_LOG2 16
#define MAX_KEY_LOG2 11
#define BUCKETS_LOG2 9
static const int test_index[] = {48427, 17148, 23627, 62548, 4431};
static const int test_rank[] = {0, 18, 346, 64917, 65463};
/* The rank of test key i in iteration it is test_rank[i] + rank_sign[i] * (it + rank_shift[i]). */
static const int rank_sign[] = {1, 1, 1, -1, -1};
static const int rank_shift[] = {0, 0, 0, 0, 0};
#elif NPB_CLASS == NPB_CLASS_W
#define TOTAL_KEYS_LOG2 20
#define MAX_KEY_LOG2 16
#define BUCKETS_LOG2 10
static const int test_index[] = {357773, 934767, 875723, 898999, 404505};
static const int test_rank[] = {1249, 11698, 1039987, 1043896, 1048018};
static const int rank_sign[] = {1, 1, -1, -1, -1};
static const int rank_shift[] = {-2, -2, 0, 0, 0};
#else
#define TOTAL_KEYS_LOG2 23
#define MAX_KEY_LOG2 19
#define BUCKETS_LOG2 10
static const int test_index[] = {2112377, 662041, 5336171, 3642833, 4250760};
static const int test_rank[] = {104, 17523, 123928, 8288932, 8388264};
static const int rank_sign[] = {1, 1, 1, -1, -1};
static const int rank_shift[] = {-1, -1, -1, -1, -1};
#endif

#define TOTAL_KEYS (1L << TOTAL_KEYS_LOG2)
#define MAX_KEY (1 << MAX_KEY_LOG2)
#define BUCKETS (1 << BUCKETS_LOG2)
#define BUCKET_SHIFT (MAX_KEY_LOG2 - BUCKETS_LOG2) /* key >> BUCKET_SHIFT: its bucket */
#define ITERATIONS 10
#define TESTS 5
#define SEED 314159265.0
/* Each thread counts its keys per bucket in a row of its own. */
#define MAX_THREADS 256

RDMX_SHARED static int key_array[TOTAL_KEYS];
RDMX_SHARED static int bucketed_keys[TOTAL_KEYS];     /* the keys, bucket by bucket */
RDMX_SHARED static int keys_at_most[MAX_KEY];         /* how many keys are <= k */
RDMX_SHARED static int bucket_count[MAX_THREADS][BUCKETS]; /* keys of a thread's share per bucket */
RDMX_SHARED static int bucket_begin[BUCKETS + 1];     /* where a bucket starts in bucketed_keys */

/* Key i is (MAX_KEY / 4) * (sum of the random numbers 4i+1 .. 4i+4): each
 * thread skips the generator ahead to its first key. */
static void generate_keys(void) {
#pragma omp parallel
  {
    long threads = omp_get_num_threads(), thread = omp_get_thread_num();
    long chunk = (TOTAL_KEYS + threads - 1) / threads;
    long first = thread * chunk;
    long last = first + chunk < TOTAL_KEYS ? first + chunk : TOTAL_KEYS;
    double seed = SEED;
    npb_randlc(&seed, npb_lcg_power(NPB_LCG_MULTIPLIER, 4 * (uint64_t)first));
    for (long i = first; i < last; i++) {
      double x = npb_randlc(&seed, NPB_LCG_MULTIPLIER);
      x += npb_randlc(&seed, NPB_LCG_MULTIPLIER);
      x += npb_randlc(&seed, NPB_LCG_MULTIPLIER);
      x += npb_randlc(&seed, NPB_LCG_MULTIPLIER);
      key_array[i] = (int)((MAX_KEY / 4) * x);
    }
  }
}

/* Ranks the keys of iteration `iteration` (keys_at_most afterwards) and
 * returns how many of the five rank checks passed. */
static int rank(int iteration) {
  key_array[iteration] = iteration;
  key_array[iteration + ITERATIONS] = MAX_KEY - iteration;
  int test_key[TESTS];
  for (int i = 0; i < TESTS; i++) test_key[i] = key_array[test_index[i]];

#pragma omp parallel
  {
    int thread = omp_get_thread_num();
    int *count = bucket_count[thread];
    for (int b = 0; b < BUCKETS; b++) count[b] = 0;
    /* Both loops over the keys split them alike (same static schedule,
     * same bounds), so a thread places exactly the keys it counted. */
#pragma omp for schedule(static)
    for (long i = 0; i < TOTAL_KEYS; i++) count[key_array[i] >> BUCKET_SHIFT]++;
#pragma omp single
    {
      int begin = 0;
      for (int b = 0; b < BUCKETS; b++) {
        bucket_begin[b] = begin;
        for (int t = 0; t < omp_get_num_threads(); t++) begin += bucket_count[t][b];
      }
      bucket_begin[BUCKETS] = begin;
    }
    int next[BUCKETS]; /* where this thread's next key of each bucket goes */
    for (int b = 0; b < BUCKETS; b++) {
      next[b] = bucket_begin[b];
      for (int t = 0; t < thread; t++) next[b] += bucket_count[t][b];
    }
#pragma omp for schedule(static)
    for (long i = 0; i < TOTAL_KEYS; i++) {
      int key = key_array[i];
      bucketed_keys[next[key >> BUCKET_SHIFT]++] = key;
    }
#pragma omp for schedule(dynamic)
    for (int b = 0; b < BUCKETS; b++) {
      int low = b << BUCKET_SHIFT, high = (b + 1) << BUCKET_SHIFT;
      for (int k = low; k < high; k++) keys_at_most[k] = 0;
      for (int i = bucket_begin[b]; i < bucket_begin[b + 1]; i++) keys_at_most[bucketed_keys[i]]++;
      keys_at_most[low] += bucket_begin[b];
      for (int k = low + 1; k < high; k++) keys_at_most[k] += keys_at_most[k - 1];
    }
  }

  int passed = 0;
  for (int i = 0; i < TESTS; i++) {
    int key = test_key[i];
    int expected = test_rank[i] + rank_sign[i] * (iteration + rank_shift[i]) +
                   npb_reference_corrupted();
    if (key <= 0 || key >= TOTAL_KEYS) {
      printf(" iteration %2d: test key %d is %d, outside the checked range\n", iteration, i, key);
    } else if (keys_at_most[key - 1] != expected) {
      printf(" iteration %2d: test key %d (%d) has rank %d, expected %d\n", iteration, i, key,
             keys_at_most[key - 1], expected);
    } else {
      passed++;
    }
  }
  return passed;
}

/* Sorts the keys with the last ranking and checks that they are in order. */
static int full_verify(void) {
#pragma omp parallel for schedule(dynamic)
  for (int b = 0; b < BUCKETS; b++)
    for (int i = bucket_begin[b]; i < bucket_begin[b + 1]; i++) {
      int key = bucketed_keys[i];
      key_array[--keys_at_most[key]] = key;
    }
  long out_of_order = 0;
#pragma omp parallel for schedule(static) reduction(+ : out_of_order)
  for (long i = 1; i < TOTAL_KEYS; i++)
    if (key_array[i - 1] > key_array[i]) out_of_order++;
  if (out_of_order != 0) printf(" full verification: %ld keys out of order\n", out_of_order);
  return out_of_order == 0;
}

int main(int argc, char **argv) {
  int status = npb_check_arguments(argc, argv, "is");
  if (status != 0) return status;
  printf("\n NAS Parallel Benchmarks: IS, class %s, %ld keys below %d\n", NPB_CLASS_NAME,
         TOTAL_KEYS, MAX_KEY);
  const int threads = npb_threads();
  if (threads > MAX_THREADS) {
    fprintf(stderr, "is: %d threads; this kernel counts keys for at most %d\n", threads,
            MAX_THREADS);
    return 2;
  }

  generate_keys();
  rank(1); /* untimed: touches every array once */

  int passed = 0;
  double start = npb_seconds();
  for (int iteration = 1; iteration <= ITERATIONS; iteration++) passed += rank(iteration);
  double seconds = npb_seconds() - start;

  passed += full_verify();
  int checks = TESTS * ITERATIONS + 1;
  printf(" %d of %d checks passed\n", passed, checks);
  char size[32];
  snprintf(size, sizeof size, "%ld", TOTAL_KEYS);
  struct npb_result result = {
      .kernel = "IS", .size = size, .iterations = ITERATIONS, .seconds = seconds,
      .mops = (double)ITERATIONS * TOTAL_KEYS / seconds / 1e6, .operation = "keys ranked",
      .threads = threads, .verified = passed == checks};
  return npb_report(&result);
}
