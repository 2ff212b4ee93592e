// 04_async_futures: typed remote actions and futures.
//   scripts/run --tls shm -np 2 build/apps/examples/rdmx-example-04-async-futures
// rdmx::async runs a function with any serializable arguments on another
// worker thread and returns an rdmx::Future of its result. Unlike the call
// family, arguments may be owning types (strings, vectors, maps): they are
// serialized, not captured.
#include <atomic>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

#include "rdmx/core/error.hpp"
#include "rdmx/core/future.hpp"
#include "rdmx/fabric/collective.hpp"
#include "rdmx/fabric/job.hpp"
#include "rdmx/fabric/quiet.hpp"
#include "rdmx/action/action.hpp"

// Plain functions become actions with rdmx::action<&f>: named at compile
// time, so every process of the program knows them by the same id.
std::uint64_t square(std::uint64_t x) { return x * x; }
std::string greet(const std::string& name) { return "hello, " + name; }
std::atomic<std::uint64_t> posted{0};
void count(std::uint64_t v) { posted.fetch_add(v); }

int main(int argc, char** argv) {
  try {
    rdmx::Job job(argc, argv);
    const std::uint32_t n = job.size();
    std::atomic<int> errors{0};
    auto check = [&](bool ok, const char* what) {
      if (ok) return;
      std::fprintf(stderr, "04_async_futures: %s\n", what);
      errors.fetch_add(1);
    };

    job.run([&](rdmx::ThreadId me) {
      const rdmx::ThreadId peer{(me.process + 1) % n, me.thread};

      // 1. async + get(): get() progresses this thread until the reply is in.
      rdmx::Future<std::string> hello = rdmx::async(rdmx::action<&greet>, peer, std::string("rdmx"));
      const std::string text = hello.get();
      check(text == "hello, rdmx", "greet answered something else");

      // 2. Many actions in flight, then one wait for all of them. when_all
      // never fails itself: each future inside says how its action went.
      std::vector<rdmx::Future<std::uint64_t>> squares;
      for (std::uint64_t i = 0; i < 16; ++i) squares.push_back(rdmx::async(rdmx::action<&square>, peer, i));
      std::uint64_t sum = 0;
      for (auto& f : rdmx::when_all(std::move(squares)).get()) sum += f.get();
      check(sum == 1240, "the squares of 0..15 do not sum to 1240");

      // 3. then(): a continuation runs on this thread once the value is in.
      // A captureless lambda is an action too.
      rdmx::Future<std::uint64_t> answer = rdmx::async([](std::uint64_t x) { return 2 * x; }, peer, std::uint64_t{20})
                                               .then([](std::uint64_t& doubled) { return doubled + 2; });
      check(answer.get() == 42, "then() saw another value");

      // 4. post: fire and forget. quiet() below waits until they have run.
      for (std::uint64_t i = 1; i <= 10; ++i) rdmx::post(rdmx::action<&count>, peer, i);

      // 5. What the action throws fails its future with Errc::remote_exception.
      auto bad = rdmx::async([](int) -> int { throw std::out_of_range("index 7"); }, peer, 7);
      try {
        bad.get();
        check(false, "a remote exception was not reported");
      } catch (const rdmx::Error& e) {
        check(e.code() == rdmx::Errc::remote_exception, "a remote exception came back with another code");
      }

      // 6. Ending a phase: quiet() returns once every action this thread
      // sent has run (posted ones too); the barrier, once everyone's has.
      rdmx::quiet();
      rdmx::barrier();
      // Every thread of the predecessor's process posted 1..10 here.
      const std::uint64_t expected = 55 * job.threads_per_process();
      check(posted.load() == expected, "posted actions had not all run after quiet() and barrier()");
      std::printf("[%s] %s; squares summed to %llu; %llu posted here\n", rdmx::to_string(me).c_str(), text.c_str(),
                  static_cast<unsigned long long>(sum), static_cast<unsigned long long>(posted.load()));
    });
    return errors.load() == 0 ? 0 : 1;
  } catch (const rdmx::Error& e) {
    std::fprintf(stderr, "04_async_futures: %s (%s)\n", e.what(), rdmx::to_string(e.code()));
    return 1;
  }
}
