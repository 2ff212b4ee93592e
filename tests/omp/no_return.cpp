// no_return.c in C++, whose main also returns 0 when it ends without `return`.
#include <omp.h>

#include <cstdio>

int main() {
  int threads = 0;
#pragma omp parallel
  {
#pragma omp master
    threads = omp_get_num_threads();
  }
  std::printf("no_return: %d threads\n", threads);
}
