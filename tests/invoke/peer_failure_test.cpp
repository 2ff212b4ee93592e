// A process dies (SIGKILL) while two others are in the middle of bursts of
// one-sided calls to it and to each other. Each survivor must see
// Errc::peer_failed naming the dead process within bounded time on what it
// waits for (consumed notifications, call_return results, room in its ring
// to the dead process), never hang; the survivors' calls to each other must
// all run, exactly once and in order; and both must leave the job cleanly.
// Its own main: the job cannot end with a collective.
//   invoke_peer_failure [--expect-wait] [--rdma-answers]
// --expect-wait: the failure must surface in a wait on notifications (the
// victim stops consuming before it dies, and rings large enough that no call
// waits for room): that is the wait that hung.
// --rdma-answers: the victim answers by RDMA atomic into a
// RemoteObject<Synchronizer> (and writes call_return results by RDMA), which
// the caller's thread cannot count per call: the Synchronizer's own wait must
// fail.
#include <signal.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>

#include "rdmx/fabric/job.hpp"
#include "rdmx/fabric/rma.hpp"
#include "rdmx/invoke/messenger.hpp"
#include "rdmx/invoke/remote_object.hpp"
#include "rdmx/memory/arena.hpp"

using namespace rdmx;
using Clock = std::chrono::steady_clock;

namespace {
constexpr std::uint32_t victim = 2;
// Generous for a loaded machine: detection itself takes milliseconds.
constexpr auto detection_limit = std::chrono::seconds(30);
constexpr auto handshake_limit = std::chrono::seconds(60);

std::atomic<std::uint64_t> victim_ran{0};  // calls the victim ran
// What a survivor got from the other: calls in sequence, and its final count.
std::atomic<std::uint64_t> peer_got{0}, peer_disorder{0}, peer_total{~std::uint64_t{0}};
// 256 bytes of registered memory: the victim reads the survivors', the survivors read the victim's.
RemoteLocator shared_buffer() {
  static const RemoteLocator where = local_locator(Job::current().arena().allocate_chunk(256).data, 256);
  return where;
}

RemoteLocator victim_memory;                 // a survivor's buffer in the victim, RDMA-written by call_buffer
std::array<std::byte, 1024> written_bytes{};  // what is written there

int fail(const std::string& what) {
  std::fprintf(stderr, "invoke_peer_failure: process %u: FAILED: %s\n", Job::current().rank(), what.c_str());
  return 1;
}

// The victim: serve the survivors' bursts, make them read from it too, and
// die in the middle. It stops polling a moment before: over TCP, UCX
// emulates one-sided writes, and a survivor that reads an unacknowledged
// write of a writer it knows dead aborts inside UCX (docs/fabric-leaving.md, "A UCX
// 1.13 limitation over TCP"). The survivors go on sending meanwhile.
[[noreturn]] void run_victim() {
  MessengerGlobal messenger;
  const RemoteLocator mine = shared_buffer();
  const auto until = Clock::now() + handshake_limit;
  while (victim_ran.load() < 100 && Clock::now() < until) {
    for (std::uint32_t s = 0; s < victim; ++s)
      messenger.call_buffer(ThreadId{s, 0}, [](std::span<std::byte> b) { (void)b; }, mine);
    progress();
  }
  messenger.flush();
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  raise(SIGKILL);
  std::abort();  // not reached
}

// One round of calls to the victim: consumed notifications, a returned
// value, a buffer it reads, one written into it, and plain calls that fill
// the ring. Returns the
// failure's text once the victim's death surfaces, "" while it lives.
std::string burst_to_victim(MessengerGlobal& messenger, Clock::time_point deadline, bool& hung) {
  const ThreadId v{victim, 0};
  const RemoteLocator mine = shared_buffer();
  Synchronizer sync;
  std::int64_t result = 0;
  try {
    for (int i = 0; i < 16; ++i) messenger.call(v, [] { victim_ran.fetch_add(1); }, when_run(sync));
    messenger.call_return(v, [] { return std::int64_t{7}; }, into(result, sync));
    messenger.call_buffer(v, [](std::span<std::byte>) { victim_ran.fetch_add(1); }, mine,
                                                            when_run(sync));
    messenger.call_buffer(v, [](std::span<std::byte>) { victim_ran.fetch_add(1); },
                                                       written_bytes, victim_memory, when_sent(sync));
    std::array<std::byte, 512> pad{};  // plain calls: the ring fills when the victim stops consuming
    for (int i = 0; i < 64; ++i) messenger.call(v, [pad] { victim_ran.fetch_add(pad.size() != 0 ? 1 : 0); });
  } catch (const Error& e) {
    if (e.code() != Errc::peer_failed) throw;
    // Still wait: what was sent before the failure fails too.
    const int left = static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count());
    try {
      if (!sync.wait_for(std::max(left, 1))) hung = true;
    } catch (const Error&) {
    }
    return e.what();
  }
  const int left = static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count());
  try {
    if (!sync.wait_for(std::max(left, 1))) {
      hung = true;
      return "";
    }
  } catch (const Error& e) {
    if (e.code() != Errc::peer_failed) throw;
    return e.what();
  }
  if (result != 7) throw Error(Errc::protocol, "call_return from the victim returned " + std::to_string(result));
  return "";
}

