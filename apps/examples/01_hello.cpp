// 01_hello: a job, its processes and their worker threads.
//   scripts/run --tls shm -np 2 build/apps/examples/rdmx-example-01-hello --rdmx-threads=2
// A launcher (mpirun, srun) starts the processes; each constructs one
// rdmx::Job, which bootstraps through PMIx and connects them all. Started
// without a launcher, the program is a one-process job.
#include <atomic>
#include <cstdio>
#include <span>
#include <vector>

#include "rdmx/core/error.hpp"
#include "rdmx/fabric/job.hpp"

int main(int argc, char** argv) {
  try {
    // First thing in main: reads and removes the --rdmx-* options from argv.
    rdmx::Job job(argc, argv);
    const std::uint32_t me = job.rank(), n = job.size(), threads = job.threads_per_process();
    if (me == 0) std::printf("%s\n", job.describe().c_str());

    // A process-level collective, made by one thread per process: every
    // process contributes its rank, every process gets all of them in rank order.
    const std::vector<std::uint32_t> ranks = job.allgather(me);
    for (std::uint32_t r = 0; r < n; ++r) {
      if (ranks[r] != r) {
        std::fprintf(stderr, "01_hello: allgather entry %u holds %u\n", r, ranks[r]);
        return 1;
      }
    }

    // Job::run starts the worker threads (the calling thread is thread 0)
    // and joins them. A ThreadId {process, thread} names a thread job-wide:
    // it is the address every remote call and collective uses.
    std::atomic<std::uint32_t> ran{0};
    std::atomic<bool> ids_ok{true};
    job.run([&](rdmx::ThreadId id) {
      if (id.process != me || id.thread >= threads || rdmx::this_thread() != id) ids_ok.store(false);
      std::printf("[%u] hello from thread %s on %s\n", me, rdmx::to_string(id).c_str(),
                  job.process_info(me).hostname.c_str());
      ran.fetch_add(1);
    });
    if (!ids_ok || ran.load() != threads) {
      std::fprintf(stderr, "01_hello: %u of %u threads ran, ids %s\n", ran.load(), threads, ids_ok.load() ? "ok" : "wrong");
      return 1;
    }

    // Every process gets here before any leaves; ~Job then leaves together.
    job.barrier();
    if (me == 0) std::printf("01_hello: %u process(es) x %u thread(s) = %u worker threads\n", n, threads, job.total_threads());
    return 0;
  } catch (const rdmx::Error& e) {
    // Every rdmx failure is an rdmx::Error: a code to branch on, a message to read.
    std::fprintf(stderr, "01_hello: %s (%s)\n", e.what(), rdmx::to_string(e.code()));
    return 1;
  }
}
