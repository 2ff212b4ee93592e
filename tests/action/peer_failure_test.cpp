// A destination dies (SIGKILL) while running an action: the caller's future
// must fail with Errc::peer_failed within seconds, never hang; later calls to
// it fail at once; the other processes still answer. Its own main: the job
// cannot end with a collective.
//   action_peer_failure [--quiet]
// --quiet: the caller posts small actions around the deadly one and waits
// in rdmx::quiet() instead, which must throw peer_failed naming the dead
// process, never hang and never return as if everything had run.
#include <signal.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>

#include "rdmx/fabric/job.hpp"
#include "rdmx/fabric/quiet.hpp"
#include "rdmx/action/action.hpp"

using namespace rdmx;
using Clock = std::chrono::steady_clock;

namespace {
std::atomic<bool> released{false};

// The pause lets the one-sided writes this process already sent be
// acknowledged before it dies: over TCP, UCX 1.13 emulates them, and a write
// from a peer whose endpoint has failed makes the receiver's UCX abort while
// acknowledging it (docs/fabric-leaving.md, "Failures"). What is tested is the
// caller's wait, not that UCX limitation.
void die(serial::SerializeBuffer<char>) {
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  raise(SIGKILL);
}
// For quiet(): serves first, so the calls behind it (the in-order markers of
// the send path and the messengers) run meanwhile, and only a quiet() that
// counts finished actions can tell that this one never finished.
void serve_then_die(serial::SerializeBuffer<char> argument) {
  const auto until = Clock::now() + std::chrono::milliseconds(300);
  while (Clock::now() < until) progress();
  die(std::move(argument));
}
int add(int a, int b) { return a + b; }
void ignore(int) {}
void land(serial::SerializeBuffer<char>) {}
void release() { released = true; }

int fail(const std::string& what) {
  std::fprintf(stderr, "action_peer_failure: FAILED: %s\n", what.c_str());
  return 1;
}

// Everyone but the dead process still answers; then they may leave.
int check_bystanders(Job& job) {
  for (std::uint32_t p = 2; p < job.size(); ++p) {
    if (async(action<&add>, {p, 0}, 40, 2).get() != 42) return fail("a bystander answered wrongly");
    async(action<&release>, {p, 0}).get();
  }
  return 0;
}

// A rendezvous parcel: rank 1 pulls it (so when_sent says it may be
// reused), then dies inside the action; the reply never comes.
int wait_for_the_future(Job& job) {
  Synchronizer pulled;
  const auto start = Clock::now();
  Future<void> f = async(when_sent(pulled), action<&die>, {1, 0}, serial::SerializeBuffer<char>(std::size_t{1} << 20));
  while (!f.ready() && Clock::now() - start < std::chrono::seconds(30)) progress();
  if (!f.ready()) return fail("no answer within 30 s of the destination's death");
  if (!f.failed() || f.error_code() != Errc::peer_failed)
    return fail("the future did not fail with peer_failed: " + f.error_message());
  const double ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
  if (pulled.operations_left() != 0 || pulled.failed()) return fail("when_sent did not say the pulled buffer was free");

  // Later calls to the dead process fail at once.
  Future<int> later = async(action<&add>, {1, 0}, 1, 2);
  if (!later.failed() || later.error_code() != Errc::peer_failed) return fail("a call to a dead process was accepted");
  if (const int rc = check_bystanders(job); rc != 0) return rc;
  std::printf("action peer failure detected after %.0f ms: %s\n", ms, f.error_message().c_str());
  return 0;
}

int wait_in_quiet(Job& job) {
  // Fewer sends than the fabric queues before a sender waits for its peer
  // (64): over TCP, a burst at a peer still leaving the barrier could stall
  // here for the endpoint timeout, before quiet() is even reached.
  // The victim maps its landing memory first: its first segment is
  // prefaulted, which on a loaded machine takes seconds (long enough for
  // UCX to time the endpoint out), and that is not what quiet() is timed on.
  async(action<&land>, {1, 0}, serial::SerializeBuffer<char>(std::size_t{1} << 20)).get();
  for (int i = 0; i < 20; ++i) post(action<&ignore>, {1, 0}, i);
  post(action<&serve_then_die>, {1, 0}, serial::SerializeBuffer<char>(std::size_t{1} << 20));
  for (int i = 0; i < 20; ++i) post(action<&ignore>, {1, 0}, i);
  const auto start = Clock::now();
  try {
    rdmx::quiet();
    check_bystanders(job);  // let them go at once
    return fail("quiet() returned although process 1 died before running every action sent to it");
  } catch (const Error& e) {
    const double ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
    if (e.code() != Errc::peer_failed) return fail("quiet() threw " + std::string(to_string(e.code())) + ": " + e.what());
    if (std::string(e.what()).find("process 1") == std::string::npos)
      return fail(std::string("the error does not name process 1: ") + e.what());
    if (ms > 30'000) return fail("quiet() took " + std::to_string(ms) + " ms to notice the failure");
    if (const int rc = check_bystanders(job); rc != 0) return rc;
    std::printf("action peer failure detected by quiet() after %.0f ms: %s\n", ms, e.what());
  }
  return 0;
}
}  // namespace

int main(int argc, char** argv) {
  Job job(argc, argv);
  bool quiet = false;
  for (int i = 1; i < argc; ++i) quiet = quiet || std::string(argv[i]) == "--quiet";
  if (job.size() < 2) return fail("needs at least 2 processes");
  job.barrier();
  if (job.rank() != 0) {
    // Rank 1 runs `die`; the others serve until rank 0 releases them.
    const auto until = Clock::now() + std::chrono::seconds(60);
    while (!released.load() && Clock::now() < until) progress();
    return released.load() ? 0 : fail("rank " + std::to_string(job.rank()) + " was never released");
  }
  return quiet ? wait_in_quiet(job) : wait_for_the_future(job);
}
