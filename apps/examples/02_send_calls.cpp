// 02_send_calls: run code on another process with send-based calls.
//   scripts/run --tls shm -np 2 build/apps/examples/rdmx-example-02-send-calls
// The send-based calls (rdmx/fabric/call.hpp) need no set-up: any thread may
// call any thread of the job at any time. The callee is a lambda whose
// captures travel with the call, so they must be plain values.
#include <cstdio>
#include <numeric>
#include <span>
#include <stdexcept>
#include <vector>

#include "rdmx/core/error.hpp"
#include "rdmx/fabric/call.hpp"
#include "rdmx/fabric/job.hpp"

// Calls run on their destination thread, one at a time, so state that only
// calls touch needs no lock. Each process's total is written by its predecessor.
static std::uint64_t total = 0;

static int fail(const char* what) {
  std::fprintf(stderr, "02_send_calls: %s\n", what);
  return 1;
}

int main(int argc, char** argv) {
  try {
    rdmx::Job job(argc, argv);
    const std::uint32_t me = job.rank(), next = (me + 1) % job.size();
    const rdmx::ThreadId peer{next, 0};  // thread 0 of the next process: its main thread

    // 1. call: the peer adds to its total. when_run counts `sync` down
    // once the lambda has run there; wait() serves calls addressed to
    // this thread meanwhile, so two processes calling each other never deadlock.
    rdmx::Synchronizer sync;
    for (std::uint64_t i = 1; i <= 100; ++i) rdmx::call(peer, [i] { total += i; }, rdmx::when_run(sync));
    sync.wait();

    // 2. call_return: a question answered there, as a future. Calls from
    // one thread to another run in order, so it sees all 100 adds.
    const std::uint64_t seen = rdmx::call_return(peer, [] { return total; }).get();
    if (seen != 5050) return fail("call_return did not see the 100 calls before it");
    const std::uint64_t added = seen;

    // 3. call_buffer: bulk data travels as the payload, not in the captures.
    std::vector<std::uint32_t> data(1 << 16);
    std::iota(data.begin(), data.end(), 0u);
    rdmx::call_buffer(peer, [](std::span<std::byte> bytes) {
      const std::span<const std::uint32_t> values(reinterpret_cast<const std::uint32_t*>(bytes.data()), bytes.size() / 4);
      total = std::accumulate(values.begin(), values.end(), std::uint64_t{0});
    }, std::as_bytes(std::span(data)), rdmx::when_run(sync));
    sync.wait();
    // The answer written into the caller's object instead: no allocation.
    std::uint64_t summed = 0;
    rdmx::call_return(peer, [] { return total; }, rdmx::into(summed, sync));
    sync.wait();
    if (summed != std::uint64_t{65535} * 65536 / 2) return fail("call_buffer's payload arrived changed");

    // 4. Failures come back to the caller: what the remote lambda throws
    // surfaces in wait() as Errc::remote_exception, with its message.
    rdmx::call(peer, [] { throw std::runtime_error("no such key"); }, rdmx::when_run(sync));
    try {
      sync.wait();
      return fail("a remote exception was not reported");
    } catch (const rdmx::Error& e) {
      if (e.code() != rdmx::Errc::remote_exception) return fail("a remote exception came back with another code");
      std::printf("[%u] the peer's exception came back: %s\n", me, e.what());
    }

    std::printf("[%u] process %u summed 1..100 to %llu, and a %zu-byte buffer\n", me, next,
                static_cast<unsigned long long>(added), data.size() * sizeof(data[0]));
    // No barrier needed: ~Job keeps serving peers' calls until every process has left.
    return 0;
  } catch (const rdmx::Error& e) {
    std::fprintf(stderr, "02_send_calls: %s (%s)\n", e.what(), rdmx::to_string(e.code()));
    return 1;
  }
}
