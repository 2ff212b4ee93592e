/* NPB LU's pipelined sweeps, in its own idiom: each row waits in a loop
 * `while (flag[..] == 0) { omp flush }` and, once the flag is seen, reads the
 * row its predecessor wrote with no flush between (correct on libgomp
 * because x86 keeps stores in order). The rows of a step are shared out by
 * `omp for nowait`, so a predecessor is often a thread of another process.
 * Each step sweeps down (row i waits for row i-1) and then up (row i waits
 * for row i+1), as LU's lower and upper triangular solves do; every row
 * checks its predecessor's row of this sweep and its own of the last. */
#include <omp.h>
#include <stdio.h>

#include "check.h"

#define ROWS 24
#define ROW 845 /* doubles: 6760 bytes, LU class S's row, across blocks */
#define STEPS 20

static int down[ROWS + 1], up[ROWS + 1];
static double v[ROWS][ROW];

static double value(int sweep, int row, int j) { return sweep * 1000.0 + row + j; }

/* Row `i` of sweep `sweep`: checks its own row (the previous sweep's) and
 * the predecessor's (this sweep's), then writes its own. */
static long visit(int sweep, int i, int pred) {
  long bad = 0;
  for (int j = 0; j < ROW; ++j) {
    bad += sweep > 1 && v[i][j] != value(sweep - 1, i, j);
    bad += pred >= 0 && v[pred][j] != value(sweep, pred, j);
  }
  for (int j = 0; j < ROW; ++j) v[i][j] = value(sweep, i, j);
  return bad;
}

int main(void) {
  long bad = 0;
#pragma omp parallel reduction(+ : bad)
  {
    for (int step = 1; step <= STEPS; ++step) {
      const int sweep_down = 2 * step - 1, sweep_up = 2 * step;
      /* Down: row i waits until row i-1 is done (down[i-1] set) and until
       * row i+1 took the previous handover (down[i] clear). */
#pragma omp for nowait schedule(static)
      for (int i = 0; i < ROWS; i++) {
        if (i != 0)
          while (down[i - 1] == 0) {
#pragma omp flush(down)
            ;
          }
        if (i != ROWS - 1)
          while (down[i] == 1) {
#pragma omp flush(down)
            ;
          }
        bad += visit(sweep_down, i, i - 1);
        if (i != 0) down[i - 1] = 0;
        if (i != ROWS - 1) down[i] = 1;
#pragma omp flush(down)
      }
#pragma omp barrier
      /* Up: the same from the last row, as LU's upper solve. */
#pragma omp for nowait schedule(static)
      for (int k = 0; k < ROWS; k++) {
        const int i = ROWS - 1 - k;
        if (i != ROWS - 1)
          while (up[i + 1] == 0) {
#pragma omp flush(up)
            ;
          }
        if (i != 0)
          while (up[i] == 1) {
#pragma omp flush(up)
            ;
          }
        bad += visit(sweep_up, i, i == ROWS - 1 ? -1 : i + 1);
        if (i != ROWS - 1) up[i + 1] = 0;
        if (i != 0) up[i] = 1;
#pragma omp flush(up)
      }
#pragma omp barrier
    }
  }
  CHECK(bad == 0, "pipeline: %ld stale values read after a flag", bad);
  if (failures == 0) printf("pipeline: all checks passed\n");
  return failures != 0;
}
