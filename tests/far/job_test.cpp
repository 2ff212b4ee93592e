// Far memory across processes: the servers (RDMX_FAR_SERVERS, default the
// last process) serve their regions, every other process computes: random
// operations on far objects checked against a shadow copy with a cache much
// smaller than its objects, over both paths.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <random>
#include <set>
#include <thread>

#include "../error_from.hpp"
#include "array_scans.hpp"
#include "hooked_device.hpp"
#include "reply_size.hpp"
#include "rdmx/fabric/quiet.hpp"
#include "rdmx/fabric/job.hpp"
#include "rdmx/far/array.hpp"
#include "rdmx/far/hash_table.hpp"
#include "rdmx/far/pointer.hpp"
#include "rdmx/far/vector.hpp"
#include "shadow.hpp"

using namespace rdmx;
using namespace rdmx::far;

namespace {

Config small(Path path) {
  Config c;
  c.cache_bytes = 64 * 1024;
  c.region_bytes = 8 << 20;
  c.path = path;
  return c;
}

bool serves(const Manager& manager) {
  const auto& s = manager.config().servers;
  const bool listed = std::find(s.begin(), s.end(), Job::current().rank()) != s.end();
  EXPECT_EQ(manager.serving(), listed);
  return manager.serving();
}

void random_operations(Path path) {
  Job& job = Job::current();
  Manager manager(job, small(path));
  EXPECT_EQ(manager.device().servers(), manager.config().servers.size());
  EXPECT_STREQ(manager.device().name(), to_string(path));
  if (serves(manager)) return;  // serve until every client is done (the destructor's barrier)
  const std::size_t checked = shadow::random_operations(manager, 120, 1200, 7 + job.rank());
  EXPECT_GT(checked, 1200u);
  const Stats s = manager.stats();
  EXPECT_LE(s.peak_resident_bytes, s.cache_bytes);
  EXPECT_GT(s.evictions, 100u);
  EXPECT_GT(s.write_backs, 0u);
  EXPECT_GT(s.misses, 100u);
  EXPECT_EQ(s.objects, 0u);
}

void threaded_operations(Path path) {
  Job& job = Job::current();
  Manager manager(job, small(path));
  if (serves(manager)) return;
  std::atomic<std::size_t> checked{0};
  job.run([&](ThreadId me) { checked += shadow::random_operations(manager, 60, 600, 1000 * job.rank() + me.thread); });
  EXPECT_GT(checked.load(), 600u * job.threads_per_process());
  EXPECT_LE(manager.stats().peak_resident_bytes, manager.stats().cache_bytes);
  EXPECT_GT(manager.stats().evictions, 0u);
}

// A far array 12 times the budget, written and summed in windows.
void array_scan(Path path) {
  Manager manager(Job::current(), small(path));
  if (serves(manager)) return;
  Array<std::uint64_t> a(100000);
  a.for_each_mut([](std::size_t i, std::uint64_t& x) { x = 3 * i + 1; });
  std::size_t wrong = 0;
  a.for_each([&](std::size_t i, const std::uint64_t& x) { wrong += x != 3 * i + 1 ? 1 : 0; });
  EXPECT_EQ(wrong, 0u);
  EXPECT_GT(manager.stats().write_backs, 100u);
}

// Element scans through at() (sequential, strided, backwards) of an array
// 8 times a 256 KiB cache, against a shadow: the prefetcher's chunks come
// over the network ahead of use; with it off, none does.
void prefetched_scans(Path path) {
  Config c = small(path);
  c.cache_bytes = 256 * 1024;  // a prefetch depth of 4 chunks (a sixteenth of it)
  c.prefetch_depth = 16;       // off by default
  Manager manager(Job::current(), c);
  if (serves(manager)) return;
  scans::Elements a(256 * 1024);  // 2 MiB
  std::vector<std::uint64_t> shadow;
  scans::fill(a, shadow);
  const std::size_t chunks = a.size() / scans::per_chunk;
  std::size_t visited = 0;
  visited += scans::strided_scan(a, shadow, 0, 1, 1);
  visited += scans::strided_scan(a, shadow, 2, 3, 2);
  visited += scans::strided_scan(a, shadow, chunks - 1, -2, 3);
  const Stats on = manager.stats();
  EXPECT_GE(on.prefetch_hits, visited * 3 / 4) << on.prefetch_hits << " hits over " << visited << " chunks";
  a.set_prefetch_depth(0);
  scans::strided_scan(a, shadow, chunks - 1, -1, 4);
  EXPECT_EQ(manager.stats().prefetched, on.prefetched);
  scans::check_all(a, shadow);
  EXPECT_LE(manager.stats().peak_resident_bytes, manager.stats().cache_bytes);
}

// Dereference futures across processes: 32 outstanding per scope, waited
// for together, reads and writes checked over rounds.
void dereference_futures(Path path) {
  Manager manager(Job::current(), small(path));
  if (serves(manager)) return;
  using Obj = shadow::Pattern<512>;
  std::vector<UniquePtr<Obj>> v;
  std::vector<std::uint64_t> seeds;
  for (std::uint64_t i = 0; i < 512; ++i) {  // 256 KiB against the 64 KiB cache
    seeds.push_back(i * 3);
    v.push_back(make_unique<Obj>(Obj::of(seeds.back())));
  }
  std::mt19937_64 rng(5);
  for (int round = 0; round < 40; ++round) {
    DerefScope scope;
    std::set<std::size_t> picked;
    while (picked.size() < 32) picked.insert(rng() % v.size());
    std::vector<std::size_t> which(picked.begin(), picked.end());
    std::vector<Future<Obj*>> futures;
    for (std::size_t i : which) futures.push_back(v[i].deref_mut_async(scope));
    auto all = when_all(std::move(futures)).get();
    for (std::size_t k = 0; k < which.size(); ++k) {
      Obj* o = all[k].get();
      EXPECT_TRUE(o->is(seeds[which[k]])) << which[k];
      *o = Obj::of(seeds[which[k]] += 1000);
    }
  }
  for (std::size_t i = 0; i < v.size(); ++i) EXPECT_TRUE(v[i].read().is(seeds[i])) << i;
  EXPECT_GT(manager.stats().misses, 500u);
}

// A far hash table 8 times the budget, filled, updated and looked up in
// batches (their misses in flight together) against the keys' formula.
void hash_table(Path path) {
  Manager manager(Job::current(), small(path));
  if (serves(manager)) return;
  struct Value {
    std::uint64_t a, b;
  };
  HashTable<std::uint64_t, Value> table;
  constexpr std::uint64_t n = 4000;  // 4000 x 64 B blocks = 256 KiB against a 64 KiB cache
  for (std::uint64_t k = 0; k < n; ++k) table.insert_or_assign(k * 7, Value{k, 0});
  for (std::uint64_t k = 0; k < n; k += 3) table.update(k * 7, [](Value& v) { v.b = 1; });
  std::vector<std::uint64_t> keys;
  for (std::uint64_t k = 0; k < n + 100; ++k) keys.push_back(k * 7);
  std::vector<std::optional<Value>> out(keys.size());
  table.find_all(keys, out);
  std::size_t wrong = 0;
  for (std::uint64_t k = 0; k < keys.size(); ++k)
    wrong += k < n ? (!out[k] || out[k]->a != k || out[k]->b != (k % 3 == 0 ? 1u : 0u)) : out[k].has_value();
  EXPECT_EQ(wrong, 0u);
  EXPECT_GT(manager.stats().misses, 1000u);
}

// Compute offload: a sum and an in-place update run on the servers, over an
// array 12 times the budget, and agree with the same loops run here.
struct AddOp {
  std::uint64_t add;
  void apply(std::uint64_t* items, std::size_t n) const {
    for (std::size_t i = 0; i < n; ++i) items[i] += add;
  }
};
void offload(Path path) {
  Manager manager(Job::current(), small(path));
  if (serves(manager)) return;
  constexpr std::uint64_t n = 100000;
  Array<std::uint64_t> a(n);
  a.for_each_mut([](std::size_t i, std::uint64_t& x) { x = i; });
  EXPECT_EQ(a.reduce_remote(Sum<std::uint64_t>{}), n * (n - 1) / 2);
  EXPECT_EQ(a.update_remote(AddOp{5}), n);
  std::size_t wrong = 0;
  a.for_each([&](std::size_t i, const std::uint64_t& x) { wrong += x != i + 5; });
  EXPECT_EQ(wrong, 0u);
  EXPECT_EQ(a.reduce_remote(Sum<std::uint64_t>{}), n * (n - 1) / 2 + 5 * n);
}

// A server's reply of another size than expected (an empty one included)
// is refused, as the in-process device refuses it (FarUnit's twin).
void offload_reply_size(Path path) {
  Manager manager(Job::current(), small(path));
  if (serves(manager)) return;
  far_test::expect_reply_sizes_checked(manager.device());
}

// far::Vector across processes: every offloaded operation equals the same
// one run here, on random data several times the budget (160 KiB of rows and
// two 80 KiB index vectors against a 64 KiB cache: enough to evict, small
// enough for the ThreadSanitizer stage), with vectors on each server and an
// index vector on another server (the fall-back).
struct Row {
  std::uint32_t key;
  float value;
  std::uint64_t id;
};
struct Small {
  float below;
  bool operator()(const Row& r) const { return r.value < below; }
};
void vector_operations(Path path) {
  Manager manager(Job::current(), small(path));
  if (serves(manager)) return;
  std::mt19937_64 rng(11 + Job::current().rank());
  std::vector<Row> rows(10000);
  for (std::uint64_t i = 0; i < rows.size(); ++i) rows[i] = {static_cast<std::uint32_t>(rng() % 16), static_cast<float>(rng() % 1000), i};
  std::vector<std::uint64_t> order(rows.size() + 777);
  for (auto& i : order) i = rng() % rows.size();
  std::vector<Row> expected;
  for (auto i : order) expected.push_back(rows[i]);
  const auto same = [](const std::vector<Row>& a, const std::vector<Row>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(Row)) == 0;
  };
  for (std::size_t server = 0; server < manager.device().servers(); ++server) {
    Vector<Row> v(server);
    v.append(rows);
    Vector<std::uint64_t> index(server), elsewhere((server + 1) % manager.device().servers());
    index.append(order);
    elsewhere.append(order);
    Vector<std::uint32_t> keys(server);
    Vector<float> values(server);
    for (const Row& r : rows) keys.push_back(r.key), values.push_back(r.value);
    for (Run run : {Run::offloaded, Run::here}) {
      EXPECT_TRUE(same(v.copy(run).to_vector(), rows));
      EXPECT_TRUE(same(v.gather(index, run).to_vector(), expected));
      EXPECT_TRUE(same(v.gather(elsewhere, run).to_vector(), expected));
      const auto kept = v.filter(Small{100}, run).to_vector();
      const auto where = v.where(Small{100}, run).to_vector();
      ASSERT_EQ(kept.size(), where.size());
      std::size_t wrong = 0;
      for (std::size_t k = 0; k < kept.size(); ++k) wrong += kept[k].id != where[k] || !(kept[k].value < 100);
      EXPECT_EQ(wrong, 0u);
      EXPECT_EQ(kept.size(), static_cast<std::size_t>(std::count_if(rows.begin(), rows.end(), Small{100})));
    }
    EXPECT_EQ(values.reduce(Sum<float>{}), values.reduce(Sum<float>{}, Run::here));
    EXPECT_EQ((keys.group_by(values, GroupBy<std::uint32_t, float, 16>{})),
              (keys.group_by(values, GroupBy<std::uint32_t, float, 16>{}, Run::here)));
    Vector<std::uint64_t> bad(server);
    bad.append(std::vector<std::uint64_t>{0, rows.size()});
    const Error e = rdmx::testing::error_from([&] { keys.gather(bad); });  // answered by the server
    EXPECT_EQ(e.code(), Errc::invalid_argument) << e.what();
    EXPECT_NE(std::string(e.what()).find("out of range"), std::string::npos) << e.what();
  }
}

}  // namespace

