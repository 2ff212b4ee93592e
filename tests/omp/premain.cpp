// A global built before main that keeps heap memory: its block is private
// to each process while the global is shared, so start-up refuses the
// program, naming the global's address, instead of letting other processes
// read their own, different block.
#include <cstdio>
#include <vector>

std::vector<int> prefilled(1000, 1);

int main() {
  long sum = 0;
#pragma omp parallel for reduction(+ : sum)
  for (int i = 0; i < 1000; ++i) sum += prefilled[i];
  std::printf("premain: survived, sum %ld\n", sum);
  return 0;
}