// The same burst answered by RDMA: consumed counts and a result written
// into this process's registered memory by the victim.
std::string burst_rdma_answered(MessengerGlobal& messenger, Clock::time_point deadline, bool& hung) {
  const ThreadId v{victim, 0};
  RemoteObject<Synchronizer> sync;
  RemoteObject<std::int64_t> result(0);
  try {
    for (int i = 0; i < 16; ++i) messenger.call(v, [] { victim_ran.fetch_add(1); }, when_run(sync));
    messenger.call_return(v, [] { return std::int64_t{7}; }, into(result, sync));
    const int left = static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count());
    if (!sync->wait_for(std::max(left, 1))) {
      hung = true;
      return "";
    }
  } catch (const Error& e) {
    if (e.code() != Errc::peer_failed) throw;
    return e.what();
  }
  if (*result != 7) throw Error(Errc::protocol, "call_return from the victim wrote " + std::to_string(*result));
  return "";
}

// Calls to the other survivor, numbered: each must run once, in order.
void burst_to_peer(MessengerGlobal& messenger, std::uint64_t& sent) {
  const ThreadId peer{1 - Job::current().rank(), 0};
  Synchronizer sync;
  for (int i = 0; i < 32; ++i) {
    const std::uint64_t seq = ++sent;
    messenger.call(peer, [seq] {
      if (peer_got.load() + 1 != seq) peer_disorder.fetch_add(1);
      peer_got.store(seq);
    }, when_run(sync));
  }
  sync.wait();
}

// A survivor's part; `report` says what it saw.
int survive(Job& job, int argc, char** argv, std::string& report) {
  if (job.size() != 3) return fail("needs exactly 3 processes");
  if (job.rank() != victim) victim_memory = allocate_remote(victim, written_bytes.size());
  job.barrier();
  if (job.rank() == victim) run_victim();
  bool expect_wait = false, rdma_answers = false;
  for (int i = 1; i < argc; ++i) {
    expect_wait = expect_wait || std::string(argv[i]) == "--expect-wait";
    rdma_answers = rdma_answers || std::string(argv[i]) == "--rdma-answers";
  }
  // Without rings (RDMX_RING_BUDGET=0) each call is an active message that
  // may itself wait for the victim to take it, as over TCP: the failure may
  // surface in a call rather than in a wait on notifications.
  if (expect_wait && MessengerOptions::from_env().ring_budget == 0) {
    std::fprintf(stderr, "invoke_peer_failure: no rings: --expect-wait does not apply\n");
    expect_wait = false;
  }

  MessengerGlobal messenger;
  const auto start = Clock::now();
  // The victim dies after 100 calls or at its handshake limit, whichever
  // comes first: on a loaded machine (or under a sanitizer, over TCP) its
  // 100 calls can take most of that limit, and detection is then due 30 s
  // after the death, not after the start.
  const auto deadline = start + handshake_limit + detection_limit;
  std::uint64_t sent = 0;
  std::string failure;
  bool hung = false;
  while (failure.empty() && !hung && Clock::now() < deadline) {
    failure = rdma_answers ? burst_rdma_answered(messenger, deadline, hung) : burst_to_victim(messenger, deadline, hung);
    burst_to_peer(messenger, sent);
  }
  if (failure.empty())
    return fail("no peer_failed within 30 s of the victim's latest death (a wait on it hung); " +
                std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count()) +
                " ms after the start, the job " + (job.process_failed(victim) ? "knew" : "did not know") + " it failed");
  const double ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
  if (hung) return fail("a wait on the victim hung past the deadline after: " + failure);
  if (failure.find("process 2") == std::string::npos) return fail("the failure does not name process 2: " + failure);
  if (expect_wait && failure.find(rdma_answers ? "RDMA atomic" : "waiting on it") == std::string::npos)
    return fail("the failure did not end a wait on notifications: " + failure);

  // Later calls to the dead process fail at once; the other survivor still answers.
  try {
    messenger.call(ThreadId{victim, 0}, [] {});
    messenger.flush();
    Synchronizer sync;
    messenger.call(ThreadId{victim, 0}, [] {}, when_run(sync));
    return fail("a one-sided call to the dead process was accepted");
  } catch (const Error& e) {
    if (e.code() != Errc::peer_failed) return fail(std::string("a call to the dead process: ") + e.what());
  }
  for (int i = 0; i < 4; ++i) burst_to_peer(messenger, sent);

  // Tell the other survivor how many calls it should have run, and check ours.
  {
    Synchronizer sync;
    messenger.call(ThreadId{1 - job.rank(), 0}, [sent] { peer_total.store(sent); }, when_run(sync));
    sync.wait();
  }
  const auto until = Clock::now() + handshake_limit;
  while (peer_total.load() == ~std::uint64_t{0} && Clock::now() < until) progress();
  if (peer_total.load() == ~std::uint64_t{0}) return fail("the other survivor never finished");
  if (peer_got.load() != peer_total.load() || peer_disorder.load() != 0)
    return fail("calls from the other survivor: ran " + std::to_string(peer_got.load()) + " of " +
                std::to_string(peer_total.load()) + ", " + std::to_string(peer_disorder.load()) + " out of order");
  char text[160];
  std::snprintf(text, sizeof text, "process %u saw it after %.0f ms, %llu calls each way ran once", job.rank(), ms,
                static_cast<unsigned long long>(sent));
  report = std::string(text) + ": " + failure;
  return 0;
}
}  // namespace

int main(int argc, char** argv) {
  std::string report;
  {
    Job job(argc, argv);
    if (const int rc = survive(job, argc, argv, report); rc != 0) return rc;
  }  // leaving must not wait for the dead process either: only then is the survivor done
  std::printf("invoke peer failure: %s; left the job\n", report.c_str());
  return 0;
}
