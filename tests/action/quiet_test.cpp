// rdmx::quiet() covers actions: after it and a barrier, every action posted
// by every worker thread has run, eager ones and pulled ones (64 KiB
// arguments, the zero-copy threshold) alike, across real processes and
// threads. Actions travel unordered, so no marker behind them could tell;
// before quiet() counted them, pulled ones were still landing.
#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <cstring>
#include <random>
#include <vector>

#include "rdmx/action/action.hpp"
#include "rdmx/fabric/collective.hpp"
#include "rdmx/fabric/job.hpp"
#include "rdmx/fabric/quiet.hpp"
#include "rdmx/serial/options.hpp"
#include "../phase_counts.hpp"

using namespace rdmx;
namespace serial = rdmx::serial;
using rdmx::testing::Counts;
using rdmx::testing::max_workers;

namespace {
Job& job() { return Job::current(); }
constexpr std::size_t large_size = serial::default_zero_copy_threshold;  // the smallest size that is pulled

// ran[t] on this process: actions its worker thread t has run in this phase.
std::array<std::atomic<std::uint64_t>, max_workers> ran;
std::atomic<std::uint64_t> corrupt{0};  // large arguments that arrived with other bytes
void arrive() { ran[this_thread().thread].fetch_add(1, std::memory_order_relaxed); }

void small(std::uint64_t) { arrive(); }
std::uint64_t small_async(std::uint64_t v) {
  arrive();
  return v;
}
void large(serial::SerializeBuffer<char> b) {
  if (b.size() != large_size || b[0] != 'q' || b[large_size - 1] != 'z') corrupt.fetch_add(1);
  arrive();
}
}  // namespace

TEST(Quiet, EveryActionHasRunAfterQuietAndBarrier) {
  const std::uint32_t threads = job().threads_per_process(), workers = job().size() * threads;
  ASSERT_LE(workers, max_workers);
  std::atomic<std::uint64_t> wrong{0}, pulled{0};
  job().run([&](ThreadId me) {
    std::mt19937 rng(me.process * 131 + me.thread);
    // Shared by every post (its copies are handles): registered once, pulled each time.
    serial::SerializeBuffer<char> argument(large_size);
    std::memset(argument.data(), 'q', large_size - 1);
    argument[large_size - 1] = 'z';
    const std::uint64_t pulled_before = parcel::stats().rendezvous;
    for (int phase = 0; phase < 5; ++phase) {
      if (me.thread == 0)
        for (auto& r : ran) r.store(0);
      rdmx::barrier();  // counts are reset before anyone posts
      Counts made{};
      std::vector<Future<std::uint64_t>> replies;  // not waited for before quiet()
      for (std::uint64_t i = 0; i < 3000; ++i) {
        const std::uint32_t w = rng() % workers;
        const ThreadId dest{w / threads, w % threads};
        switch (rng() % 16) {
          case 0: case 1: post(action<&large>, dest, argument); break;
          case 2: replies.push_back(async(action<&small_async>, dest, i)); break;
          default: post(action<&small>, dest, i); break;
        }
        ++made[w];
      }
      rdmx::quiet();
      rdmx::barrier();
      if (!rdmx::testing::ran_what_was_sent(made, ran[me.thread].load(), me, threads, phase)) wrong.fetch_add(1);
      for (auto& f : replies) f.get();
      rdmx::barrier();  // nobody resets the counts while another still reads them
    }
    pulled.fetch_add(parcel::stats().rendezvous - pulled_before);
  });
  EXPECT_EQ(wrong.load(), 0u);
  EXPECT_EQ(corrupt.load(), 0u);
  EXPECT_GT(pulled.load(), 0u) << "no argument was large enough to be pulled";
}
