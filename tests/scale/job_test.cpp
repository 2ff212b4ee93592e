// A job larger than the machine has cores (16 processes on 2 cores): it
// starts, every process reaches every other with a send-based call (which
// wires up endpoints lazily) and a one-sided call (which sets up a chunk
// ring per pair of threads), meets at barriers and leaves, each step within
// a bounded wait. With --kill-last the last process dies right after
// joining: the others' first barrier must fail with Errc::peer_failed, calls
// to it must fail the same way, the rest of the job must still answer, and
// everyone must still leave. Its own main: a test that ends without its
// last collective cannot be a GoogleTest binary under job_main.cpp.
#include <signal.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>

#include "rdmx/fabric/call.hpp"
#include "rdmx/fabric/job.hpp"
#include "rdmx/invoke/messenger.hpp"

using namespace rdmx;
using Clock = std::chrono::steady_clock;

namespace {

// Generous: 16 busy processes share 2 cores, maybe beside other tests.
constexpr int wait_ms = 120'000;
std::atomic<std::uint32_t> one_sided_arrivals{0};

[[noreturn]] void fail(const Job& job, const std::string& what) {
  std::fprintf(stderr, "scale job_test: FAILED on rank %u: %s\n", job.rank(), what.c_str());
  std::fflush(stderr);
  std::_Exit(1);
}

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// A call_return to thread 0 of `p`; its answer says it ran there. Returns
// the error code when the call failed.
std::optional<Errc> ask_rank(Job& job, std::uint32_t p) {
  std::uint32_t answer = ~0u;
  Synchronizer sync;
  try {
    call_return(ThreadId{p, 0}, [] { return Job::current().rank(); }, into(answer, sync));
    if (!sync.wait_for(wait_ms)) fail(job, "no answer from process " + std::to_string(p) + " within the bound");
  } catch (const Error& e) {
    return e.code();
  }
  if (answer != p) fail(job, "process " + std::to_string(p) + " answered " + std::to_string(answer));
  return std::nullopt;
}

int healthy(Job& job) {
  const auto t0 = Clock::now();
  job.barrier();
  // Everyone, by send-based calls: endpoints are made here, on first use.
  for (std::uint32_t p = 0; p < job.size(); ++p)
    if (p != job.rank() && ask_rank(job, p)) fail(job, "a call to process " + std::to_string(p) + " failed");
  // Everyone, by one-sided calls: a ring per pair is set up here.
  MessengerGlobal messenger;
  Synchronizer sync;
  for (std::uint32_t p = 0; p < job.size(); ++p)
    if (p != job.rank())
      messenger.call(ThreadId{p, 0}, [] { one_sided_arrivals.fetch_add(1); }, when_run(sync));
  messenger.flush();
  if (!sync.wait_for(wait_ms)) fail(job, "one-sided calls to every peer did not all run within the bound");
  job.barrier();
  // Each peer's call ran here exactly once.
  if (one_sided_arrivals.load() != job.size() - 1)
    fail(job, std::to_string(one_sided_arrivals.load()) + " one-sided calls arrived, not " + std::to_string(job.size() - 1));
  // A collective that carries data still agrees at this size.
  const auto ranks = job.allgather(job.rank());
  for (std::uint32_t p = 0; p < job.size(); ++p)
    if (ranks[p] != p) fail(job, "allgather put " + std::to_string(ranks[p]) + " at " + std::to_string(p));
  if (job.rank() == 0)
    std::printf("scale job_test: %u processes reached each other and met in %.1f s\n", job.size(), seconds_since(t0));
  return 0;
}

int with_dead_peer(Job& job) {
  const std::uint32_t victim = job.size() - 1;
  if (job.rank() == victim) raise(SIGKILL);  // joined the job, then gone without a word
  const auto t0 = Clock::now();
  try {
    job.barrier();
    fail(job, "the barrier completed without process " + std::to_string(victim));
  } catch (const Error& e) {
    if (e.code() != Errc::peer_failed) fail(job, std::string("the barrier failed otherwise: ") + e.what());
  }
  const double detected_s = seconds_since(t0);
  // The dead process refuses calls; everyone else still answers.
  for (std::uint32_t p = 0; p < job.size(); ++p) {
    if (p == job.rank()) continue;
    const auto error = ask_rank(job, p);
    if (p == victim && error != Errc::peer_failed) fail(job, "a call to the dead process did not fail with peer_failed");
    if (p != victim && error) fail(job, "a call to live process " + std::to_string(p) + " failed");
  }
  if (job.rank() == 0)
    std::printf("scale job_test: %u processes saw process %u die within %.1f s and still reached each other\n",
                job.size(), victim, detected_s);
  return 0;  // leaving (~Job) gives up on the dead process
}

}  // namespace

int main(int argc, char** argv) {
  Job job(argc, argv);
  const bool kill_last = argc > 1 && std::strcmp(argv[1], "--kill-last") == 0;
  if (argc > 1 + kill_last) fail(job, std::string("unknown argument ") + argv[1 + kill_last]);
  if (job.size() < 2) fail(job, "needs at least 2 processes");
  return kill_last ? with_dead_peer(job) : healthy(job);
}
