/* Flags handed between threads under `omp flush` alone, as NPB's LU
 * pipelines its sweeps: no barrier, no lock, no atomic between writer and
 * reader. Each thread waits for its predecessor's flag, checks the data the
 * predecessor wrote before setting it, writes its own and passes the flag
 * on, for many rounds; then a producer and a consumer on the first and last
 * threads hand over data with `omp flush` and `omp atomic write/read`. */
#include <omp.h>
#include <stdio.h>

#define ROUNDS 10
#define WIDTH 512

static int flag[64];
static double data[64][WIDTH];
static int payload;
static int ready;

int main(void) {
  long bad = 0;
  const int n = omp_get_max_threads();
  if (n > 64) {
    printf("flush: FAILED: at most 64 threads\n");
    return 1;
  }
#pragma omp parallel reduction(+ : bad)
  {
    const int me = omp_get_thread_num();
    for (int round = 1; round <= ROUNDS; ++round) {
      if (me > 0) {
        /* Wait for the predecessor's flag of this round. */
        for (;;) {
#pragma omp flush(flag)
          if (flag[me - 1] >= round) break;
        }
#pragma omp flush
        for (int i = 0; i < WIDTH; ++i) bad += data[me - 1][i] != round * 1000.0 + (me - 1) + i;
      }
      for (int i = 0; i < WIDTH; ++i) data[me][i] = round * 1000.0 + me + i;
#pragma omp flush
      flag[me] = round;
#pragma omp flush(flag)
      /* Wait for the successor to take this round before writing the next. */
      if (me + 1 < omp_get_num_threads())
        for (;;) {
#pragma omp flush(flag)
          if (flag[me + 1] >= round) break;
        }
    }
#pragma omp barrier
    /* A producer and a consumer: data, flush, then an atomic write of the
     * flag; an atomic read of the flag, flush, then the data. */
    const int last = omp_get_num_threads() - 1;
    if (me == 0) {
      payload = 4242;
#pragma omp flush
#pragma omp atomic write
      ready = 1;
    }
    if (me == last) {
      int seen = 0;
      while (!seen) {
#pragma omp atomic read
        seen = ready;
      }
#pragma omp flush
      if (payload != 4242) {
        printf("flush: FAILED: the consumer read %d, not 4242\n", payload);
        ++bad;
      }
    }
  }
  printf("flush: %s over %d threads\n", bad == 0 ? "all checks passed" : "FAILED", n);
  return bad == 0 ? 0 : 1;
}
