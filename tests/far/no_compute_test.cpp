// A far program in which no process computes: started without a launcher
// (one process, the default server) or with every process named a server,
// or with servers that do not divide by the replication. Manager's
// construction must refuse it on every process, saying what to do, instead
// of the job ending with status 0 having done nothing. The refusal is left
// uncaught, as in a program that does not expect it: the test checks what
// its user then sees (printed once for the job, exit status 1).
#include <cstdio>

#include "rdmx/fabric/job.hpp"
#include "rdmx/far/manager.hpp"

int main(int argc, char** argv) {
  rdmx::Job job(argc, argv);
  rdmx::far::Config config;
  config.cache_bytes = 64 * 1024;
  config.region_bytes = 1 << 20;
  rdmx::far::Manager manager(job, config);
  std::printf("far no_compute_test: process %u %s\n", job.rank(), manager.serving() ? "served" : "computed");
  return 0;
}
