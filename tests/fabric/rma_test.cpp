// One-sided operations on remotely allocated memory, across real processes.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <cstdint>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "rdmx/fabric/call.hpp"
#include "rdmx/fabric/job.hpp"
#include "rdmx/fabric/rma.hpp"
#include "rdmx/transfer/endpoint.hpp"
#include "rdmx/transfer/transmitter.hpp"

using namespace rdmx;

namespace {
Job& job() { return Job::current(); }
std::uint32_t next_process() { return (job().rank() + 1) % job().size(); }

// Process 0 allocates a counter in process (size-1) and shares its locator.
RemoteLocator shared_counter() {
  RemoteLocator where{};
  if (job().rank() == 0) where = allocate_remote(job().size() - 1, 8);
  return job().allgather(where)[0];
}
}  // namespace

// A process of this machine is watched through /proc, so its endpoint asks
// UCX for no failure detection, which would keep shared memory out (UCX
// 1.13's shared-memory transports cannot detect failures) and send all of a
// machine's traffic over TCP loopback whenever UCX_TLS allows TCP. Run with
// UCX_TLS unset, posix,cma,self and tcp,self.
TEST(Rma, ProcessesOfOneMachineShareMemoryWhereUcxCan) {
  const char* tls = std::getenv("UCX_TLS");
  const std::string allowed = tls != nullptr ? tls : "";
  const bool shared_memory = allowed.empty() || allowed.find("posix") != std::string::npos;
  for (std::uint32_t p = 0; p < job().size(); ++p) {
    if (p == job().rank() || job().process_info(p).hostname != job().process_info(job().rank()).hostname) continue;
    const transfer::Endpoint& ep = transmitter(p).endpoint();
    EXPECT_EQ(ep.detects_failure(), !shared_memory) << "UCX_TLS=" << allowed << ", process " << p;
    EXPECT_EQ(ep.rma_emulated(), !shared_memory) << "UCX_TLS=" << allowed << ", process " << p;
  }
}

// The own process cannot fail apart from this one: its endpoints ask UCX
// for no failure detection whatever the transports, so that UCX may use its
// loopback (`self`) to the own thread instead of a TCP connection to itself;
// one-sided operations on the own memory go through that loopback, never
// emulated.
TEST(Rma, TheOwnProcessIsReachedThroughLoopback) {
  const transfer::Endpoint& own_thread = endpoint_to(ThreadId{job().rank(), 0});
  EXPECT_FALSE(own_thread.detects_failure());
  const transfer::Endpoint& own_memory = transmitter(job().rank()).endpoint();
  EXPECT_FALSE(own_memory.detects_failure());
  EXPECT_FALSE(own_memory.rma_emulated());
  // And it works: a word of the own process's memory, by atomics and a get.
  const RemoteLocator word = allocate_remote(job().rank(), 8);
  const std::uint64_t was = blocking_fetch_add(word, 0);
  EXPECT_EQ(blocking_fetch_add(word, 5), was);
  EXPECT_EQ(blocking_compare_swap(word, was + 5, 9), was + 5);
  std::uint64_t read = 0;
  blocking_get(&read, word);
  EXPECT_EQ(read, 9u);
  free_remote(word);
}

TEST(Job, TypedAllgatherRefusesMismatchedSizes) {
  // Every process gives its rank, typed; then one gives a different size.
  const auto ranks = job().allgather(job().rank());
  ASSERT_EQ(ranks.size(), job().size());
  for (std::uint32_t p = 0; p < job().size(); ++p) EXPECT_EQ(ranks[p], p);
  try {
    if (job().rank() == 0) {
      (void)job().allgather(std::uint64_t{7});
    } else {
      (void)job().allgather(std::uint32_t{7});
    }
    FAIL() << "mismatched sizes were accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::protocol);
    EXPECT_NE(std::string(e.what()).find("were expected"), std::string::npos) << e.what();
  }
}

TEST(Rma, PutThenGetRoundTrips) {
  for (std::size_t size : {std::size_t{8}, std::size_t{4096}, std::size_t{1 << 20}}) {
    RemoteLocator remote = allocate_remote(next_process(), size);
    EXPECT_EQ(remote.process, next_process());
    EXPECT_EQ(remote.length, size);
    std::vector<std::uint8_t> out(size), in(size, 0);
    std::iota(out.begin(), out.end(), static_cast<std::uint8_t>(job().rank() * 31 + size));
    put(out.data(), remote).get();
    flush(remote.process);
    get(in.data(), remote).get();
    EXPECT_EQ(in, out) << size << " bytes";
    std::vector<std::uint8_t> blocking(size, 0);
    blocking_get(blocking.data(), remote);  // over TCP it waits for the owner's progress
    EXPECT_EQ(blocking, out) << size << " bytes, blocking_get";
    free_remote(remote);
  }
  job().barrier();
}

