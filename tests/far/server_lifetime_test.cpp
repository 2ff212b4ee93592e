// How long a far-memory server serves, with servers written as
// docs/far.md shows them: they return into ~Manager, with no polling loop
// of their own. A server must serve its region until every client is done
// with it, whatever its peers do, and leave once its clients are done or
// dead. Scenarios (the last argument):
//   --replica-lost         3 processes, replication 2 (servers 1 and 2):
//                          server 1 is killed mid-workload; the workload
//                          goes on with the survivor, every object reads
//                          back, and the survivor still serves its region.
//   --replica-lost-at-end  as above, but server 1 is killed once the
//                          workload is done, and the client ends at once,
//                          perhaps before the job knows of the loss.
//   --clients-lost         2 or 3 processes: the only client (process 0)
//                          dies mid-workload; every server leaves, naming it.
//   --client-leaves        2 or 3 processes, one server (the last): client
//                          0 destroys its Job with its Manager alive (the
//                          Manager ends after the Job). The server stops
//                          waiting for it, naming it; with 3, client 1 goes
//                          on once process 0 has left, every object of its
//                          own reads back, and the server still serves it.
// Each survivor prints that it left the job cleanly once its Job is gone;
// the test's shell counts those lines. Own main: processes die.
#include <signal.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "rdmx/fabric/call.hpp"
#include "rdmx/fabric/job.hpp"
#include "rdmx/far/offload.hpp"
#include "rdmx/far/pointer.hpp"
#include "shadow.hpp"

using namespace rdmx;
using namespace rdmx::far;

