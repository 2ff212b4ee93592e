// Fault-injection stress: random calls of every kind between the worker
// threads of 3 processes (2 threads each), threads that stop calling at
// random times, and process 2 killed (SIGKILL, no goodbye) at a random point.
// Survivors must see calls to the dead process fail with Errc::peer_failed
// naming it, never hang, and every call between survivors must run exactly
// once. Each call carries its sender and a per-sender id: the destination
// counts it and flags a duplicate at once. After its Job is gone, each
// survivor writes what it sent to and ran from every thread into
// DIR/<rank>; `stress_test check DIR` compares them.
//   stress_test run DIR SEED   (under mpirun --enable-recovery, 3 processes)
//   stress_test check DIR
#include <signal.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "rdmx/fabric/call.hpp"
#include "rdmx/fabric/job.hpp"
#include "rdmx/fabric/rma.hpp"
#include "rdmx/action/action.hpp"
#include "rdmx/invoke/aggregator.hpp"
#include "rdmx/invoke/messenger.hpp"
#include "rdmx/memory/arena.hpp"

using namespace rdmx;

namespace {

constexpr std::uint32_t processes = 3, threads = 2, senders = processes * threads;
constexpr std::uint32_t victim = 2;  // the process that is killed
constexpr std::uint64_t max_calls = 20000;  // per sending thread

[[noreturn]] void fail(const std::string& what) {
  std::fprintf(stderr, "stress: FAILED: %s\n", what.c_str());
  std::fflush(stderr);
  std::_Exit(1);
}

std::uint32_t index_of(ThreadId t) { return t.process * threads + t.thread; }

// What this process ran, per sending thread: a count and the ids seen.
struct Ran {
  std::array<std::atomic<std::uint64_t>, senders> count{};
  std::array<std::unique_ptr<std::atomic<std::uint8_t>[]>, senders> seen;
  Ran() {
    for (auto& s : seen) s.reset(new std::atomic<std::uint8_t>[max_calls]());
  }
} ran;

void arrive(std::uint32_t from, std::uint64_t id) {
  if (from >= senders || id >= max_calls) fail("a call arrived with sender " + std::to_string(from) + ", id " + std::to_string(id));
  if (ran.seen[from][id].exchange(1) != 0)
    fail("call " + std::to_string(id) + " of sender " + std::to_string(from) + " ran twice");
  ran.count[from].fetch_add(1, std::memory_order_relaxed);
}
void arrive_action(std::uint32_t from, std::uint64_t id) { arrive(from, id); }

enum Kind { send, one_sided, aggregated, async_call, buffer_inline, buffer_read, kinds };

// What one sending thread made, per destination thread: calls whose sending
// succeeded (they must all run if the destination lives).
struct Made {
  std::array<std::uint64_t, senders> to{};
};
std::array<Made, threads> made;

void expect_victim_failure(const Error& e, ThreadId dest) {
  if (dest.process != victim || e.code() != Errc::peer_failed)
    fail("call to " + to_string(dest) + " failed: " + e.what());
  if (std::string(e.what()).find(std::to_string(victim)) == std::string::npos)
    fail(std::string("the failure does not name process 2: ") + e.what());
}

// Set by the victim's killing thread: its other thread stops calling.
std::atomic<bool> dying{false};

// Over TCP, UCX 1.13 aborts a process that reads an emulated RDMA write from
// a writer that has died meanwhile (docs/fabric-leaving.md, "A UCX 1.13 limitation
// over TCP"): there the victim stops issuing anything (it does not even
// progress, which could start reads) and gives its peers time to take in
// its writes before it dies. Over shared memory it dies mid-call.
[[noreturn]] void die() {
  dying.store(true);
  const char* tls = std::getenv("UCX_TLS");
  if (tls != nullptr && std::strstr(tls, "tcp") != nullptr) std::this_thread::sleep_for(std::chrono::milliseconds(300));
  raise(SIGKILL);
  std::abort();
}

void sender(ThreadId me, std::uint64_t seed, const RemoteLocator& local) {
  std::mt19937_64 rng(seed * 1000003 + index_of(me));
  const bool killer = me.process == victim && me.thread == 0;
  const std::uint64_t calls = killer ? max_calls : rng() % max_calls;  // the others stop at random points
  const std::uint64_t kill_at = killer ? rng() % max_calls : max_calls;
  const std::uint32_t from = index_of(me);
  MessengerGlobal messenger;
  Aggregator aggregator(Aggregation::trad);
  bool victim_dead = false;
  std::array<std::byte, 96> payload{};
  for (std::uint64_t id = 0; id < calls;) {
    // A batch: up to 32 calls, each waited for (consumed) or not, then the waits.
    std::array<std::unique_ptr<Synchronizer>, processes> sync;
    for (auto& s : sync) s = std::make_unique<Synchronizer>();
    std::vector<std::pair<ThreadId, Future<void>>> futures;
    std::array<std::uint64_t, senders> batch{};
    const std::uint64_t end = std::min(calls, id + 1 + rng() % 32);
    for (; id < end; ++id) {
      if (id == kill_at) die();
      if (me.process == victim && dying.load()) {
        for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));  // until the killing thread kills this process
      }
      ThreadId dest{static_cast<std::uint32_t>(rng() % processes), static_cast<std::uint32_t>(rng() % threads)};
      if (dest.process == victim && victim_dead) dest.process = me.process;
      if (dest == me) dest.thread = 1 - me.thread;  // calls to oneself are not what this tests
      const Kind kind = static_cast<Kind>(rng() % kinds);
      const bool consumed = rng() % 2 == 0;
      const Completion s = consumed ? when_run(*sync[dest.process]) : Completion{};
      try {
        switch (kind) {
          case send:
            if (consumed) call(dest, [from, id] { arrive(from, id); }, s);
            else call(dest, [from, id] { arrive(from, id); });
            break;
          case one_sided:
            if (consumed) messenger.call(dest, [from, id] { arrive(from, id); }, s);
            else messenger.call(dest, [from, id] { arrive(from, id); });
            break;
          case aggregated:
            aggregator.call(dest, [from, id] { arrive(from, id); }, s);
            break;
          case async_call:
            futures.emplace_back(dest, async(action<&arrive_action>, dest, from, id));
            break;
          case buffer_inline:
            messenger.call_buffer(
                dest, [from, id](std::span<std::byte>) { arrive(from, id); }, payload, s);
            break;
          case buffer_read:
            messenger.call_buffer(
                dest, [from, id](std::span<std::byte>) { arrive(from, id); }, local, s);
            break;
          default:
            fail("bad kind");
        }
        ++batch[index_of(dest)];
      } catch (const Error& e) {
        expect_victim_failure(e, dest);
        victim_dead = true;
      }
    }
    try {
      aggregator.flush();
      messenger.flush();
    } catch (const Error& e) {
      expect_victim_failure(e, ThreadId{victim, 0});
      victim_dead = true;
    }
    for (std::uint32_t p = 0; p < processes; ++p) try {
        sync[p]->wait();
      } catch (const Error& e) {
        expect_victim_failure(e, ThreadId{p, 0});
        victim_dead = true;
      }
    for (auto& [dest, f] : futures) try {
        f.get();
      } catch (const Error& e) {
        expect_victim_failure(e, dest);
        victim_dead = true;
      }
    for (std::uint32_t d = 0; d < senders; ++d) made[me.thread].to[d] += batch[d];
  }
}