TEST(Rma, FireAndForgetPutsAreCompleteWhenTheirEpochIs) {
  RemoteLocator remote = allocate_remote(next_process(), 64 * 1000);
  std::vector<std::uint64_t> values(1000 * 8);
  std::iota(values.begin(), values.end(), 7u);
  transfer::EpochTag last{};
  for (int i = 0; i < 1000; ++i) last = post_put(&values[i * 8], remote.slice(i * 64, 64));
  while (!last.is_free()) {
    transmitter(remote.process).start_flush();
    transmitter(remote.process).progress();
  }
  std::vector<std::uint64_t> back(values.size(), 0);
  get(back.data(), remote).get();
  EXPECT_EQ(back, values);
  free_remote(remote);
  job().barrier();
}

// Puts and gets with completions: many on one Synchronizer, each counted
// down only once its data is at the target (when_run) or its buffer free
// (when_sent), with no flush asked for by the program; and no completion
// without a Synchronizer.
TEST(Rma, CompletionsCountOneSidedOperations) {
  RemoteLocator remote = allocate_remote(next_process(), 64 * 300);
  std::vector<std::uint64_t> values(300 * 8);
  std::iota(values.begin(), values.end(), 11u + job().rank());
  Synchronizer written;
  for (int i = 0; i < 300; ++i) put(&values[i * 8], remote.slice(i * 64, 64), i % 2 == 0 ? when_run(written) : when_sent(written));
  written.wait();
  EXPECT_EQ(written.operations_left(), 0);
  // Read back by another transmitter path (a future) and by completions.
  std::vector<std::uint64_t> back(values.size(), 0);
  get(back.data(), remote).get();
  EXPECT_EQ(back, values);
  std::vector<std::uint64_t> again(values.size(), 0);
  Synchronizer read;
  for (int i = 0; i < 300; ++i) get(&again[i * 8], remote.slice(i * 64, 64), when_run(read));
  read.wait();
  EXPECT_EQ(again, values);
  try {
    put(values.data(), remote.slice(0, 8), Completion{});
    ADD_FAILURE() << "a put with an empty completion was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::invalid_argument);
    EXPECT_NE(std::string(e.what()).find("post_put"), std::string::npos) << e.what();
  }
  free_remote(remote);
  job().barrier();
}

namespace {
// Every process adds to one counter, then all race one compare-and-swap:
// exactly one wins. `blocking`: the forms without futures.
void atomics_from_every_process(bool blocking) {
  RemoteLocator counter = shared_counter();
  auto add = [&](std::uint64_t v) { return blocking ? blocking_fetch_add(counter, v) : fetch_add(counter, v).get(); };
  constexpr int adds = 200;
  std::uint64_t previous = 0;
  for (int i = 0; i < adds; ++i) {
    const std::uint64_t old = add(1);
    if (i > 0) EXPECT_GT(old, previous) << "the word only grows";
    previous = old;
  }
  job().barrier();
  std::uint64_t total = 0;
  get(&total, counter).get();
  EXPECT_EQ(total, std::uint64_t{adds} * job().size());
  EXPECT_EQ(add(0), total) << "adding 0 reads the word";
  job().barrier();  // everyone has read before anyone swaps
  const std::uint64_t desired = 1000 + job().rank();
  const std::uint64_t old =
      blocking ? blocking_compare_swap(counter, total, desired) : compare_swap(counter, total, desired).get();
  std::uint32_t won = old == total ? 1 : 0;
  std::uint32_t winners = 0;
  for (std::uint32_t v : job().allgather(won)) winners += v;
  EXPECT_EQ(winners, 1u);
  job().barrier();
  if (job().rank() == 0) free_remote(counter);
  job().barrier();
}
}  // namespace

TEST(Rma, AtomicsFromEveryProcess) { atomics_from_every_process(false); }
TEST(Rma, BlockingAtomicsFromEveryProcess) { atomics_from_every_process(true); }

// The blocking operations move the network only: a call addressed to the
// waiting thread stays queued until the thread polls again (the DSM's fault
// handler relies on this).
TEST(Rma, BlockingOperationsRunNoCalls) {
  RemoteLocator counter = shared_counter();
  bool ran = false;
  call(this_thread(), [flag = &ran] { *flag = true; });
  ASSERT_FALSE(ran) << "sending ran the call";
  std::uint64_t v = 0;
  for (int i = 0; i < 100; ++i) {
    blocking_fetch_add(counter, 1);
    blocking_compare_swap(counter, 0, 0);
    blocking_get(&v, counter);
  }
  EXPECT_FALSE(ran) << "a blocking operation ran a call while it waited";
  for (auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
       !ran && std::chrono::steady_clock::now() < until;)
    progress();
  EXPECT_TRUE(ran) << "the call never ran";
  job().barrier();
  if (job().rank() == 0) free_remote(counter);
  job().barrier();
}

