/* A main that ends without `return`, which C defines as returning 0: the
 * status of every process of the job. rdmx_omp reaches the program's main
 * by wrapping it at link time, so main keeps its name and that rule; built
 * as C++ too (no_return.cpp), which has the same rule. */
#include <omp.h>
#include <stdio.h>

int main(void) {
  int threads = 0;
#pragma omp parallel
  {
#pragma omp master
    threads = omp_get_num_threads();
  }
  printf("no_return: %d threads\n", threads);
}