// rdmx::quiet() waits for the far write-backs on the network when it is
// called (another thread's, made slow) and reports one that failed. The
// Manager is an in-process one made inside the job: it registers with the
// job's far layer, which quiet() reaches, and the evicting thread, which
// acts as no worker of the job, finds it there.
TEST(FarJob, QuietWaitsForWriteBacks) {
  std::atomic<bool> writing{false}, landed{false}, failing{false};
  Config c;
  c.cache_bytes = 64 * 1024;
  c.region_bytes = 8 << 20;
  c.evacuator = Evacuator::off;
  Manager manager(std::make_unique<rdmx::far::testing::HookedDevice>([&] {
                    writing = true;
                    std::this_thread::sleep_for(std::chrono::milliseconds(300));
                    if (failing) throw Error(Errc::peer_failed, "injected: the write-back's server is lost");
                    landed = true;
                  }),
                  c);
  // Inside run(): the process's other workers serve the markers quiet()
  // sends them meanwhile.
  Job::current().run([&](ThreadId me) {
    if (me.thread != 0) return;
    auto p = make_unique<std::uint64_t>(7);  // dirty from its allocation
    std::thread evicting([&] { EXPECT_TRUE(p.evict()); });
    while (!writing) std::this_thread::yield();
    rdmx::quiet();
    EXPECT_TRUE(landed.load());
    evicting.join();

    p.write(8);  // local and dirty again
    writing = false;
    landed = false;
    failing = true;
    std::thread failed([&] { EXPECT_EQ(rdmx::testing::error_from([&] { p.evict(); }).code(), Errc::peer_failed); });
    while (!writing) std::this_thread::yield();
    const Error e = rdmx::testing::error_from([] { rdmx::quiet(); });
    EXPECT_EQ(e.code(), Errc::peer_failed) << e.what();
    failed.join();
    EXPECT_FALSE(landed.load());
    failing = false;
    EXPECT_EQ(p.read(), 8u);  // local, dirty and intact
  });
}