namespace {
using Object = shadow::Pattern<256>;

int fail(const std::string& what) {
  std::fprintf(stderr, "far server_lifetime_test: FAILED: %s\n", what.c_str());
  return 1;
}

// 600 objects of 256 bytes against a 64 KiB cache: most dereferences miss,
// and most evictions write back.
struct Objects {
  std::vector<UniquePtr<Object>> pointers;
  std::vector<std::uint64_t> seeds;
};

// Random reads and writes, every read checked against its object's seed.
void workload(Objects& o, int ops, std::mt19937_64& rng) {
  for (int op = 0; op < ops; ++op) {
    const std::size_t i = rng() % o.pointers.size();
    DerefScope scope;
    if (!o.pointers[i].deref(scope)->is(o.seeds[i])) throw Error(Errc::protocol, "object " + std::to_string(i) + " read wrong data");
    if (rng() % 2 == 0) *o.pointers[i].deref_mut(scope) = Object::of(o.seeds[i] += 1000);
  }
}

void read_back(Objects& o) {
  for (std::size_t i = 0; i < o.pointers.size(); ++i)
    if (!o.pointers[i].read().is(o.seeds[i])) throw Error(Errc::protocol, "object " + std::to_string(i) + " changed");
}

void kill_server_1() {
  call(ThreadId{1, service_thread}, [] { raise(SIGKILL); });
  // As in server_loss_test: let the victim die idle, since one killed while
  // replying over shared memory can block this process's UCX receive FIFO
  // (docs/fabric-leaving.md, "A UCX 1.13 limitation over shared memory").
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
}

// Whether `server` still serves its region: the survivor of a pair must,
// as long as this client has not ended its Manager. Asked of the server's
// last worker thread, which never ran Job::run (the tests start 2 a
// process): the server's wait in ~Manager must serve it.
bool still_serving(const Job& job, std::uint32_t server) {
  int serving = 0;
  Synchronizer sync;
  call_return(ThreadId{server, job.threads_per_process() - 1}, [] {
    try {
      served_bytes(0, 1);
      return 1;
    } catch (const Error&) {
      return 0;
    }
  }, into(serving, sync));
  // Generous: a loaded machine answers in milliseconds.
  if (!sync.wait_for(60000)) throw Error(Errc::protocol, "server " + std::to_string(server) + "'s idle worker did not answer in 60 s");
  return serving == 1;
}

// `n` far objects, object i seeded i * stride + offset.
Objects make_objects(std::uint64_t n, std::uint64_t stride, std::uint64_t offset) {
  Objects o;
  for (std::uint64_t i = 0; i < n; ++i) {
    o.seeds.push_back(i * stride + offset);
    o.pointers.push_back(make_unique<Object>(Object::of(o.seeds.back())));
  }
  return o;
}

// Client 1 of --client-leaves: its workload runs after process 0 has left.
int other_client(const Job& job) {
  Objects o = make_objects(300, 7, 3);
  std::mt19937_64 rng(31);
  workload(o, 500, rng);
  // Bounded by the test's timeout: process 0 leaves right after its workload.
  while (!job.process_left(0)) progress();
  workload(o, 1500, rng);
  read_back(o);
  if (!still_serving(job, job.size() - 1)) return fail("the server stopped serving client 1 once process 0 had left");
  std::printf("far: client 1 went on after process 0 left, %zu objects read back\n", o.pointers.size());
  return 0;
}

int client(const Job& job, const std::string& scenario) {
  if (scenario == "--client-leaves" && job.rank() == 1) return other_client(job);
  Objects o = make_objects(600, 13, 5);
  std::mt19937_64 rng(29);
  workload(o, 1500, rng);
  if (scenario == "--clients-lost") {
    // Every write-back was flushed when it was made; idle a moment so that
    // no put of this process is unread at a server when it dies over TCP
    // (docs/fabric-leaving.md, "A UCX 1.13 limitation over TCP").
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    std::printf("far: client 0 dies with %zu objects on the servers\n", o.pointers.size());
    std::fflush(stdout);
    raise(SIGKILL);
  }
  if (scenario == "--client-leaves") {
    read_back(o);
    std::printf("far: client 0 destroys its Job with its Manager alive\n");
    std::fflush(stdout);
    return 0;
  }
  if (scenario == "--replica-lost-at-end") {
    read_back(o);
    kill_server_1();
    std::printf("far: the client ends while server 1 is dead\n");
    return 0;
  }
  kill_server_1();
  workload(o, 1500, rng);
  read_back(o);
  if (!still_serving(job, 2)) return fail("server 2 stopped serving while the client still uses its replicas");
  std::printf("far: the workload went on after the loss of server 1, %zu objects read back\n", o.pointers.size());
  return 0;
}

// `kept`: a Manager that outlives the Job (--client-leaves, client 0).
int run(int argc, char** argv, std::uint32_t& rank, std::unique_ptr<Manager>& kept) {
  Job job(argc, argv);
  rank = job.rank();
  const std::string scenario = argc > 1 ? argv[argc - 1] : "";
  const bool leaves = scenario == "--client-leaves";
  if (scenario != "--replica-lost" && scenario != "--replica-lost-at-end" && scenario != "--clients-lost" && !leaves)
    return fail("expected --replica-lost, --replica-lost-at-end, --clients-lost or --client-leaves");
  if (job.size() != 3 && (scenario != "--clients-lost" || job.size() != 2) && (!leaves || job.size() != 2))
    return fail("runs with 3 processes (--clients-lost, --client-leaves: 2 or 3)");
  Config config;
  config.cache_bytes = 64 * 1024;
  config.region_bytes = 16 << 20;
  if (leaves)
    config.servers = {job.size() - 1};
  else
    config.servers = job.size() == 3 ? std::vector<std::uint32_t>{1, 2} : std::vector<std::uint32_t>{1};
  config.replication = config.servers.size();
  auto far = std::make_unique<Manager>(job, config);
  if (far->serving()) return 0;  // as docs/far.md: a server serves until the Manager's destructor
  try {
    const int rc = client(job, scenario);
    if (leaves && job.rank() == 0) kept = std::move(far);  // the misuse under test: ~Job first
    return rc;
  } catch (const std::exception& e) {
    return fail(e.what());
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::uint32_t rank = 0;
  int rc = 1;
  std::unique_ptr<Manager> kept;
  try {
    rc = run(argc, argv, rank, kept);
    kept.reset();  // after its Job: it must touch nothing of the job
  } catch (const std::exception& e) {
    rc = fail(e.what());
  }
  // The Job is gone: this process has left the job.
  if (rc == 0) std::printf("far: process %u left the job cleanly\n", rank);
  return rc;
}
