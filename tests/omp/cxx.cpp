// A C++ OpenMP program: main with no parameters (a C++ name of its own
// once renamed), a class's state shared through a pointer into a shared
// local, std::vector on each thread's own stack and heap.
#include <omp.h>

#include <cstdio>
#include <vector>

#include "rdmx/omp/shared.h"

RDMX_SHARED static double grid[4096];

namespace {
struct Stats {
  double total = 0;
  long visits = 0;
};
}  // namespace

int main() {
  Stats stats;  // a shared local of main: lives on the master's stack
  #pragma omp parallel
  {
    std::vector<double> mine(16, 1.0);  // each thread's own heap
    #pragma omp for schedule(dynamic, 64)
    for (int i = 0; i < 4096; ++i) grid[i] = i * 0.5;
    double local = 0;
    #pragma omp for
    for (int i = 0; i < 4096; ++i) local += grid[i] + mine[i % 16] - 1.0;
    #pragma omp critical
    {
      stats.total += local;
      stats.visits += 1;
    }
  }
  const double expect = 0.5 * 4095.0 * 4096.0 / 2.0;
  const bool ok = stats.total == expect && stats.visits == omp_get_max_threads();
  if (!ok) std::printf("FAILED: total %.1f (expected %.1f), visits %ld\n", stats.total, expect, stats.visits);
  std::printf("%s\n", ok ? "cxx: all checks passed" : "cxx: FAILED");
  return ok ? 0 : 1;
}
