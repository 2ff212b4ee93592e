// A process dies mid-run (SIGKILL). The survivors must see Errc::peer_failed
// on operations towards it within seconds, never hang, and keep talking to
// each other. Runs with its own main: the job cannot end with a collective.
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <thread>

#include "rdmx/fabric/call.hpp"
#include "rdmx/fabric/job.hpp"
#include "rdmx/fabric/layer.hpp"
#include "rdmx/fabric/rma.hpp"

using namespace rdmx;
using Clock = std::chrono::steady_clock;

namespace {
std::atomic<bool> released{false};

// A layer above the fabric learns of the death too (once), so it can fail
// what it waits for.
std::atomic<int> failed_reports{0};
std::atomic<std::uint32_t> failed_process{~0u};
class Watcher final : public fabric::Layer {
 public:
  explicit Watcher(Job&) {}
  void process_failed(std::uint32_t process, const std::string&) override {
    failed_process.store(process);
    failed_reports.fetch_add(1);
  }
};

int fail(const char* what) {
  std::fprintf(stderr, "peer_failure_test: FAILED: %s\n", what);
  return 1;
}
}  // namespace

int main(int argc, char** argv) {
  Job job(argc, argv);
  if (job.size() < 2) return fail("needs at least 2 processes");
  // Memory in the victim, to check one-sided operations fail too.
  RemoteLocator victim_memory{};
  if (job.rank() == 0) victim_memory = allocate_remote(1, 64);
  fabric::layer<Watcher>();
  job.barrier();

  if (job.rank() == 1) {
    // Serve rank 0's calls for a while, then die without a word.
    auto until = Clock::now() + std::chrono::milliseconds(300);
    while (Clock::now() < until) progress();
    raise(SIGKILL);
  }
  if (job.rank() >= 2) {
    // A bystander: serve calls until rank 0 says it is done.
    auto deadline = Clock::now() + std::chrono::seconds(60);
    while (!released.load() && Clock::now() < deadline) progress();
    return released.load() ? 0 : fail("bystander was never released");
  }

  // Rank 0: call the victim in a loop until the failure surfaces. The
  // victim dies running the first call, a call_return whose future is still
  // pending then.
  const auto start = Clock::now();
  Future<int> in_flight = call_return(ThreadId{1, 0}, [] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    raise(SIGKILL);
    return 0;
  });
  std::string message;
  std::uint64_t calls = 0;
  while (Clock::now() - start < std::chrono::seconds(30)) {
    try {
      Synchronizer sync;
      call(ThreadId{1, 0}, [] {}, when_run(sync));
      sync.wait();
      ++calls;
    } catch (const Error& e) {
      if (e.code() != Errc::peer_failed) return fail(e.what());
      message = e.what();
      break;
    }
  }
  if (message.empty()) return fail("no error within 30 s of the victim's death");
  const double ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();

  try {
    (void)in_flight.get();
    return fail("a call_return future survived the death of the process running it");
  } catch (const Error& e) {
    if (e.code() != Errc::peer_failed) return fail(e.what());
  }

  // Later operations towards the dead process fail at once.
  try {
    (void)call_return(ThreadId{1, 0}, [] { return 1; });
    return fail("a call_return to a dead process was accepted");
  } catch (const Error& e) {
    if (e.code() != Errc::peer_failed) return fail(e.what());
  }
  try {
    call(ThreadId{1, 0}, [] {});
    return fail("a call to a dead process was accepted");
  } catch (const Error& e) {
    if (e.code() != Errc::peer_failed) return fail(e.what());
  }
  try {
    std::uint64_t v = 0;
    get(&v, victim_memory.slice(0, 8)).get();
    return fail("a get from a dead process succeeded");
  } catch (const Error& e) {
    if (e.code() != Errc::peer_failed) return fail(e.what());
  }
  try {
    std::uint64_t v = 0;
    Synchronizer sync;
    get(&v, victim_memory.slice(0, 8), when_run(sync));
    sync.wait();
    return fail("a get with a completion from a dead process succeeded");
  } catch (const Error& e) {
    if (e.code() != Errc::peer_failed) return fail(e.what());
  }
  try {
    std::uint64_t v = 0;
    blocking_get(&v, victim_memory.slice(0, 8));
    return fail("a blocking_get from a dead process succeeded");
  } catch (const Error& e) {
    if (e.code() != Errc::peer_failed) return fail(e.what());
  }
  try {
    blocking_fetch_add(victim_memory.slice(0, 8), 1);
    return fail("a blocking_fetch_add on a dead process succeeded");
  } catch (const Error& e) {
    if (e.code() != Errc::peer_failed) return fail(e.what());
  }
  try {
    blocking_compare_swap(victim_memory.slice(0, 8), 0, 1);
    return fail("a blocking_compare_swap on a dead process succeeded");
  } catch (const Error& e) {
    if (e.code() != Errc::peer_failed) return fail(e.what());
  }
  // The layers hear of it right after the fabric's own waits failed, maybe
  // on another thread: give that a moment.
  for (auto until = Clock::now() + std::chrono::seconds(10); failed_reports.load() == 0 && Clock::now() < until;) progress();
  if (failed_reports.load() != 1 || failed_process.load() != 1) return fail("a layer was not told once that process 1 failed");
  // Everyone else is still reachable.
  for (std::uint32_t p = 2; p < job.size(); ++p) {
    Synchronizer sync;
    call(ThreadId{p, 0}, [] { released.store(true); }, when_run(sync));
    sync.wait();
  }
  std::printf("peer failure detected after %.0f ms and %llu successful calls: %s\n", ms,
              static_cast<unsigned long long>(calls), message.c_str());
  return 0;
}