int run(const std::string& dir, std::uint64_t seed, int argc, char** argv) {
  std::uint32_t rank = 0;
  {
    Job job(argc, argv);
    rank = job.rank();
    if (job.size() != processes || job.threads_per_process() != threads)
      fail("needs 3 processes of 2 threads (--rdmx-threads=2)");
    memory::Block block = job.arena().allocate_chunk(256);
    const RemoteLocator local = local_locator(block.data, 256);
    job.run([&](ThreadId me) { sender(me, seed, local); });
  }  // leaving drains: calls from survivors to this process have all run now
  std::ofstream out(dir + "/" + std::to_string(rank));
  for (std::uint32_t t = 0; t < threads; ++t)
    for (std::uint32_t d = 0; d < senders; ++d) out << "made " << rank * threads + t << ' ' << d << ' ' << made[t].to[d] << '\n';
  // The process's threads share `ran`: reported against its thread 0.
  for (std::uint32_t s = 0; s < senders; ++s) out << "ran " << s << ' ' << rank * threads << ' ' << ran.count[s].load() << '\n';
  out << "end\n";
  std::printf("stress: process %u left cleanly\n", rank);
  return 0;
}

// Compares, for every pair of survivors, calls made with calls run.
int check(const std::string& dir) {
  std::array<std::array<std::uint64_t, processes>, senders> made_to{};  // sender thread -> destination process
  std::array<std::array<std::uint64_t, processes>, senders> ran_by{};   // sender thread -> destination process
  std::array<bool, processes> survived{};
  for (std::uint32_t p = 0; p < processes; ++p) {
    std::ifstream in(dir + "/" + std::to_string(p));
    if (!in) continue;
    std::string word;
    bool ended = false;
    while (in >> word) {
      std::uint64_t a, b, n;
      if (word == "end") {
        ended = true;
        break;
      }
      in >> a >> b >> n;
      if (!in || a >= senders || b >= senders) fail("malformed record in " + dir + "/" + std::to_string(p));
      if (word == "made") made_to[a][b / threads] += n;
      else ran_by[a][b / threads] += n;
    }
    if (!ended) fail("process " + std::to_string(p) + "'s record is truncated");
    survived[p] = true;
  }
  if (!survived[0] || !survived[1]) fail("a survivor (process 0 or 1) did not leave cleanly");
  std::uint64_t total = 0;
  for (std::uint32_t s = 0; s < senders; ++s)
    for (std::uint32_t p = 0; p < processes; ++p) {
      if (!survived[s / threads] || !survived[p]) continue;
      if (made_to[s][p] != ran_by[s][p])
        fail("thread " + std::to_string(s) + " made " + std::to_string(made_to[s][p]) + " calls to process " + std::to_string(p) +
             ", which ran " + std::to_string(ran_by[s][p]));
      total += made_to[s][p];
    }
  std::printf("stress: ok, %llu calls between survivors ran exactly once%s\n", static_cast<unsigned long long>(total),
              survived[victim] ? " (process 2 finished before its kill point)" : "");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "run" && argc > 3) return run(argv[2], std::strtoull(argv[3], nullptr, 10), argc, argv);
  if (mode == "check" && argc > 2) return check(argv[2]);
  std::fprintf(stderr, "usage: stress_test run DIR SEED | stress_test check DIR\n");
  return 2;
}
