// A far program in which no process computes: started without a launcher
// (one process, the default server) or with every process named a server.
// Manager's construction must refuse it on every process, saying what to do,
// instead of the job ending with status 0 having done nothing. Own main: it
// reports what happened and exits non-zero on the refusal.
#include <cstdio>

#include "rdmx/core/error.hpp"
#include "rdmx/fabric/job.hpp"
#include "rdmx/far/manager.hpp"

int main(int argc, char** argv) {
  rdmx::Job job(argc, argv);
  rdmx::far::Config config;
  config.cache_bytes = 64 * 1024;
  config.region_bytes = 1 << 20;
  try {
    rdmx::far::Manager manager(job, config);
    std::printf("far no_compute_test: process %u %s\n", job.rank(), manager.serving() ? "served" : "computed");
    return 0;
  } catch (const rdmx::Error& e) {
    std::fprintf(stderr, "far no_compute_test: process %u refused: %s\n", job.rank(), e.what());
    return 3;
  }
}
