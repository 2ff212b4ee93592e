// rdmx-hello: a tour of the foundation layers in one short job.
//   scripts/run --tls shm -np 2 build/apps/examples/rdmx-hello [--rdmx-threads=2]
// Every process greets the next one with a call, asks it a question with
// call_return, ships it a buffer with call_buffer, allocates memory in it and
// writes there with one-sided puts and atomics, then everyone meets in a
// broadcast.
#include <cstdio>
#include <numeric>
#include <vector>

#include "rdmx/fabric/call.hpp"
#include "rdmx/fabric/job.hpp"
#include "rdmx/fabric/rma.hpp"

int main(int argc, char** argv) {
  try {
    rdmx::Job job(argc, argv);
    const std::uint32_t me = job.rank(), n = job.size(), next = (me + 1) % n;
    if (me == 0) std::printf("%s\n", job.describe().c_str());
    job.barrier();

    // 1. A call: the lambda and its captures run on thread 0 of the next process.
    rdmx::Synchronizer sync;
    rdmx::call<rdmx::Notify::consumed>({next, 0}, [me] {
      std::printf("[%u] hello from process %u\n", rdmx::Job::current().rank(), me);
    }, sync);
    sync.wait();

    // 2. call_return: a question answered remotely, written back into `answer`.
    struct Answer { std::uint32_t rank; std::uint32_t threads; };
    Answer answer{};
    rdmx::call_return({next, 0}, [] {
      return Answer{rdmx::Job::current().rank(), rdmx::Job::current().threads_per_process()};
    }, &answer, sync);
    sync.wait();

    // 3. call_buffer: 1 MiB travels with the call (by rendezvous, not copied into the message).
    std::vector<std::uint32_t> data(1 << 18);
    std::iota(data.begin(), data.end(), 0u);
    static std::uint64_t sum_seen = 0;
    rdmx::call_buffer<rdmx::Notify::consumed>({next, 0}, [](std::span<std::byte> bytes) {
      sum_seen = 0;
      for (std::size_t i = 0; i + 4 <= bytes.size(); i += 4) sum_seen += *reinterpret_cast<const std::uint32_t*>(bytes.data() + i);
    }, std::as_bytes(std::span(data)), sync);
    sync.wait();

    // 4. Remote allocation + one-sided access: no code runs on the target's workers.
    rdmx::RemoteLocator remote = rdmx::allocate_remote(next, 4096);
    std::vector<std::uint64_t> out(512, 0xC0FFEE00u + me), in(512, 0);
    rdmx::put(out.data(), remote).get();
    rdmx::get(in.data(), remote).get();
    std::uint64_t before = rdmx::fetch_add(remote.slice(0, 8), 1).get();
    rdmx::free_remote(remote);

    // 5. A broadcast reaches every worker thread of every process.
    static std::atomic<int> greeted{0};
    rdmx::broadcast<rdmx::Notify::consumed>([] { greeted.fetch_add(1); }, sync);
    job.run([&](rdmx::ThreadId) {
      while (greeted.load() < static_cast<int>(n * job.threads_per_process())) rdmx::progress();
    });
    sync.wait();
    job.barrier();

    std::printf("[%u] process %u answered (worker threads: %u); buffer delivered; put/get %s, fetch_add saw %#llx; "
                "broadcast ran on %d thread(s) here\n",
                me, answer.rank, answer.threads, in == out ? "round-tripped" : "MISMATCH",
                static_cast<unsigned long long>(before), greeted.load());
    job.barrier();
    return in == out ? 0 : 1;
  } catch (const rdmx::Error& e) {
    std::fprintf(stderr, "rdmx-hello: %s (%s)\n", e.what(), rdmx::to_string(e.code()));
    return 1;
  }
}
