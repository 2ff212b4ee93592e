// A host dies, or its link is cut, while the others call every process of
// the job in a loop: the survivors' calls towards the lost host must fail
// with Errc::peer_failed in bounded time, calls between survivors must go on,
// and the survivors must leave the job cleanly. The last host of the job is
// the victim; host_failure.sh kills it (or cuts its link) once every
// survivor has printed "calling"; each survivor prints "survivor left the
// job" once it has left.
//
// Each survivor prints, per process of the lost host, when the failure
// surfaced (milliseconds of the system clock, which host_failure.sh compares
// with the moment it took the host down) and how long after the last
// successful operation towards that process.
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "rdmx/action/action.hpp"
#include "rdmx/fabric/call.hpp"
#include "rdmx/fabric/job.hpp"

using namespace rdmx;
using Clock = std::chrono::steady_clock;

namespace {
int add(int a, int b) { return a + b; }

// How long a victim serves before giving up on being killed, and how long a
// survivor waits for the loss to surface: far above any detection time, so
// a run that reaches them has hung in all but name.
constexpr auto victim_limit = std::chrono::seconds(150);
constexpr auto survivor_limit = std::chrono::seconds(120);

[[noreturn]] void fail(std::uint32_t rank, const std::string& what) {
  std::fprintf(stderr, "host_failure: rank %u: FAILED: %s\n", rank, what.c_str());
  std::fflush(stderr);
  std::_Exit(1);
}

// One operation towards `peer`, alternating a send-based call (waiting for
// it to be consumed) and an action's future. Returns false when the peer has
// failed (its message in `why`); anything else thrown is a failure.
bool reach(std::uint32_t self, std::uint32_t peer, std::uint64_t round, std::string& why) {
  try {
    if (round % 2 == 0) {
      Synchronizer sync;
      call(ThreadId{peer, 0}, [] {}, when_run(sync));
      sync.wait();
    } else {
      Future<int> f = async(action<&add>, {peer, 0}, static_cast<int>(peer), 1);
      if (f.get() != static_cast<int>(peer) + 1) fail(self, "an action answered wrongly");
    }
    return true;
  } catch (const Error& e) {
    if (e.code() != Errc::peer_failed) fail(self, std::string("unexpected error: ") + e.what());
    why = e.what();
    return false;
  }
}

// Says a survivor got through leaving the job (Job's destructor), which
// gives up on the lost processes instead of waiting for them.
struct Left {
  std::uint32_t rank = ~0u;
  ~Left() {
    if (rank == ~0u) return;
    std::printf("host_failure: rank %u: survivor left the job\n", rank);
    std::fflush(stdout);
  }
};
}  // namespace

int main(int argc, char** argv) {
  Left left;  // destroyed after the job
  Job job(argc, argv);
  const std::uint32_t self = job.rank(), n = job.size();
  const std::string victim_host = job.process_info(n - 1).hostname;
  std::vector<bool> victim(n);
  std::uint32_t victims = 0;
  for (std::uint32_t p = 0; p < n; ++p) {
    victim[p] = job.process_info(p).hostname == victim_host;
    if (victim[p]) ++victims;
  }
  if (victims == n) fail(self, "needs at least 2 hosts (every process runs on " + victim_host + ")");
  job.barrier();

  if (victim[self]) {
    // Serve the survivors' calls until this host is taken down.
    std::printf("host_failure: rank %u on %s: victim serving\n", self, victim_host.c_str());
    std::fflush(stdout);
    for (const auto until = Clock::now() + victim_limit; Clock::now() < until;) progress();
    fail(self, "the victim host was never taken down");
  }

  std::vector<Clock::time_point> last_ok(n, Clock::now());
  std::vector<double> detected_ms(n, -1);
  std::vector<long long> detected_at(n, 0);
  std::vector<std::string> why(n);
  std::uint32_t lost = 0;
  bool announced = false;
  const auto start = Clock::now();
  for (std::uint64_t round = 0; lost < victims; ++round) {
    if (Clock::now() - start > survivor_limit) fail(self, "the lost host's processes were never reported failed");
    for (std::uint32_t p = 0; p < n; ++p) {
      if (p == self || detected_ms[p] >= 0) continue;
      if (reach(self, p, round, why[p])) {
        last_ok[p] = Clock::now();
        continue;
      }
      if (!victim[p]) fail(self, "process " + std::to_string(p) + ", not on the lost host, failed: " + why[p]);
      detected_ms[p] = std::chrono::duration<double, std::milli>(Clock::now() - last_ok[p]).count();
      detected_at[p] = std::chrono::duration_cast<std::chrono::milliseconds>(
                           std::chrono::system_clock::now().time_since_epoch()).count();
      ++lost;
    }
    if (!announced && round >= 20) {
      std::printf("host_failure: rank %u: calling\n", self);
      std::fflush(stdout);
      announced = true;
    }
  }
  if (!announced) fail(self, "the lost host failed before the survivors were calling it");

  // The survivors still reach each other, and later operations towards the
  // lost host fail at once.
  std::string unused;
  for (std::uint32_t p = 0; p < n; ++p) {
    if (p == self) continue;
    for (std::uint64_t round = 0; round < 2; ++round) {
      const auto before = Clock::now();
      const bool ok = reach(self, p, round, unused);
      if (ok == victim[p]) fail(self, "process " + std::to_string(p) + (ok ? " answered after its host was lost" : " is lost"));
      if (!ok && Clock::now() - before > std::chrono::seconds(1))
        fail(self, "an operation towards lost process " + std::to_string(p) + " did not fail at once");
    }
  }
  for (std::uint32_t p = 0; p < n; ++p)
    if (victim[p])
      std::printf("host_failure: rank %u: process %u on %s failed at %lld, %.0f ms after the last success: %s\n", self,
                  p, victim_host.c_str(), detected_at[p], detected_ms[p], why[p].c_str());
  std::fflush(stdout);
  left.rank = self;
  return 0;
}
