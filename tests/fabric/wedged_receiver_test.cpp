// A process dies in the middle of sending to another over shared memory.
// UCX 1.13's shared-memory transports give each receiving worker one FIFO
// that every sender on the host writes into; a sender killed between
// reserving an element and marking it ready leaves the receiver's FIFO
// blocked for good, so replies from *live* processes never arrive either.
// rdmx must turn that into a clear error in bounded time, not a hang.
//
// Rank 2 dies mid-send for certain: its call_buffer payload is an
// inaccessible page, which UCX reads only after it has reserved an element
// in rank 0's FIFO. Rank 0 then calls rank 1, which is alive. Over TCP
// (one connection per pair) nothing is blocked and the call succeeds.
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <span>

#include "rdmx/fabric/call.hpp"
#include "rdmx/fabric/job.hpp"

using namespace rdmx;
using Clock = std::chrono::steady_clock;

namespace {
std::atomic<bool> called{false};  // rank 1: rank 0's call has run here

int fail(const char* what) {
  std::fprintf(stderr, "wedged_receiver_test: FAILED: %s\n", what);
  return 1;
}
double ms_since(Clock::time_point start) { return std::chrono::duration<double, std::milli>(Clock::now() - start).count(); }
}  // namespace

int main(int argc, char** argv) {
  Job job(argc, argv);
  if (job.size() != 3) return fail("needs 3 processes");
  job.barrier();

  if (job.rank() == 2) {
    void* page = mmap(nullptr, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (page == MAP_FAILED) return fail("mmap");
    // Over shared memory this dies inside UCX's copy of the payload
    // (SIGSEGV), after reserving its element. TCP hands the page to the
    // kernel, which refuses it (EFAULT): the send fails and we live on.
    call_buffer(ThreadId{0, 0}, [](std::span<std::byte>) {}, std::span(static_cast<const std::byte*>(page), 256));
    std::printf("rank 2: survived sending an inaccessible payload\n");
    return 0;
  }
  if (job.rank() == 1) {
    // Alive throughout: stay until rank 0's call has run here, then ask
    // rank 0 for an answer, which arrives unless rank 0 cannot receive, in
    // which case this fails when rank 0 has left.
    for (auto until = Clock::now() + std::chrono::seconds(120); !called.load() && Clock::now() < until;) progress();
    if (!called.load()) return fail("rank 0's call never arrived");
    Synchronizer sync;
    call(ThreadId{0, 0}, [] {}, when_run(sync));
    try {
      sync.wait();
      std::printf("rank 1: rank 0 answered\n");
    } catch (const Error& e) {
      std::printf("rank 1: rank 0 did not answer: %s\n", e.what());
    }
    return 0;
  }

  // Rank 0: let the victim die, then call the live rank 1.
  const auto start = Clock::now();
  while (ms_since(start) < 500) progress();
  const auto call_start = Clock::now();
  Synchronizer sync;
  try {
    call(ThreadId{1, 0}, [] { called.store(true); }, when_run(sync));
    if (!sync.wait_for(60'000)) return fail("the call to a live process hung for 60 s");
    std::printf("rank 0: live process answered after %.0f ms (receive path not blocked)\n", ms_since(call_start));
  } catch (const Error& e) {
    if (e.code() != Errc::peer_failed) return fail(e.what());
    std::printf("rank 0: blocked receive path detected after %.0f ms: %s\n", ms_since(call_start), e.what());
  }
  return 0;
}
