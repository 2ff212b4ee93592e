/* A flag handed from a writer to a reader under `omp flush`, with an
 * acquire of the writer's between its write of the flag and its flush: in
 * odd rounds a fault on a block the reader released meanwhile (a causal
 * miss), in even rounds an `omp atomic`. The flag's own block holds a
 * variable the reader writes too, so that acquire has to merge the
 * writer's copy of it early, flag and all. The reader, which sees the flag
 * only then, must still find the data the writer wrote before the flag,
 * not its copy from the previous round. The reader waits as LU does: a
 * flush in the loop, none after it. */
#include <omp.h>
#include <stdio.h>
#include <time.h>

#include "check.h"

#define ROUNDS 20
#define DATA (3 * 8192) /* doubles: 192 KiB, a dozen blocks and more */
#define APART 65536     /* past the largest block the tests use */

static double data[DATA] __attribute__((aligned(APART)));
/* The flag, and beside it in one block what the reader writes as it waits. */
static struct {
  int flag;
  int waits;
} handoff __attribute__((aligned(APART)));
static int polls __attribute__((aligned(APART))); /* also written by the reader as it waits */
static int taken __attribute__((aligned(APART))); /* the round the reader has checked */
static int updates __attribute__((aligned(APART))); /* the writer's atomics */

static double value(int round, int j) { return round * 100000.0 + j; }

/* Busy for `us` microseconds: the other thread runs meanwhile. */
static void spin(long us) {
  struct timespec start, now;
  clock_gettime(CLOCK_MONOTONIC, &start);
  do clock_gettime(CLOCK_MONOTONIC, &now);
  while ((now.tv_sec - start.tv_sec) * 1000000L + (now.tv_nsec - start.tv_nsec) / 1000 < us);
}

int main(void) {
  long stale = 0, seen = 0;
#pragma omp parallel num_threads(2) reduction(+ : stale, seen)
  {
    const int me = omp_get_thread_num();
    for (int round = 1; round <= ROUNDS && omp_get_num_threads() == 2; ++round) {
      if (me == 0) {
        for (int j = 0; j < DATA; ++j) data[j] = value(round, j);
        handoff.flag = round;
        spin(1000); /* the reader releases the flag's block and `polls` meanwhile */
        if (round % 2 == 1) {
          seen += polls; /* a miss on a block the reader released */
        } else {
#pragma omp atomic
          updates += 1; /* its lock acquires; its unlock releases the counter */
        }
        spin(2000); /* the flag may be out, the data not yet */
#pragma omp flush
        while (taken < round) {
#pragma omp flush
          ;
        }
      } else {
        while (handoff.flag < round) {
          ++handoff.waits;
          ++polls;
#pragma omp flush
        }
        for (int j = 0; j < DATA; ++j) stale += data[j] != value(round, j);
        taken = round;
#pragma omp flush
      }
    }
  }
  CHECK(stale == 0, "handoff: %ld stale values read after the flag", stale);
  CHECK(seen >= 0, "handoff: the reader's count went negative (%ld)", seen);
  CHECK(updates == 0 || updates == ROUNDS / 2, "handoff: %d atomic updates, expected %d", updates, ROUNDS / 2);
  if (failures == 0) printf("handoff: all checks passed\n");
  return failures != 0;
}
