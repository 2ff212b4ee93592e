// The teardown contract, one scenario per run (argv[1]): leaving a job is
// collective and drains, so a process that leaves while its peers still call
// it serves them until they are done; nothing sent before teardown is lost;
// threads may leave Job::run in any order. Each scenario checks, after its
// Job is gone, that every call ran exactly once, and prints
// "teardown <scenario>: ok" on every process that got there.
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "rdmx/fabric/call.hpp"
#include "rdmx/fabric/collective.hpp"
#include "rdmx/fabric/job.hpp"
#include "rdmx/fabric/rma.hpp"
#include "rdmx/action/action.hpp"
#include "rdmx/invoke/aggregator.hpp"
#include "rdmx/invoke/messenger.hpp"
#include "rdmx/memory/arena.hpp"

using namespace rdmx;

namespace {

// Calls each sender makes. Large enough that a burst is still under way when
// the receiver leaves, small enough for a sanitizer build.
constexpr std::uint64_t burst = 4000;

std::atomic<std::uint64_t> ran{0};
void count() { ran.fetch_add(1, std::memory_order_relaxed); }
void counted_action(std::uint64_t) { count(); }

[[noreturn]] void fail(const std::string& what) {
  std::fprintf(stderr, "teardown: FAILED: %s\n", what.c_str());
  std::fflush(stderr);
  std::_Exit(1);
}

// Process 1 leaves at once; every other process fires a burst of `kind`
// calls at it (half without waiting, half waited for until they ran) and then
// leaves too. Process 1 must run every call exactly once.
std::uint64_t leave_mid_burst(Job& job, const std::string& kind) {
  const ThreadId leaver{1, 0};
  if (job.rank() == 1) return (job.size() - 1) * burst;  // returns from "main": ~Job serves the burst
  memory::Block block = job.arena().allocate_chunk(4096);
  std::memset(block.data, 7, 4096);
  const std::span<const std::byte> bytes{block.data, 256};
  MessengerGlobal messenger;
  Aggregator aggregator(Aggregation::trad);
  std::vector<Future<void>> dropped;  // async: futures dropped unwaited at teardown
  for (std::uint64_t i = 0; i < burst; ++i) {
    const bool wait = i >= burst / 2 && i % 64 == 0;  // waited-for calls need the leaver to serve them
    Synchronizer sync;
    const Completion s = wait ? when_run(sync) : Completion{};
    if (kind == "send") {
      call(leaver, [] { count(); }, s);
    } else if (kind == "one_sided") {
      messenger.call(leaver, [] { count(); }, s);
    } else if (kind == "aggregated") {
      aggregator.call(leaver, [] { count(); }, s);
    } else if (kind == "buffer_inline") {
      messenger.call_buffer(leaver, [](std::span<std::byte>) { count(); }, bytes, s);
    } else if (kind == "buffer_read") {
      messenger.call_buffer(leaver, [](std::span<std::byte>) { count(); },
                                                             local_locator(block.data, 256), s);
    } else if (kind == "async") {
      Future<void> f = async(action<&counted_action>, leaver, i);
      if (wait) f.wait();
      else dropped.push_back(std::move(f));
    } else {
      fail("unknown call kind '" + kind + "'");
    }
    if (wait && kind == "aggregated") aggregator.flush();
    if (wait && kind != "async") sync.wait();
  }
  aggregator.flush();
  return 0;
}

// Two threads per process. Thread `first` of every process returns from
// Job::run at once; the other thread then calls thread `first` of every
// process (its own included) and waits for each call to run.
std::uint64_t threads_leave(Job& job, std::uint32_t first) {
  if (job.threads_per_process() != 2) fail("threads_leave needs --rdmx-threads=2");
  job.run([&](ThreadId me) {
    if (me.thread == first) return;
    for (std::uint64_t i = 0; i < burst / 4; ++i) {
      Synchronizer sync;
      call(ThreadId{static_cast<std::uint32_t>(i % job.size()), first}, [] { count(); }, when_run(sync));
      sync.wait();  // the thread that left must serve it
    }
  });
  // Each process's sender called process p for every i with i % size == p.
  std::uint64_t mine = 0;
  for (std::uint64_t i = 0; i < burst / 4; ++i) mine += i % job.size() == job.rank();
  return mine * job.size();
}

// Two threads per process; thread 1 of process 1 throws out of Job::run.
// By default that ends process 1 (JobOptions::on_thread_exception), so
// process 0's calls to it fail with Errc::peer_failed instead of hanging.
// Run with --enable-recovery, so mpirun lets process 0 finish.
void thread_throws(Job& job) {
  job.run([&](ThreadId me) {
    if (me.process == 1 && me.thread == 1) throw std::runtime_error("deliberate failure in a worker thread");
    if (me.process != 0 || me.thread != 0) {
      const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
      while (std::chrono::steady_clock::now() < until) progress();  // process 1 ends long before this
      fail("process 1 was not ended by its thread's exception");
    }
    for (;;) {
      try {
        Synchronizer sync;
        call(ThreadId{1, 1}, [] {}, when_run(sync));
        sync.wait();
      } catch (const Error& e) {
        if (e.code() != Errc::peer_failed) fail(std::string("unexpected error: ") + e.what());
        std::printf("teardown thread_throws: ok (the survivor saw: %s)\n", e.what());
        std::fflush(stdout);
        std::_Exit(0);  // the job has failed: no collective teardown with a dead member
      }
    }
  });
}

// The last process leaves the job (~Job) at once while the others enter a
// collective it never enters: theirs fail with Errc::shut_down naming it,
// in bounded time, instead of waiting for ever; then all leave together.
// `which`: barrier, allgather (Job's), or worker (rdmx::barrier in Job::run).
// With `dies` it is killed instead (SIGKILL) and theirs fail with
// Errc::peer_failed naming it; the survivors then leave together.
void peer_leaves(Job& job, const std::string& which, bool dies = false) {
  const std::uint32_t leaver = job.size() - 1;
  if (job.rank() == leaver) {
    if (dies) raise(SIGKILL);
    return;
  }
  const auto t0 = std::chrono::steady_clock::now();
  std::string error;
  auto expect_left = [&](const Error& e) {
    if (e.code() != (dies ? Errc::peer_failed : Errc::shut_down)) fail(std::string("the wait failed otherwise: ") + e.what());
    const std::string named = "process " + std::to_string(leaver) + (dies ? "" : " has left the job");
    if (std::string(e.what()).find(named) == std::string::npos) fail(std::string("the error does not say '") + named + "': " + e.what());
    error = e.what();
  };
  try {
    if (which == "barrier") {
      job.barrier();
    } else if (which == "allgather") {
      (void)job.allgather(job.rank());
    } else if (which == "worker") {
      job.run([&](ThreadId) {
        try {
          rdmx::barrier();
        } catch (const Error& e) {
          expect_left(e);
        }
        // Every later collective fails the same way, at once: none can
        // complete, so none is started.
        for (int i = 0; dies && i < 50; ++i) {
          try {
            if (i % 2 == 0)
              rdmx::barrier();
            else
              (void)rdmx::allreduce(std::uint64_t{1}, rdmx::op::sum{});
            fail("a worker collective completed after process " + std::to_string(leaver) + " died");
          } catch (const Error& e) {
            expect_left(e);
          }
        }
      });
      if (error.empty()) fail("rdmx::barrier completed without process " + std::to_string(leaver));
    } else {
      fail("unknown collective '" + which + "'");
    }
    if (which != "worker") fail(which + " completed without process " + std::to_string(leaver));
  } catch (const Error& e) {
    expect_left(e);
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("process %u: %s failed after %.2f s: %s\n", job.rank(), which.c_str(), s, error.c_str());
}

// Process 0 enters Job::barrier while the others enter Job::allgather: every
// process gets Errc::invalid_argument, and the next collective, the same on
// all, starts in step and completes.
void mismatched(Job& job) {
  try {
    if (job.rank() == 0)
      job.barrier();
    else
      (void)job.allgather(job.rank());
    fail("mismatched collectives completed");
  } catch (const Error& e) {
    if (e.code() != Errc::invalid_argument) fail(std::string("mismatched collectives failed otherwise: ") + e.what());
    // Every process learns who called what.
    const std::string others = job.size() == 2 ? "process 1 called allgather" : "called allgather";
    if (std::string(e.what()).find("process 0 called barrier") == std::string::npos ||
        std::string(e.what()).find(others) == std::string::npos)
      fail(std::string("the mismatch does not say who called what: ") + e.what());
  }
  const auto ranks = job.allgather(job.rank());
  for (std::uint32_t p = 0; p < job.size(); ++p)
    if (ranks[p] != p) fail("the allgather after the mismatch put " + std::to_string(ranks[p]) + " at " + std::to_string(p));
  job.barrier();
}

// Worker threads that meet in different collectives: process 0's thread 0
// calls broadcast_value, process 1's thread 0 allreduce, and every other
// thread barrier, after a pause, so that the root sees the disagreement
// before most of them have arrived. Every thread gets Errc::invalid_argument
// saying who called what, once all have come; the next collectives, the
// same on all, start in step and complete.
void worker_mismatched(Job& job) {
  std::atomic<std::uint32_t> failed{0};
  job.run([&](ThreadId me) {
    const auto t0 = std::chrono::steady_clock::now();
    try {
      if (me.process == 0 && me.thread == 0) {
        (void)broadcast_value(std::uint32_t{7}, ThreadId{0, 0});
      } else if (me.process == 1 && me.thread == 0) {
        (void)allreduce(std::uint64_t{1}, op::sum{});
      } else {
        std::this_thread::sleep_for(std::chrono::milliseconds(300));
        rdmx::barrier();
      }
      fail("mismatched collectives completed on " + to_string(me));
    } catch (const Error& e) {
      const std::string what = e.what();
      if (e.code() != Errc::invalid_argument) fail("mismatched collectives failed otherwise: " + what);
      for (const char* said : {"process 0 thread 0 called broadcast_value<4 bytes>", "process 1 thread 0 called allreduce<8 bytes>",
                               " called barrier"})
        if (what.find(said) == std::string::npos) fail(std::string("the mismatch does not say '") + said + "': " + what);
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (me.thread == 0) std::printf("process %u: the mismatch failed after %.2f s: %s\n", me.process, s, what.c_str());
      failed.fetch_add(1);
    }
    const std::uint64_t total = allreduce(std::uint64_t{1}, op::sum{});
    if (total != job.total_threads()) fail("the allreduce after the mismatch gave " + std::to_string(total));
    rdmx::barrier();
  });
  if (failed.load() != job.threads_per_process()) fail(std::to_string(failed.load()) + " threads saw the mismatch");
  job.barrier();
}

// Two threads per process. Thread 1 of the last process leaves Job::run's
// function between two collectives (`how`: `throws` or `returns`) while
// every other thread enters the second. With on_thread_exception =
// end_process (`throws:end_process`) the process ends and every other
// process's collective fails with Errc::peer_failed, naming it. Otherwise
// its own threads stand in for it: the collective fails on every thread
// with Errc::shut_down, saying which thread left and how; Job::run rethrows
// the exception on its process; the next collectives start in step.
void worker_leaves(Job& job, const std::string& how) {
  if (job.threads_per_process() != 2) fail("worker_leaves needs --rdmx-threads=2");
  const ThreadId leaver{job.size() - 1, 1};
  const bool ends = how == "throws:end_process";
  std::atomic<std::uint32_t> failed{0};
  try {
    job.run([&](ThreadId me) {
      rdmx::barrier();
      if (me == leaver) {
        if (how == "returns") return;
        throw std::runtime_error("deliberate failure between two collectives");
      }
      const auto t0 = std::chrono::steady_clock::now();
      try {
        rdmx::barrier();
        fail("a barrier completed without " + to_string(leaver));
      } catch (const Error& e) {
        const std::string what = e.what();
        const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        if (ends) {
          if (e.code() != Errc::peer_failed || what.find("process " + std::to_string(leaver.process)) == std::string::npos)
            fail("the barrier failed otherwise: " + what);
          std::printf("teardown worker_leaves:%s: ok (the survivor saw after %.2f s: %s)\n", how.c_str(), s, what.c_str());
          std::fflush(stdout);
          return;  // the survivors then leave together, without the dead one
        }
        const std::string said = "process " + std::to_string(leaver.process) + " thread 1 had " +
                                 (how == "returns" ? "returned from Job::run's function"
                                                   : "left Job::run's function with an exception (deliberate failure");
        if (e.code() != Errc::shut_down || what.find(said) == std::string::npos)
          fail("the barrier failed otherwise (expected shut_down, '" + said + "'): " + what);
        if (me.thread == 0) std::printf("process %u: the barrier failed after %.2f s: %s\n", me.process, s, what.c_str());
        failed.fetch_add(1);
      }
    });
    if (ends) return;
    if (job.rank() == leaver.process && how != "returns") fail("Job::run did not rethrow the worker's exception");
  } catch (const std::runtime_error& e) {
    if (job.rank() != leaver.process || std::string(e.what()) != "deliberate failure between two collectives") throw;
  }
  const std::uint32_t expected = job.rank() == leaver.process ? 1 : 2;
  if (failed.load() != expected) fail(std::to_string(failed.load()) + " threads saw the barrier fail");
  // In step again, at both levels.
  job.barrier();
  job.run([&](ThreadId) {
    const std::uint64_t total = allreduce(std::uint64_t{1}, op::sum{});
    if (total != job.total_threads()) fail("the allreduce after the failure gave " + std::to_string(total));
  });
}

// The last process's worker threads return from Job::run at once and it
// enters Job::barrier, while every other process's threads, still in
// Job::run, enter a worker barrier, after a pause on some threads so that
// both orders of arrival at the root occur. Neither could complete: every
// waiting thread gets Errc::shut_down naming the process outside Job::run.
// Then the Job::barrier completes, and a worker allreduce, the last
// process's threads included, starts in step.
void worker_meets_job(Job& job) {
  const std::uint32_t last = job.size() - 1;
  std::atomic<std::uint32_t> failed{0};
  if (job.rank() == last) {
    job.run([](ThreadId) {});
    job.barrier();
  } else {
    job.run([&](ThreadId me) {
      if ((me.process + me.thread) % 2 == 1) std::this_thread::sleep_for(std::chrono::milliseconds(200));
      const auto t0 = std::chrono::steady_clock::now();
      try {
        rdmx::barrier();
        fail("a worker barrier completed without process " + std::to_string(last) + "'s threads");
      } catch (const Error& e) {
        const std::string what = e.what();
        const std::string said = "process " + std::to_string(last) + " waits in Job::barrier outside Job::run";
        if (e.code() != Errc::shut_down || what.find(said) == std::string::npos)
          fail("the worker barrier failed otherwise (expected shut_down, '" + said + "'): " + what);
        const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        if (me.thread == 0) std::printf("process %u: the barrier failed after %.2f s: %s\n", me.process, s, what.c_str());
        failed.fetch_add(1);
      }
    });
    if (failed.load() != job.threads_per_process()) fail(std::to_string(failed.load()) + " threads saw the barrier fail");
    job.barrier();
  }
  job.run([&](ThreadId) {
    const std::uint64_t total = allreduce(std::uint64_t{1}, op::sum{});
    if (total != job.total_threads()) fail("the allreduce after the failure gave " + std::to_string(total));
    rdmx::barrier();
  });
  job.barrier();
}

// Every process records its pid in directory argv[2] and spins in a poll
// loop for ever; tests/teardown/orphan.sh kills the launcher and checks that
// every process ends by itself.
[[noreturn]] void spin(const std::string& dir) {
  const std::string path = dir + "/" + std::to_string(getpid());
  std::FILE* f = std::fopen(path.c_str(), "w");
  if (f == nullptr) fail("cannot write " + path);
  std::fclose(f);
  for (;;) progress();
}

}  // namespace

int main(int argc, char** argv) {
  const std::string scenario = argc > 1 ? argv[1] : "";
  std::uint64_t expected = 0;
  std::uint32_t rank = 0;
  {
    Job::Options options;
    if (scenario.rfind("worker_leaves:", 0) == 0 && scenario != "worker_leaves:throws:end_process")
      options.on_thread_exception = ThreadException::rethrow;
    Job job(argc, argv, options);
    rank = job.rank();
    if (job.size() < 2) fail("needs at least 2 processes");
    if (scenario.rfind("leave_mid_burst:", 0) == 0) {
      expected = leave_mid_burst(job, scenario.substr(std::strlen("leave_mid_burst:")));
    } else if (scenario == "thread0_leaves_first") {
      expected = threads_leave(job, 0);
    } else if (scenario == "thread1_leaves_first") {
      expected = threads_leave(job, 1);
    } else if (scenario == "thread_throws") {
      thread_throws(job);
    } else if (scenario.rfind("peer_leaves:", 0) == 0) {
      peer_leaves(job, scenario.substr(std::strlen("peer_leaves:")));
    } else if (scenario.rfind("peer_dies:", 0) == 0) {
      peer_leaves(job, scenario.substr(std::strlen("peer_dies:")), true);
    } else if (scenario == "mismatched") {
      mismatched(job);
    } else if (scenario == "worker_mismatched") {
      worker_mismatched(job);
    } else if (scenario.rfind("worker_leaves:", 0) == 0) {
      worker_leaves(job, scenario.substr(std::strlen("worker_leaves:")));
    } else if (scenario == "worker_meets_job") {
      worker_meets_job(job);
    } else if (scenario == "spin") {
      spin(argc > 2 ? argv[2] : ".");
    } else {
      fail("unknown scenario '" + scenario + "'");
    }
  }
  const std::uint64_t got = ran.load();
  if (got != expected)
    fail("process " + std::to_string(rank) + " ran " + std::to_string(got) + " calls, expected " + std::to_string(expected));
  std::printf("teardown %s: ok (process %u ran %llu calls)\n", scenario.c_str(), rank,
              static_cast<unsigned long long>(got));
  return 0;
}