TEST(RmaErrors, BadLocatorsAreRejected) {
  RemoteLocator remote = allocate_remote(next_process(), 64);
  std::uint64_t word = 0;
  auto expect_code = [](auto&& f, Errc code) {
    try {
      f();
      ADD_FAILURE() << "no error";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), code) << e.what();
    }
  };
  RemoteLocator outside = remote;
  outside.offset = ~0ull - 4;  // past any region
  expect_code([&] { get(&word, outside).get(); }, Errc::invalid_argument);
  RemoteLocator no_region = remote;
  no_region.region = 4000;
  expect_code([&] { get(&word, no_region).get(); }, Errc::invalid_argument);
  RemoteLocator no_process = remote;
  no_process.process = job().size() + 3;
  expect_code([&] { get(&word, no_process).get(); }, Errc::no_such_destination);
  expect_code([&] { blocking_get(&word, outside); }, Errc::invalid_argument);
  expect_code([&] { blocking_get(&word, no_region); }, Errc::invalid_argument);
  expect_code([&] { blocking_get(&word, no_process); }, Errc::no_such_destination);
  expect_code([&] { fetch_add(remote.slice(1, 8), 1).get(); }, Errc::invalid_argument);  // misaligned
  expect_code([&] { blocking_fetch_add(remote.slice(1, 8), 1); }, Errc::invalid_argument);
  expect_code([&] { blocking_compare_swap(remote.slice(0, 4), 0, 1); }, Errc::invalid_argument);  // not 8 bytes
  RemoteLocator no_process_word = remote.slice(0, 8);
  no_process_word.process = job().size() + 3;
  expect_code([&] { blocking_fetch_add(no_process_word, 1); }, Errc::no_such_destination);
  expect_code([&] { allocate_remote(next_process(), std::size_t{1} << 40); }, Errc::out_of_memory);
  free_remote(remote);
  expect_code([&] { free_remote(remote); }, Errc::invalid_argument);  // double free
  job().barrier();
}

// A size near SIZE_MAX used to round up to a 0-byte chunk on the owner,
// whose zero-fill then overran it and killed the process: one message from
// any peer took a process down. Now the asker gets an error naming the size
// and the owner goes on serving.
TEST(RmaErrors, HugeRemoteAllocationsFailWithoutHurtingTheOwner) {
  if (job().rank() == 1) {
    for (std::size_t bytes : {SIZE_MAX - 10, std::size_t{1} << 62}) {
      try {
        allocate_remote(0, bytes);
        ADD_FAILURE() << "allocate_remote(0, " << bytes << ") succeeded";
      } catch (const Error& e) {
        EXPECT_EQ(e.code(), Errc::out_of_memory) << e.what();
        EXPECT_NE(std::string(e.what()).find(std::to_string(bytes)), std::string::npos) << e.what();
      }
    }
    // Process 0 is alive and still allocates.
    RemoteLocator remote = allocate_remote(0, 4096);
    std::vector<std::uint8_t> out(4096, 0x5a), in(4096, 0);
    put(out.data(), remote).get();
    get(in.data(), remote).get();
    EXPECT_EQ(in, out);
    free_remote(remote);
  }
  job().barrier();
}

TEST(Rma, AllocationNearANamedThread) {
  RemoteLocator remote = allocate_remote(next_process(), 256, ThreadId{next_process(), job().threads_per_process() - 1});
  std::uint64_t v = 42, back = 0;
  put(&v, remote.slice(0, 8)).get();
  get(&back, remote.slice(0, 8)).get();
  EXPECT_EQ(back, 42u);
  free_remote(remote);
  job().barrier();
}

// Short-lived threads share the service worker's transmitters: their
// one-sided operations (wait-free bookkeeping, UCX's own locking) must all land.
TEST(Rma, ShortLivedThreadsShareATransmitter) {
  RemoteLocator counter = shared_counter();
  constexpr int threads = 4, adds = 100;
  std::vector<std::thread> pool;
  for (int i = 0; i < threads; ++i)
    pool.emplace_back([&, i] {
      // Half of them wait without futures: a thread that does not own the
      // shared worker leaves its progress to the service thread either way.
      for (int k = 0; k < adds; ++k)
        if (i % 2 == 0)
          fetch_add(counter, 1).get();
        else
          blocking_fetch_add(counter, 1);
    });
  for (auto& t : pool) t.join();
  job().barrier();
  std::uint64_t total = 0;
  get(&total, counter).get();
  EXPECT_EQ(total, std::uint64_t{threads} * adds * job().size());
  job().barrier();
  if (job().rank() == 0) free_remote(counter);
  job().barrier();
}
