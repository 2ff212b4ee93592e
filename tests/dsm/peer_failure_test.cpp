// A process dies holding a DSM mutex. The survivors waiting for the mutex,
// then meeting at a DSM barrier, must get Errc::peer_failed within bounded
// time, never hang; the barrier at once, from the fabric's report of the
// failure. Its own main: the job cannot end with a collective.
// With 3 processes or more, process 0 then reads a block whose home moved
// from the dead process to a survivor: its probable-owner link leads to the
// dead process, and the home must be found among the survivors.
// With DSM_TEST_FAULT_ON_DEAD_HOME=1 the survivors then read a block whose
// home is the dead process: the fault cannot be served, and the handler
// must say why and abort, not hang.
#include <signal.h>

#include <chrono>
#include <cstdlib>
#include <cstdio>
#include <string>
#include <thread>

#include "rdmx/core/error.hpp"
#include "rdmx/dsm/fence.hpp"
#include "rdmx/dsm/mutex.hpp"
#include "rdmx/dsm/space.hpp"
#include "rdmx/fabric/job.hpp"

using namespace rdmx;
using Clock = std::chrono::steady_clock;

namespace {
int fail(const std::string& what) {
  std::fprintf(stderr, "dsm peer_failure_test: FAILED: %s\n", what.c_str());
  return 1;
}
double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }
}  // namespace

int main(int argc, char** argv) {
  Job job(argc, argv);
  if (job.size() < 2) return fail("needs at least 2 processes");
  dsm::Space space(job);
  auto* data = dsm::allocate_array<int>(16);
  const std::size_t block = space.config().block_bytes;
  auto* moved = static_cast<int*>(dsm::allocate(block, block));  // a block of its own
  const std::uint32_t victim = job.size() - 1;
  // Of P blocks, the one that starts at home in the victim (block mod P).
  auto* blocks = static_cast<std::byte*>(dsm::allocate(job.size() * block, block));
  const std::size_t first = static_cast<std::size_t>(blocks - space.heap().data()) / block;
  auto* through = reinterpret_cast<int*>(blocks + (victim + job.size() - first % job.size()) % job.size() * block);
  if (job.size() >= 3) {
    if (job.rank() == victim) {
      through[0] = 11;
      dsm::release();
    }
    job.barrier();
    if (job.rank() == 1) {
      through[1] = 12;
      dsm::release();  // the home moves to process 1; the victim's word links there
    }
    job.barrier();  // orders the reads below (a program would use a DSM barrier)
  }
  dsm::Mutex mutex(0);  // its word lives in process 0, a survivor
  if (job.rank() == victim) {
    moved[0] = 7;
    dsm::release();  // the victim becomes the block's home
    mutex.lock();
    data[0] = 1;
    job.barrier();  // the others now know it holds the mutex
    raise(SIGKILL);
  }
  job.barrier();

  auto t0 = Clock::now();
  try {
    mutex.lock();
    return fail("took a mutex its dead holder never released");
  } catch (const Error& e) {
    if (e.code() != Errc::peer_failed) return fail(std::string("mutex: ") + e.what());
    std::printf("dsm: mutex holder's failure detected after %.0f ms: %s\n", ms_since(t0), e.what());
  }
  // Once the fabric knows the victim failed (it reports the failure to the
  // DSM's layer right after it marks the process), a barrier fails at
  // once, naming the failed process, before it sends anything: not at its
  // first probe of a peer, nor with the error of a put to the dead one.
  for (auto until = Clock::now() + std::chrono::seconds(10); !job.process_failed(victim);) {
    if (Clock::now() > until) return fail("the fabric never learnt that process " + std::to_string(victim) + " died");
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  t0 = Clock::now();
  try {
    dsm::process_barrier();
    return fail("a barrier with a dead process completed");
  } catch (const Error& e) {
    if (e.code() != Errc::peer_failed) return fail(std::string("barrier: ") + e.what());
    // The victim, or a survivor that has since ended (with
    // DSM_TEST_FAULT_ON_DEAD_HOME each survivor ends after its checks, and
    // a faster one may end before a slower one's barrier).
    bool named = false;
    for (std::uint32_t p = 0; p < job.size(); ++p)
      named = named || ((p == victim || job.process_failed(p)) &&
                        std::string(e.what()).find("dsm barrier: process " + std::to_string(p) + " has failed") != std::string::npos);
    if (!named)
      return fail("the barrier's error does not start from the fabric's report (\"dsm barrier: process " +
                  std::to_string(victim) + " has failed\"): " + e.what());
    std::printf("dsm: barrier failure detected after %.0f ms: %s\n", ms_since(t0), e.what());
  }
  if (job.size() >= 3 && job.rank() == 0) {
    // Process 0 never cached it, and its link is the block's first home.
    const volatile int* moved_on = through;
    if (moved_on[0] != 11 || moved_on[1] != 12)
      return fail("a block found past a failed process reads " + std::to_string(moved_on[0]) + ", " +
                  std::to_string(moved_on[1]) + " instead of 11, 12");
    std::printf("dsm: a block's home found past a failed process\n");
  }
  std::fflush(stdout);
  const char* fault = std::getenv("DSM_TEST_FAULT_ON_DEAD_HOME");
  if (fault != nullptr && fault[0] == '1') {
    std::printf("dsm: reading a block whose home has died\n");
    std::fflush(stdout);
    const volatile int* home_died = moved;
    const int read = *home_died;  // the handler aborts
    return fail("a fault on a dead home returned " + std::to_string(read));
  }
  return 0;
}
