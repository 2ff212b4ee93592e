// A segmentation fault outside the shared heap is not the DSM's: the process
// must still die of it, with a message, not loop or carry on.
#include <cstdio>

#include "rdmx/dsm/space.hpp"
#include "rdmx/fabric/job.hpp"

int main(int argc, char** argv) {
  rdmx::Job job(argc, argv);
  rdmx::dsm::Space space(job);
  auto* p = static_cast<volatile int*>(rdmx::dsm::allocate(sizeof(int)));
  *p = 5;  // the heap itself works
  std::printf("heap write ok: %d\n", *p);
  std::fflush(stdout);
  volatile int* wild = reinterpret_cast<volatile int*>(std::uintptr_t{16});
  *wild = 1;
  std::printf("survived\n");
  return 0;
}
