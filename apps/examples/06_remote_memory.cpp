// 06_remote_memory: read, write and update another process's memory.
//   scripts/run --tls shm -np 2 build/apps/examples/rdmx-example-06-remote-memory --rdmx-threads=2
// allocate_remote asks a process's service thread for registered memory and
// returns its network-wide name, a RemoteLocator. put, get and the 64-bit
// atomics then go straight to that memory: no code runs on its owner's
// worker threads (RDMA; over TCP, UCX's emulation of it).
#include <atomic>
#include <cstdio>
#include <vector>

#include "rdmx/core/error.hpp"
#include "rdmx/fabric/collective.hpp"
#include "rdmx/fabric/job.hpp"
#include "rdmx/fabric/rma.hpp"

int main(int argc, char** argv) {
  try {
    rdmx::Job job(argc, argv);
    const std::uint32_t n = job.size();
    std::atomic<int> errors{0};
    auto check = [&](bool ok, const char* what) {
      if (ok) return;
      std::fprintf(stderr, "06_remote_memory: %s\n", what);
      errors.fetch_add(1);
    };

    job.run([&](rdmx::ThreadId me) {
      // 1. Memory in the next process, written and read back. A locator is
      // plain data: it may be sent to other threads inside calls.
      const std::uint32_t next = (me.process + 1) % n;
      rdmx::RemoteLocator block = rdmx::allocate_remote(next, 4096);  // zero-filled
      std::vector<std::uint64_t> out(512), in(512, 1);
      for (std::size_t i = 0; i < out.size(); ++i) out[i] = (std::uint64_t{me.process} << 32) + i;
      rdmx::get(in.data(), block).get();
      check(in == std::vector<std::uint64_t>(512, 0), "fresh remote memory is not zero-filled");
      rdmx::put(out.data(), block).get();  // out may be reused once the future is ready
      rdmx::get(in.data(), block).get();
      check(in == out, "put then get did not round-trip");
      rdmx::free_remote(block);

      // 2. One counter for the whole job, in process 0. Thread {0, 0}
      // allocates it and hands the locator to every thread.
      rdmx::RemoteLocator counter{};
      if (me == rdmx::ThreadId{0, 0}) counter = rdmx::allocate_remote(0, 8);
      counter = rdmx::broadcast_value(counter, rdmx::ThreadId{0, 0});

      // Every thread adds 1, 100 times: an atomic fetch_add returns the
      // value before the add, so every ticket drawn in the job is distinct.
      constexpr std::uint64_t adds = 100;
      std::uint64_t ticket_sum = 0;
      for (std::uint64_t i = 0; i < adds; ++i) ticket_sum += rdmx::fetch_add(counter, 1).get();
      rdmx::barrier();  // every thread's adds have completed (each waited for its futures)

      const std::uint64_t tickets = adds * job.total_threads();
      std::uint64_t final_value = 0;
      rdmx::get(&final_value, counter).get();
      check(final_value == tickets, "fetch_adds were lost");
      // Tickets 0 .. tickets-1, each drawn once: their sum is known.
      check(rdmx::allreduce(ticket_sum, rdmx::op::sum{}) == tickets * (tickets - 1) / 2, "two threads drew the same ticket");

      // compare_swap succeeds for exactly one thread of the job.
      const std::uint64_t seen = rdmx::compare_swap(counter, tickets, 0).get();
      check(rdmx::allreduce(std::uint32_t{seen == tickets}, rdmx::op::sum{}) == 1, "compare_swap won more than once");
      rdmx::barrier();  // nobody uses the counter any more
      if (me == rdmx::ThreadId{0, 0}) rdmx::free_remote(counter);
      std::printf("[%s] round-tripped 4 KiB through process %u; counter reached %llu\n", rdmx::to_string(me).c_str(),
                  next, static_cast<unsigned long long>(final_value));
    });
    return errors.load() == 0 ? 0 : 1;
  } catch (const rdmx::Error& e) {
    std::fprintf(stderr, "06_remote_memory: %s (%s)\n", e.what(), rdmx::to_string(e.code()));
    return 1;
  }
}
