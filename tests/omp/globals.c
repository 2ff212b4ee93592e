/* An OpenMP program written for libgomp, with no annotation: its globals
 * (initialized, zeroed, function-static), its heap (malloc, calloc, realloc,
 * strdup, posix_memalign), its arguments and its exit handler behave as on
 * one machine when its threads run in several processes. Every thread of
 * every process checks every value; a thread's own malloc inside a region
 * is its scratch. */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GRID 4096
#define BLOCK 100000

static int table[8] = {3, 1, 4, 1, 5, 9, 2, 6}; /* initialized data */
double grid[GRID];                              /* zeroed data */
static long counter;
static const char* greeting = "hello"; /* a pointer to a constant */
static double* block;                  /* heap blocks, allocated by main */
static int* zeroed;
static char* name;
static double* aligned;
static long long* grown;

static void at_end(void) { printf("globals: exit handler ran, counter %ld\n", counter); }

static long next_ticket(void) {
  static long tickets = 100; /* function-static */
  long t;
#pragma omp atomic capture
  t = ++tickets;
  return t;
}

int main(int argc, char** argv) {
  long bad = 0;
  atexit(at_end);
  block = malloc(BLOCK * sizeof(double));
  zeroed = calloc(1000, sizeof(int));
  name = strdup(argv[0]);
  void* p = NULL;
  if (posix_memalign(&p, 4096, 8192) != 0) {
    printf("globals: FAILED: posix_memalign\n");
    return 1;
  }
  aligned = p;
  grown = malloc(16 * sizeof(long long));
  for (int i = 0; i < 16; ++i) grown[i] = i;
  grown = realloc(grown, 4096 * sizeof(long long)); /* keeps the first 16 */
  for (int i = 16; i < 4096; ++i) grown[i] = i;
  if (block == NULL || zeroed == NULL || name == NULL || grown == NULL || ((unsigned long)aligned & 4095) != 0) {
    printf("globals: FAILED: allocation\n");
    return 1;
  }
  for (int i = 0; i < 1024; ++i) aligned[i] = -i;
  table[0] = 42; /* written by main before the region */

#pragma omp parallel
  {
#pragma omp for
    for (int i = 0; i < GRID; ++i) grid[i] = i + table[i % 8];
#pragma omp for
    for (int i = 0; i < BLOCK; ++i) block[i] = 2.0 * i;
#pragma omp atomic
    counter += 1;
    next_ticket();
    /* A thread's own scratch, allocated, used and freed in the region. */
    double* mine = malloc(64 * sizeof(double));
    for (int i = 0; i < 64; ++i) mine[i] = omp_get_thread_num();
    for (int i = 0; i < 64; ++i)
      if (mine[i] != omp_get_thread_num()) {
#pragma omp atomic
        bad += 1;
      }
    free(mine);
  }

  const int threads = omp_get_max_threads();
#pragma omp parallel reduction(+ : bad)
  {
    for (int i = 0; i < GRID; ++i) bad += grid[i] != i + (i % 8 == 0 ? 42 : table[i % 8]);
    for (int i = 0; i < BLOCK; i += 7) bad += block[i] != 2.0 * i;
    for (int i = 0; i < 1000; ++i) bad += zeroed[i] != 0;
    for (int i = 0; i < 1024; ++i) bad += aligned[i] != -i;
    for (int i = 0; i < 4096; ++i) bad += grown[i] != i;
    bad += strcmp(greeting, "hello") != 0;
    bad += strcmp(name, argv[0]) != 0; /* main's arguments, read by every thread */
    bad += counter != threads;
    bad += table[1] != 1 || table[7] != 6;
    if (bad != 0) printf("globals: FAILED on thread %d: %ld wrong values\n", omp_get_thread_num(), bad);
  }
  if (next_ticket() != 100 + threads + 1) ++bad;

  free(block);
  free(zeroed);
  free(name);
  free(aligned);
  free(grown);
  /* Freed blocks come back: allocate as much again. */
  block = malloc(BLOCK * sizeof(double));
  if (block == NULL) ++bad;
  free(block);
  printf("globals: %s over %d threads\n", bad == 0 ? "all checks passed" : "FAILED", threads);
  return bad == 0 ? 0 : 1;
}
