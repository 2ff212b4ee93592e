// A far-memory server dies (SIGKILL) while a compute process holds objects
// on it. With 2 processes (replication 1) the compute process must get
// Errc::peer_failed within seconds, never a hang or wrong data; with 3
// (servers 1 and 2, replication 2) the survivor keeps every object, which
// must read back exactly as written. With --vectors the objects are
// far::Vectors, some built by the servers (copy, gather, filter), and what
// fails or goes on are offloaded operations. With --background the server
// dies while the evacuator writes objects back behind a workload with think
// time: with replication 1 the workload gets peer_failed and the evacuator
// neither spins nor keeps the Manager from ending; with replication 2 its
// write-backs go to the survivor. With --futures the objects are read
// through dereference futures, 16 outstanding at a time: the failure comes
// from their get(). Own main: the job cannot end with a
// collective.
#include <signal.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <functional>
#include <numeric>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "rdmx/fabric/call.hpp"
#include "rdmx/fabric/job.hpp"
#include "rdmx/far/pointer.hpp"
#include "rdmx/far/vector.hpp"
#include "shadow.hpp"

using namespace rdmx;
using namespace rdmx::far;
using Clock = std::chrono::steady_clock;

namespace {
std::atomic<bool> released{false};
using Object = shadow::Pattern<256>;

int fail(const std::string& what) {
  std::fprintf(stderr, "far server_loss_test: FAILED: %s\n", what.c_str());
  return 1;
}

// Rank 0 with the victim dead: every object must still read back (replication 2).
int check_survivor(std::vector<UniquePtr<Object>>& objects, std::vector<std::uint64_t>& shadow_seeds) {
  for (int round = 0; round < 3; ++round) {
    for (std::size_t i = 0; i < objects.size(); ++i) {
      DerefScope scope;
      if (!objects[i].deref(scope)->is(shadow_seeds[i])) return fail("object " + std::to_string(i) + " changed");
      shadow_seeds[i] += 1000;
      *objects[i].deref_mut(scope) = Object::of(shadow_seeds[i]);
    }
    for (auto& p : objects)
      if (!p.evict()) return fail("an unpinned object could not be evicted");
  }
  std::printf("far: survived the loss of server 1, %zu objects checked\n", objects.size());
  return 0;
}

// Rank 0 with its only copy gone: a clear error in bounded time.
int check_loss(std::vector<UniquePtr<Object>>& objects, std::vector<std::uint64_t>& shadow_seeds) {
  const auto start = Clock::now();
  while (Clock::now() - start < std::chrono::seconds(60)) {
    for (std::size_t i = 0; i < objects.size(); ++i) {
      try {
        {
          DerefScope scope;
          // Until the loss is known, reads may still see the dead server's memory (shared memory outlives it):
          // what they return must be right.
          if (!objects[i].deref(scope)->is(shadow_seeds[i])) return fail("object " + std::to_string(i) + " read wrong data");
        }
        if (!objects[i].evict()) return fail("an unpinned object could not be evicted");
      } catch (const Error& e) {
        if (e.code() != Errc::peer_failed) return fail(std::string("wrong error: ") + e.what());
        if (std::string(e.what()).find("(process 1) is lost") == std::string::npos)
          return fail(std::string("the error does not name the lost server: ") + e.what());
        const double ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
        std::printf("far: server loss reported after %.0f ms: %s\n", ms, e.what());
        return 0;
      }
    }
  }
  return fail("no error within 60 s of the server's death");
}
// Far objects: 200 of 256 bytes, checked after `kill`.
int objects_scenario(bool replicated, const std::function<void()>& kill) {
  std::vector<UniquePtr<Object>> objects;
  std::vector<std::uint64_t> seeds;
  for (std::uint64_t i = 0; i < 200; ++i) {
    seeds.push_back(i * 7 + 1);
    objects.push_back(make_unique<Object>(Object::of(seeds.back())));
    objects.back().evict();
  }
  kill();
  return replicated ? check_survivor(objects, seeds) : check_loss(objects, seeds);
}

// Random reads and writes of `objects` with think time, checked against
// `seeds`, for `ops` operations: the evacuator keeps up behind them.
void workload(std::vector<UniquePtr<Object>>& objects, std::vector<std::uint64_t>& seeds, int ops, std::mt19937_64& rng) {
  for (int op = 0; op < ops; ++op) {
    const std::size_t i = rng() % objects.size();
    {
      DerefScope scope;
      if (!objects[i].deref(scope)->is(seeds[i])) throw Error(Errc::protocol, "object " + std::to_string(i) + " read wrong data");
      if (rng() % 2 == 0) *objects[i].deref_mut(scope) = Object::of(seeds[i] += 1000);
    }
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

// 600 objects of 256 bytes against a 64 KiB cache, killed mid-workload.
int background_scenario(Manager& far, bool replicated, const std::function<void()>& kill) {
  std::vector<UniquePtr<Object>> objects;
  std::vector<std::uint64_t> seeds;
  for (std::uint64_t i = 0; i < 600; ++i) {
    seeds.push_back(i * 11 + 3);
    objects.push_back(make_unique<Object>(Object::of(seeds.back())));
  }
  std::mt19937_64 rng(17);
  try {
    workload(objects, seeds, 2000, rng);
  } catch (const Error& e) {
    return fail(std::string("before the loss: ") + e.what());
  }
  if (far.stats().background_evictions == 0) return fail("the evacuator evicted nothing before the loss");
  kill();
  const Stats at_loss = far.stats();
  if (replicated) {
    try {
      workload(objects, seeds, 3000, rng);
      for (std::size_t i = 0; i < objects.size(); ++i)
        if (!objects[i].read().is(seeds[i])) return fail("object " + std::to_string(i) + " changed");
    } catch (const Error& e) {
      return fail(std::string("after the loss: ") + e.what());
    }
    const Stats s = far.stats();
    if (s.background_evictions == at_loss.background_evictions) return fail("the evacuator evicted nothing after the loss");
    if (s.background_failures != 0) return fail("the survivor did not take the evacuator's write-backs");
    std::printf("far: survived the loss of server 1 during background evacuation, %llu background evictions after it\n",
                static_cast<unsigned long long>(s.background_evictions - at_loss.background_evictions));
    return 0;
  }
  const auto start = Clock::now();
  std::string reported;
  while (reported.empty() && Clock::now() - start < std::chrono::seconds(60)) {
    try {
      workload(objects, seeds, 100, rng);
    } catch (const Error& e) {
      if (e.code() != Errc::peer_failed) return fail(std::string("wrong error: ") + e.what());
      if (std::string(e.what()).find("(process 1) is lost") == std::string::npos)
        return fail(std::string("the error does not name the lost server: ") + e.what());
      reported = e.what();
    }
  }
  if (reported.empty()) return fail("no error within 60 s of the server's death");
  const double ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
  // The evacuator, which may have met the loss too, backs off: a handful of
  // tries in half a second, not a spin.
  const std::uint64_t failures = far.stats().background_failures;
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  const std::uint64_t more = far.stats().background_failures - failures;
  if (more > 12) return fail("the evacuator retried " + std::to_string(more) + " failed write-backs in 500 ms");
  std::printf("far: server loss reported after %.0f ms (evacuator: %llu failed write-backs): %s\n", ms,
              static_cast<unsigned long long>(far.stats().background_failures), reported.c_str());
  return 0;
}

struct Even {
  bool operator()(const std::uint64_t& x) const { return x % 2 == 0; }
};
struct VectorsExpected {
  std::vector<std::uint64_t> values, order, gathered, even;
  std::uint64_t sum = 0;
};
// Every result the vectors must give, offloaded and here.
int check_vectors(const Vector<std::uint64_t>& v, const Vector<std::uint64_t>& index, const Vector<std::uint64_t>& gathered,
                  const VectorsExpected& e) {
  for (Run run : {Run::offloaded, Run::here}) {
    if (v.reduce(Sum<std::uint64_t>{}, run) != e.sum) return fail("the sum changed");
    if (v.gather(index, run).to_vector() != e.gathered) return fail("a gather is wrong");
    if (v.filter(Even{}, run).to_vector() != e.even) return fail("a filter is wrong");
  }
  if (gathered.to_vector() != e.gathered) return fail("the vector the servers gathered before the loss changed");
  if (v.copy().to_vector() != e.values) return fail("a copy is wrong");
  return 0;
}

// Far vectors, one of them gathered by the servers, checked after `kill`:
// with replication 1 the next offloaded operation fails with peer_failed.
int vectors_scenario(bool replicated, const std::function<void()>& kill) {
  VectorsExpected e;
  std::mt19937_64 rng(21);
  e.values.resize(20000);  // 40 chunks against a 16-chunk cache
  for (auto& x : e.values) x = rng() % 1000000;
  e.order.resize(3000);  // run here, each index may be a miss: keep it short over TCP
  for (auto& i : e.order) i = rng() % e.values.size();
  for (auto i : e.order) e.gathered.push_back(e.values[i]);
  for (auto x : e.values)
    if (x % 2 == 0) e.even.push_back(x);
  e.sum = std::accumulate(e.values.begin(), e.values.end(), std::uint64_t{0});
  Vector<std::uint64_t> v(0), index(0);
  v.append(e.values);
  index.append(e.order);
  const Vector<std::uint64_t> gathered = v.gather(index);
  if (const int rc = check_vectors(v, index, gathered, e)) return rc;
  kill();
  if (replicated) {
    if (const int rc = check_vectors(v, index, gathered, e)) return rc;
    std::printf("far: survived the loss of server 1, vectors checked\n");
    return 0;
  }
  const auto start = Clock::now();
  while (Clock::now() - start < std::chrono::seconds(60)) {
    try {
      if (v.reduce(Sum<std::uint64_t>{}) != e.sum) return fail("an offloaded sum read wrong data");
    } catch (const Error& err) {
      if (err.code() != Errc::peer_failed) return fail(std::string("wrong error: ") + err.what());
      if (std::string(err.what()).find("(process 1) is lost") == std::string::npos)
        return fail(std::string("the error does not name the lost server: ") + err.what());
      std::printf("far: server loss reported after %.0f ms: %s\n", std::chrono::duration<double, std::milli>(Clock::now() - start).count(),
                  err.what());
      return 0;
    }
  }
  return fail("no error within 60 s of the server's death");
}
// Dereference futures, 16 in flight per scope, after `kill`: with
// replication 2 every object reads back; with 1, get() reports the loss.
int futures_scenario(bool replicated, const std::function<void()>& kill) {
  std::vector<UniquePtr<Object>> objects;
  for (std::uint64_t i = 0; i < 200; ++i) {
    objects.push_back(make_unique<Object>(Object::of(i * 5 + 2)));
    objects.back().evict();
  }
  kill();
  const auto start = Clock::now();
  while (Clock::now() - start < std::chrono::seconds(60)) {
    for (std::size_t first = 0; first < objects.size(); first += 16) {
      try {
        DerefScope scope;
        std::vector<Future<const Object*>> reads;
        for (std::size_t i = first; i < first + 16 && i < objects.size(); ++i) reads.push_back(objects[i].deref_async(scope));
        for (std::size_t k = 0; k < reads.size(); ++k)
          if (!reads[k].get()->is((first + k) * 5 + 2)) return fail("object " + std::to_string(first + k) + " read wrong data");
      } catch (const Error& e) {
        if (replicated) return fail(std::string("after the loss: ") + e.what());
        if (e.code() != Errc::peer_failed) return fail(std::string("wrong error: ") + e.what());
        if (std::string(e.what()).find("(process 1) is lost") == std::string::npos)
          return fail(std::string("the error does not name the lost server: ") + e.what());
        std::printf("far: server loss reported after %.0f ms by a future: %s\n",
                    std::chrono::duration<double, std::milli>(Clock::now() - start).count(), e.what());
        return 0;
      }
      for (std::size_t i = first; i < first + 16 && i < objects.size(); ++i)
        if (!objects[i].evict()) return fail("an unpinned object could not be evicted");
    }
    if (replicated) {
      std::printf("far: survived the loss of server 1, %zu objects read through futures\n", objects.size());
      return 0;
    }
  }
  return fail("no error within 60 s of the server's death");
}
}  // namespace

int main(int argc, char** argv) {
  Job job(argc, argv);
  if (job.size() < 2 || job.size() > 3) return fail("runs with 2 or 3 processes");
  const std::string scenario = argc > 1 ? argv[argc - 1] : "";
  const bool vectors = scenario == "--vectors";
  Config config;
  config.cache_bytes = 64 * 1024;
  config.region_bytes = 16 << 20;
  config.servers = job.size() == 3 ? std::vector<std::uint32_t>{1, 2} : std::vector<std::uint32_t>{1};
  config.replication = config.servers.size();
  // Over every transport and path, not only where `automatic` starts it.
  if (scenario == "--background") config.evacuator = Evacuator::on;
  Manager manager(job, config);
  if (job.rank() != 0) {
    // Serve until rank 0 kills this process (rank 1) or releases it (rank 2).
    const auto deadline = Clock::now() + std::chrono::seconds(150);
    while (!released.load() && Clock::now() < deadline) progress();
    return released.load() ? 0 : fail("server was never released");
  }
  const auto kill = [] {
    call(ThreadId{1, 0}, [] { raise(SIGKILL); });
    // Let the victim die idle: one killed while replying over shared memory
    // can block this process's UCX receive FIFO for every sender
    // (docs/fabric-leaving.md, "A UCX 1.13 limitation over shared memory").
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
  };
  const bool replicated = config.replication == 2;
  int rc = vectors                        ? vectors_scenario(replicated, kill)
           : scenario == "--background" ? background_scenario(manager, replicated, kill)
           : scenario == "--futures"    ? futures_scenario(replicated, kill)
                                        : objects_scenario(replicated, kill);
  // The job told the far layer of the loss: the Manager counts the server
  // lost, whether or not an operation has met it.
  const auto told = Clock::now() + std::chrono::seconds(10);
  while (rc == 0 && manager.stats().lost_servers != 1 && Clock::now() < told) {
    progress();
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (rc == 0 && manager.stats().lost_servers != 1)
    rc = fail("the far layer counts " + std::to_string(manager.stats().lost_servers) + " lost servers, not 1");
  if (job.size() == 3) call(ThreadId{2, 0}, [] { released.store(true); });
  return rc;
}
