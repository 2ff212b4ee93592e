/* OpenMP locks, simple and nested, across every thread of every process:
 * updates that are not atomic, made under a lock, all survive, and what one
 * holder wrote is what the next one reads (a set is an acquire, an unset a
 * release). Locks live in shared globals and in shared heap memory. */
#include <omp.h>
#include <stdio.h>

#include "check.h"
#include "rdmx/omp/shared.h"

#define ROUNDS 40

RDMX_SHARED static omp_lock_t counter_lock;
RDMX_SHARED static long counter;
RDMX_SHARED static long history[1024];
RDMX_SHARED static omp_nest_lock_t nest;
RDMX_SHARED static long nested_total;
RDMX_SHARED static int deepest;

struct guarded {
  omp_lock_t lock;
  long a, b; /* a == b whenever the lock is free */
};

/* Adds `depth` levels of the nested lock, then one to the total. */
static void nested_add(int depth) {
  omp_set_nest_lock(&nest);
  if (depth > 1) {
    nested_add(depth - 1);
  } else {
    int level = omp_test_nest_lock(&nest); /* already held: one deeper */
    if (level > deepest) deepest = level;
    omp_unset_nest_lock(&nest);
    nested_total++;
  }
  omp_unset_nest_lock(&nest);
}

int main(void) {
  omp_init_lock(&counter_lock);
  omp_init_nest_lock(&nest);
  struct guarded* g = rdmx_shared_malloc(sizeof *g);
  omp_init_lock(&g->lock);
  g->a = g->b = 0;
  int threads = omp_get_max_threads();

  /* A read-modify-write under the lock: no lost update, and each holder
   * sees the value the previous one wrote (history is a chain). */
  counter = 0;
  #pragma omp parallel
  {
    for (int r = 0; r < ROUNDS; r++) {
      omp_set_lock(&counter_lock);
      long seen = counter;
      if (seen < 1024) history[seen] = omp_get_thread_num() + 1;
      counter = seen + 1;
      omp_unset_lock(&counter_lock);
    }
  }
  CHECK(counter == (long)threads * ROUNDS, "counter %ld, expected %ld", counter, (long)threads * ROUNDS);
  long holes = 0;
  for (long i = 0; i < counter && i < 1024; i++) holes += history[i] == 0;
  CHECK(holes == 0, "%ld steps of the chain lost", holes);

  /* omp_test_lock: threads that fail to take the lock try again later;
   * two fields updated apart stay equal for every holder. */
  #pragma omp parallel
  {
    int done = 0, misses = 0;
    while (done < ROUNDS) {
      if (omp_test_lock(&g->lock)) {
        if (g->a != g->b) misses = -1000000;
        g->a++;
        g->b++;
        omp_unset_lock(&g->lock);
        done++;
      } else {
        misses++;
      }
    }
    CHECK(misses >= 0, "thread %d saw a torn pair", omp_get_thread_num());
  }
  CHECK(g->a == (long)threads * ROUNDS && g->b == g->a, "pair %ld/%ld, expected %ld", g->a, g->b,
        (long)threads * ROUNDS);

  /* Nested locks: each thread takes the lock three deep, and tests it
   * once more inside (omp_test_nest_lock returns the new depth). */
  nested_total = 0;
  deepest = 0;
  #pragma omp parallel
  {
    for (int r = 0; r < ROUNDS / 4; r++) nested_add(3);
  }
  CHECK(nested_total == (long)threads * (ROUNDS / 4), "nested total %ld, expected %ld", nested_total,
        (long)threads * (ROUNDS / 4));
  CHECK(deepest == 4, "deepest nesting %d, expected 4", deepest);

  /* The lock is free again: the master takes and gives it back. */
  CHECK(omp_test_lock(&counter_lock) == 1, "counter lock still held after the regions");
  omp_unset_lock(&counter_lock);
  omp_destroy_lock(&counter_lock);
  omp_destroy_lock(&g->lock);
  omp_destroy_nest_lock(&nest);
  rdmx_shared_free(g);

  if (failures == 0) printf("locks: all checks passed on %d threads\n", threads);
  return failures == 0 ? 0 : 1;
}
