/* Failure paths of rdmx_omp, one per argument:
 *   doacross an unsupported construct (ordered depend) met by every
 *            thread: each process names it and stops
 *   target   an unsupported construct in serial code (process 0 only)
 *   relock, unheld, uninitialized
 *            an OpenMP lock set twice by its holder, unset by a thread
 *            that does not hold it, set before omp_init_lock
 *   exit     exit(3) from main on process 0: every process ends with 3
 *   die      the last thread dies inside a region: the others stop, naming
 *            the failed process, instead of waiting for it
 * Each must end in bounded time (the test's timeout). */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rdmx/omp/shared.h"

RDMX_SHARED static omp_lock_t lock;

static void work(int i) {
  volatile double x = i;
  (void)x;
}

int main(int argc, char** argv) {
  const char* mode = argc > 1 ? argv[1] : "";
  int n = 0;
  #pragma omp parallel
  {
    #pragma omp atomic
    n++;
  }
  printf("failure test %s on %d threads\n", mode, n);
  fflush(stdout);
  if (strcmp(mode, "doacross") == 0) {
    #pragma omp parallel
    {
      #pragma omp for ordered(1)
      for (int i = 0; i < 8; ++i) {
        #pragma omp ordered depend(sink : i - 1)
        work(i);
        #pragma omp ordered depend(source)
      }
    }
  } else if (strcmp(mode, "target") == 0) {
    #pragma omp target
    work(1);
  } else if (strcmp(mode, "relock") == 0) {
    omp_init_lock(&lock);
    omp_set_lock(&lock);
    omp_set_lock(&lock);
  } else if (strcmp(mode, "unheld") == 0) {
    omp_init_lock(&lock);
    omp_unset_lock(&lock);
  } else if (strcmp(mode, "uninitialized") == 0) {
    omp_set_lock(&lock);
  } else if (strcmp(mode, "exit") == 0) {
    exit(3);
  } else if (strcmp(mode, "die") == 0) {
    #pragma omp parallel
    {
      if (omp_get_thread_num() == omp_get_num_threads() - 1 && omp_get_num_threads() > 1) {
        fprintf(stderr, "thread %d dies\n", omp_get_thread_num());
        _exit(9);
      }
    }
  }
  printf("failure test: survived %s\n", mode);
  return 0;
}
