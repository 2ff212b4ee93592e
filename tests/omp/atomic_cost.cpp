// What an atomic costs on the DSM, counted: a relaxed `omp atomic` (a
// fetch-add, and a double's load + compare-and-swap loop, GCC's form of a
// reduction) publishes only its variable's block, not the blocks the thread
// dirtied before it; those are published at the region's end, and every
// write and every increment still counts.
#include <omp.h>

#include <cstdint>
#include <cstdio>

#include "rdmx/dsm/counters.hpp"
#include "rdmx/omp/shared.h"

namespace {
constexpr int dirtied = 48;  // blocks of 4 KiB each thread writes before its atomics
constexpr int atomics = 4;   // iterations of two atomics each
constexpr int most_threads = 64;
constexpr std::size_t per_thread = dirtied * 4096 / sizeof(double);
}  // namespace

RDMX_SHARED static std::uint64_t merges_during[most_threads];
RDMX_SHARED static std::uint64_t locks_during[most_threads];

int main() {
  const int threads = omp_get_max_threads();
  if (threads > most_threads) {
    std::printf("atomic_cost: FAILED: more than %d threads\n", most_threads);
    return 1;
  }
  auto* data = static_cast<double*>(rdmx_shared_malloc(per_thread * threads * sizeof(double)));
  long hits = 0;
  double half_sum = 0;
  #pragma omp parallel
  {
    const int t = omp_get_thread_num();
    double* mine = data + per_thread * t;
    for (std::size_t i = 0; i < per_thread; ++i) mine[i] = t + 0.25 * i;
    const rdmx::dsm::Counters before = rdmx::dsm::counters();
    for (int k = 0; k < atomics; ++k) {
      #pragma omp atomic
      hits += 1;
      #pragma omp atomic
      half_sum += 0.5;
    }
    const rdmx::dsm::Counters after = rdmx::dsm::counters();
    merges_during[t] = after.merges - before.merges;
    locks_during[t] = after.locks - before.locks;
  }
  int failures = 0;
  if (hits != long{atomics} * threads || half_sum != 0.5 * atomics * threads) {
    std::printf("FAILED: hits %ld, half_sum %.1f, expected %d and %.1f\n", hits, half_sum, atomics * threads,
                0.5 * atomics * threads);
    ++failures;
  }
  for (int t = 0; t < threads; ++t)
    for (std::size_t i = 0; i < per_thread; i += 97)
      if (data[per_thread * t + i] != t + 0.25 * i) {
        std::printf("FAILED: thread %d's word %zu is %f\n", t, i, data[per_thread * t + i]);
        ++failures;
        break;
      }
  // Every merge a process makes meanwhile is one of its threads' atomics
  // (at most one block each), never the dirtied blocks: the unlocks of
  // the process's threads, 2 to 3 per iteration (a compare-and-swap may be
  // retried once per other thread's update).
  const std::uint64_t bound = std::uint64_t{atomics} * (2 + threads) * threads;
  for (int t = 0; t < threads; ++t) {
    std::printf("atomic_cost: thread %d: %llu merges, %llu locks during %d atomics\n", t,
                static_cast<unsigned long long>(merges_during[t]), static_cast<unsigned long long>(locks_during[t]),
                2 * atomics);
    if (merges_during[t] > bound || merges_during[t] >= std::uint64_t{dirtied}) {
      std::printf("FAILED: thread %d: %llu merges during its atomics (dirtied %d blocks)\n", t,
                  static_cast<unsigned long long>(merges_during[t]), dirtied);
      ++failures;
    }
  }
  rdmx_shared_free(data);
  std::printf("%s\n", failures == 0 ? "atomic_cost: all checks passed" : "atomic_cost: FAILED");
  return failures == 0 ? 0 : 1;
}
