// sum.c in C++ (tests/install/check_omp.cmake): C++ too defines a main
// that ends without `return` as returning 0.
#include <omp.h>

#include <cstdio>

int main() {
  const long terms = 100000;
  double sum = 0;
  int threads = 0;
#pragma omp parallel for reduction(+ : sum)
  for (long i = 1; i <= terms; i++) sum += static_cast<double>(i);
#pragma omp parallel
  {
#pragma omp master
    threads = omp_get_num_threads();
  }
  std::printf("omp sum %.0f over %d threads\n", sum, threads);
}