TEST(FarJob, VectorOneSided) { vector_operations(Path::one_sided); }
TEST(FarJob, VectorTwoSided) { vector_operations(Path::two_sided); }
TEST(FarJob, ArrayOneSided) { array_scan(Path::one_sided); }
TEST(FarJob, ArrayTwoSided) { array_scan(Path::two_sided); }
TEST(FarJob, PrefetchedScansOneSided) { prefetched_scans(Path::one_sided); }
TEST(FarJob, PrefetchedScansTwoSided) { prefetched_scans(Path::two_sided); }
TEST(FarJob, DereferenceFuturesOneSided) { dereference_futures(Path::one_sided); }
TEST(FarJob, DereferenceFuturesTwoSided) { dereference_futures(Path::two_sided); }
TEST(FarJob, RandomOperationsOneSided) { random_operations(Path::one_sided); }
TEST(FarJob, RandomOperationsTwoSided) { random_operations(Path::two_sided); }
TEST(FarJob, HashTableOneSided) { hash_table(Path::one_sided); }
TEST(FarJob, HashTableTwoSided) { hash_table(Path::two_sided); }
TEST(FarJob, OffloadOneSided) { offload(Path::one_sided); }
TEST(FarJob, OffloadTwoSided) { offload(Path::two_sided); }
TEST(FarJob, OffloadReplySizeOneSided) { offload_reply_size(Path::one_sided); }
TEST(FarJob, OffloadReplySizeTwoSided) { offload_reply_size(Path::two_sided); }
TEST(FarJob, ThreadsOneSided) { threaded_operations(Path::one_sided); }
TEST(FarJob, ThreadsTwoSided) { threaded_operations(Path::two_sided); }

// Objects of one process spread over every server.
TEST(FarJob, ObjectsSpreadOverServers) {
  Manager manager(Job::current(), small(Path::one_sided));
  if (serves(manager)) return;
  std::vector<UniquePtr<std::uint64_t>> v;
  std::set<std::uint32_t> servers;
  for (std::uint64_t i = 0; i < 8; ++i) {
    v.push_back(make_unique<std::uint64_t>(i));
    ASSERT_TRUE(v.back().evict());
    servers.insert(state::server_of(v.back().state_word()));
  }
  EXPECT_EQ(servers.size(), manager.device().servers());
  DerefScope scope;
  for (std::uint64_t i = 0; i < 8; ++i) EXPECT_EQ(*v[i].deref(scope), i);
}

// A configuration naming a process outside the job fails on every process
// (collectively, so nobody waits for the others), and a Manager works after.
TEST(FarJob, BadServersFailEverywhere) {
  Config c = small(Path::one_sided);
  c.servers = {Job::current().size()};
  const Error e = rdmx::testing::error_from([&] { Manager m(Job::current(), c); });
  EXPECT_EQ(e.code(), Errc::invalid_argument) << e.what();
  EXPECT_NE(std::string(e.what()).find("not in the job"), std::string::npos) << e.what();
  Manager again(Job::current(), small(Path::one_sided));
}

// Processes that disagree on who serves, or a region no arena segment can
// hold: every process fails with a message naming the problem.
TEST(FarJob, InconsistentOrImpossibleConfigurationFailsEverywhere) {
  Job& job = Job::current();
  Config c = small(Path::one_sided);
  c.servers = {job.rank()};  // each process names itself
  const Error mismatch = rdmx::testing::error_from([&] { Manager m(job, c); });
  EXPECT_EQ(mismatch.code(), Errc::invalid_argument);
  EXPECT_NE(std::string(mismatch.what()).find("RDMX_FAR_SERVERS"), std::string::npos) << mismatch.what();
  c = small(Path::one_sided);
  c.region_bytes = std::size_t{1} << 40;  // beyond any arena segment
  const Error huge = rdmx::testing::error_from([&] { Manager m(job, c); });
  EXPECT_EQ(huge.code(), Errc::invalid_argument);
  EXPECT_NE(std::string(huge.what()).find("failed on process"), std::string::npos) << huge.what();
  Manager fine(job, small(Path::one_sided));
}
