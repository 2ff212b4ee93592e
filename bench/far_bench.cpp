// rdmx-bench-far: the cold path of far memory (AIFM's Fig. 12b, and the
// seed's Fig. 3): the latency of dereferencing an object that is not local,
// at 64 B and 4 KiB, with a cache much smaller than the object set. Process
// 0 computes, the last process serves. Variants, measured in one run:
//   one-sided  deref through RDMA get/put into the server's region
//   two-sided  deref through requests the server's service thread answers
//   raw_get    a bare rdmx::get of the same bytes (raw_get_put for writes:
//              get, put and flush, what a miss with a dirty victim costs at least)
//   raw_blocking_get  the same with rdmx::blocking_get (no future: what a
//              one-sided miss uses), single reads only
// Cases: cold_read (deref; victims are clean) and cold_write (deref_mut;
// every victim is dirty and written back). Each operation is timed alone;
// p50 and p90 in ns. cold_read also runs with 16 misses in flight
// ("outstanding":16: far::deref_all, and 16 gets before any is waited for),
// where a sample is a batch's time per object.
// cold_read one-sided also prints overhead_ns_p50 (its median minus
// raw_blocking_get's: the runtime's own share of a miss), and raw_get's read lines
// poll_share: the share of a bare get's time spent waiting for its
// completion after it was issued (the seed's Fig. 4).
// Every cold-path line also carries the server's CPU time per million
// operations (metric server_cpu_s_per_mop): the CPU time of the server's
// service thread, which answers every request, over the variant's run.
// Case inflight (latency hiding): lookups of random keys in a far::HashTable
// 16 times the cache (nearly every lookup misses), 1, 8 and 64 at a time
// (HashTable::find_all): ops_per_s is lookups per second.
// Case granularity (objects against pages): random 64 B reads over a data
// set 4 times the cache (25 % local), kept as 64-byte far objects
// (`object`) or as 4 KiB far objects of 64 records each, a miss moving the
// whole page (`page`); ops_per_s and ns per read. Reads are uniform, or
// zipf-0.99 over records scattered at random (`distribution`): with skew,
// objects keep the hot records local where pages keep their neighbours.
// Case snappy (the seed's end-to-end program): generated text 4 times the
// cache, in a far array of 32 KiB blocks (two 16 KiB far objects each),
// compressed block by block with Debian's libsnappy, four blocks in flight
// while one compresses (`far`), against the same text in local memory
// (`local`); seconds per pass, p50.
// Case web (AIFM's web front end): zipf-0.85 keys looked up in a far
// hash table, each naming an 8 KiB far-array element that is read
// non-temporally, hashed and compressed; the data set 4 times the cache,
// against the same program over std::unordered_map and std::vector
// (`local`); ops_per_s is requests per second.
// Case aggregate (compute offload): the sum of a far::Array of 1 Mi
// uint64 (8 MiB, 64 times the cache) by a scan here (`far`), by
// Array::reduce_remote on the server (`far_offload`), and over a
// std::vector (`local`); seconds per sum, p50 over repetitions.
// Case stride (far::Array's prefetcher): element reads through at(), each
// in a scope of its own, four per chunk, visiting every third chunk (three
// passes, from chunks 0, 1 and 2) of an 8 MiB array with a 1 MiB cache;
// with the prefetcher (`prefetch`, 16 chunks ahead) and without
// (`no_prefetch`), passes alternating in one run. ns_p50 is ns per chunk;
// `prefetch_vs_off` is the ratio of the two p50s (speedup_p50) and the
// share of chunks that came ahead (prefetch_hit_share).
//   --quick  --seconds=S (per variant, default 1)  --ops=N (most per variant, default 20000)
//   --cases=LIST (of cold, inflight, granularity, aggregate, snappy, web, stride; default all)
//   --paths=LIST (of one-sided, two-sided; default both)
#include <algorithm>
#include <cmath>
#include <deque>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <optional>
#include <random>
#include <unordered_map>
#include <span>
#include <string>
#include <vector>

#include "json.hpp"
#ifdef RDMX_HAVE_SNAPPY
#include <snappy-sinksource.h>
#include <snappy.h>
#endif
#include "rdmx/core/env.hpp"
#include "rdmx/core/error.hpp"
#include "rdmx/fabric/call.hpp"
#include "rdmx/fabric/job.hpp"
#include "rdmx/fabric/rma.hpp"
#include "rdmx/far/array.hpp"
#include "rdmx/far/hash_table.hpp"
#include "rdmx/far/pointer.hpp"
#include "rdmx/memory/arena.hpp"

namespace {

using Clock = std::chrono::steady_clock;
using rdmx::bench::JsonLine;
namespace far = rdmx::far;

struct Options {
  double seconds = 1.0;
  std::size_t ops = 20000;
  std::vector<std::string> cases;  // empty: all
  std::vector<std::string> paths;  // empty: both
  bool runs(const std::string& c) const { return cases.empty() || std::find(cases.begin(), cases.end(), c) != cases.end(); }
  bool runs(far::Path p) const {
    return paths.empty() || std::find(paths.begin(), paths.end(), std::string(far::to_string(p))) != paths.end();
  }
};

// "a,b,c" as its items, each one of `known`.
std::vector<std::string> parse_list(const std::string& option, const std::string& text, std::initializer_list<const char*> known) {
  std::vector<std::string> items;
  std::size_t start = 0;
  for (;;) {
    const std::size_t comma = text.find(',', start);
    std::string item = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (std::none_of(known.begin(), known.end(), [&](const char* k) { return item == k; })) {
      std::string names;
      for (const char* k : known) names += (names.empty() ? "" : ", ") + std::string(k);
      throw rdmx::Error(rdmx::Errc::invalid_argument, option + ": '" + item + "' is not one of " + names);
    }
    items.push_back(std::move(item));
    if (comma == std::string::npos) return items;
    start = comma + 1;
  }
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--quick") {
      o.seconds = 0.1;
      o.ops = 1000;
    } else if (a.rfind("--seconds=", 0) == 0) {
      o.seconds = std::stod(a.substr(10));
      if (!(o.seconds > 0 && o.seconds < 3600)) throw rdmx::Error(rdmx::Errc::invalid_argument, "--seconds wants 0 < S < 3600");
    } else if (a.rfind("--ops=", 0) == 0) {
      o.ops = rdmx::env::parse_count(a.substr(6), "--ops");
    } else if (a.rfind("--cases=", 0) == 0) {
      o.cases = parse_list("--cases", a.substr(8), {"cold", "inflight", "granularity", "aggregate", "snappy", "web", "stride"});
    } else if (a.rfind("--paths=", 0) == 0) {
      o.paths = parse_list("--paths", a.substr(8), {"one-sided", "two-sided"});
    } else {
      throw rdmx::Error(rdmx::Errc::invalid_argument, "unknown argument '" + a +
                                                          "'\nusage: rdmx-bench-far [--seconds=S] [--ops=N] [--quick] [--cases=LIST] [--paths=LIST]");
    }
  }
  return o;
}

// Small enough that priming the set stays short over TCP, where a miss costs
// a round trip the server's worker must progress.
constexpr std::size_t cache_bytes = 128 << 10;
constexpr std::size_t region_bytes = 16 << 20;
constexpr std::size_t batch = 16;  // misses in flight in the batched variants

// The object set: 4 times the cache. Sweeps go on where the last one
// stopped, so CLOCK has always just evicted the object asked for next.
std::size_t object_count(std::size_t size) { return 4 * cache_bytes / size; }

struct Result {
  std::vector<double> ns;
  double seconds = 0;
  double local_fraction = 0;
  double server_cpu_seconds = -1;  // measured for the cold path only
  double background_share = -1;    // of the run's evictions, those the evacuator made; -1: not measured
  double poll_share = -1;          // of a bare get's time, the wait for its completion (the seed's Fig. 4); -1: not measured
};

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2), v.end());
  return v[v.size() / 2];
}

// Of the evictions between two snapshots, the share the background
// evacuator made rather than the thread that missed.
double background_share(const far::Stats& before, const far::Stats& after) {
  const double background = static_cast<double>(after.background_evictions - before.background_evictions);
  const double inline_ = static_cast<double>(after.inline_evictions - before.inline_evictions);
  return background + inline_ > 0 ? background / (background + inline_) : 0;
}
// `run` (which returns a Result), with its share of background evictions.
template <class Run>
Result with_eviction_share(far::Manager& manager, Run&& run) {
  const far::Stats before = manager.stats();
  Result r = run();
  r.background_share = background_share(before, manager.stats());
  return r;
}

// CPU seconds the service thread of `server` has used: the thread that
// answers two-sided requests (and that one-sided ones leave alone).
double server_cpu_seconds(std::uint32_t server) {
  double seconds = 0;
  rdmx::Synchronizer sync;
  rdmx::call_return(rdmx::ThreadId{server, rdmx::service_thread}, [] {
    timespec t{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
  }, rdmx::into(seconds, sync));
  sync.wait();
  return seconds;
}

void report(const JsonLine& common, const char* bench_case, const char* variant, std::size_t size, Result r,
            std::size_t outstanding = 1) {
  std::sort(r.ns.begin(), r.ns.end());
  const auto at = [&](double q) { return r.ns.empty() ? 0.0 : r.ns[static_cast<std::size_t>(q * (r.ns.size() - 1))]; };
  JsonLine line = common.with("case", bench_case)
                      .field("variant", variant)
                      .field("size", size)
                      .field("outstanding", outstanding)
                      .field("local_fraction", r.local_fraction)
                      .field("threads", 1);
  // The background evacuator's setting (RDMX_FAR_EVACUATOR, RDMX_FAR_FREE_LOW/HIGH), so runs with it off and on compare.
  static const far::Config settings;
  line.field("evacuator", far::to_string(settings.evacuator)).field("free_low", settings.free_low).field("free_high", settings.free_high);
  line.with("metric", "ns_p50").field("value", at(0.5)).print();
  line.with("metric", "ns_p90").field("value", at(0.9)).print();
  // A sample is a batch: `outstanding` operations.
  line.with("metric", "ops_per_s").field("value", static_cast<double>(r.ns.size() * outstanding) / r.seconds).print();
  line.with("metric", "seconds").field("value", r.seconds).print();
  if (r.server_cpu_seconds >= 0)
    line.with("metric", "server_cpu_s_per_mop").field("value", r.server_cpu_seconds / static_cast<double>(r.ns.size() * outstanding) * 1e6).print();
  if (r.background_share >= 0) line.with("metric", "background_eviction_share").field("value", r.background_share).print();
  if (r.poll_share >= 0) line.with("metric", "poll_share").field("value", r.poll_share).print();
  // One write: the launcher interleaves stderr with the JSON lines on stdout.
  std::string text(256, '\0');
  int n = std::snprintf(text.data(), text.size(), "far %-10s %-11s %5zu B x%-2zu p50 %9.0f ns  p90 %9.0f ns  local %.3f  (%zu ops)",
                        bench_case, variant, size, outstanding, at(0.5), at(0.9), r.local_fraction, r.ns.size());
  const auto more = [&](const char* format, double value) {
    n += std::snprintf(text.data() + n, text.size() - static_cast<std::size_t>(n), format, value);
  };
  if (r.server_cpu_seconds >= 0) more("  server %.3f s/Mop", r.server_cpu_seconds / static_cast<double>(r.ns.size() * outstanding) * 1e6);
  if (r.background_share >= 0) more("  background evictions %.0f %%", r.background_share * 100);
  if (r.poll_share >= 0) more("  waiting for completion %.0f %%", r.poll_share * 100);
  text.resize(static_cast<std::size_t>(n));
  std::fflush(stdout);
  std::fprintf(stderr, "%s\n", text.c_str());
}

template <std::size_t Size>
struct Object {
  unsigned char bytes[Size];
};

// Sweeps over the set from `cursor` on. batch 1: each dereference timed
// alone. Larger: `batch` consecutive objects dereferenced together
// (deref_all, their misses in flight at once), a batch's time divided by
// its size being one sample, ns per object.
template <std::size_t Size>
Result sweep(far::Manager& manager, std::vector<far::UniquePtr<Object<Size>>>& set, std::size_t& cursor, bool write, std::size_t ops,
             double seconds, std::size_t batch = 1) {
  using Pointer = far::UniquePtr<Object<Size>>;
  Result r;
  const std::uint64_t misses_before = manager.stats().misses;
  const auto start = Clock::now();
  const auto end = start + std::chrono::duration<double>(seconds);
  unsigned sum = 0;
  std::size_t objects = 0;
  while (objects < ops && (r.ns.size() % 64 != 0 || Clock::now() < end)) {
    if (cursor + batch > set.size()) cursor = 0;
    const auto t0 = Clock::now();
    {
      far::DerefScope scope;
      if (batch == 1 && write) set[cursor].deref_mut(scope)->bytes[0] = static_cast<unsigned char>(cursor);
      else if (batch == 1) sum += set[cursor].deref(scope)->bytes[Size - 1];
      else
        for (auto* o : far::deref_all(scope, std::span<const Pointer>(set.data() + cursor, batch), write ? far::Access::write : far::Access::read))
          sum += o->bytes[Size - 1];
    }
    r.ns.push_back(std::chrono::duration<double, std::nano>(Clock::now() - t0).count() / static_cast<double>(batch));
    cursor += batch;
    objects += batch;
  }
  r.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  r.local_fraction = 1.0 - static_cast<double>(manager.stats().misses - misses_before) / static_cast<double>(objects);
  if (sum == 12345678) std::fprintf(stderr, " ");  // keep the reads
  return r;
}

// Bare gets (and puts) of the same sizes from the same server region.
Result raw(const rdmx::RemoteLocator& region, std::size_t size, bool write, const Options& o, std::size_t outstanding = 1) {
  rdmx::memory::Block buffer = rdmx::Job::current().arena().allocate_chunk(size * outstanding, 64);
  Result r;
  const std::size_t slots = region.length / 2 / size;  // the compute process's share, as the Manager uses it
  const auto start = Clock::now();
  const auto end = start + std::chrono::duration<double>(o.seconds);
  std::vector<rdmx::Future<void>> pending;
  double waited = 0, total = 0;  // reads: time in the completion wait, and in all
  for (std::size_t i = 0; r.ns.size() * outstanding < o.ops && (r.ns.size() % 64 != 0 || Clock::now() < end);) {
    const auto t0 = Clock::now();
    for (std::size_t k = 0; k < outstanding; ++k, i = (i + 1) % slots)
      pending.push_back(rdmx::get(buffer.data + k * size, region.slice(i * size, size)));
    const auto issued = Clock::now();
    for (auto& f : pending) f.get();
    if (!write) {
      const auto done = Clock::now();
      waited += std::chrono::duration<double, std::nano>(done - issued).count();
      total += std::chrono::duration<double, std::nano>(done - t0).count();
    }
    pending.clear();
    if (write) {
      const rdmx::RemoteLocator at = region.slice(i * size, size);
      rdmx::put(buffer.data, at).get();
      rdmx::flush(at.process);
    }
    r.ns.push_back(std::chrono::duration<double, std::nano>(Clock::now() - t0).count() / static_cast<double>(outstanding));
  }
  r.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  if (!write && total > 0) r.poll_share = waited / total;
  rdmx::Job::current().arena().release_chunk(buffer);
  return r;
}

// A bare rdmx::blocking_get of the same bytes: no future (the primitive a
// one-sided miss uses), so the cheapest read of them there is.
Result raw_blocking(const rdmx::RemoteLocator& region, std::size_t size, const Options& o) {
  rdmx::memory::Block buffer = rdmx::Job::current().arena().allocate_chunk(size, 64);
  Result r;
  const std::size_t slots = region.length / 2 / size;
  const auto start = Clock::now();
  const auto end = start + std::chrono::duration<double>(o.seconds);
  for (std::size_t i = 0; r.ns.size() < o.ops && (r.ns.size() % 64 != 0 || Clock::now() < end); i = (i + 1) % slots) {
    const auto t0 = Clock::now();
    rdmx::blocking_get(buffer.data, region.slice(i * size, size));
    r.ns.push_back(std::chrono::duration<double, std::nano>(Clock::now() - t0).count());
  }
  r.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  rdmx::Job::current().arena().release_chunk(buffer);
  return r;
}

// Process 0 computes, the last process serves.
far::Config bench_config(const rdmx::Job& job, far::Path path, std::size_t cache = cache_bytes, std::size_t region = region_bytes) {
  far::Config config;
  config.servers = {job.size() - 1};
  config.cache_bytes = cache;
  config.region_bytes = region;
  config.path = path;
  return config;
}

template <std::size_t Size>
void measure(const JsonLine& common, far::Path path, const Options& o) {
  rdmx::Job& job = rdmx::Job::current();
  far::Manager manager(job, bench_config(job, path));
  if (job.rank() != 0) return;  // servers serve until the Manager's barrier
  std::vector<far::UniquePtr<Object<Size>>> set;
  for (std::size_t i = 0; i < object_count(Size); ++i) set.push_back(far::make_unique<Object<Size>>());
  std::size_t cursor = 0;
  const auto counted = [server = job.size() - 1](auto&& run) {  // with the server's CPU time
    const double before = server_cpu_seconds(server);
    Result r = run();
    r.server_cpu_seconds = server_cpu_seconds(server) - before;
    return r;
  };
  // One untimed pass: every object written back once, so reads find clean victims.
  sweep(manager, set, cursor, false, set.size(), 3600);
  const Result reads = counted([&] { return sweep(manager, set, cursor, false, o.ops, o.seconds); });
  report(common, "cold_read", far::to_string(path), Size, reads);
  // And one untimed write pass: from here on every victim is dirty.
  sweep(manager, set, cursor, true, set.size(), 3600);
  report(common, "cold_write", far::to_string(path), Size,
         counted([&] { return with_eviction_share(manager, [&] { return sweep(manager, set, cursor, true, o.ops, o.seconds); }); }));
  if (path == far::Path::one_sided) {
    report(common, "cold_read", "raw_get", Size, counted([&] { return raw(manager.server_region(0), Size, false, o); }));
    const Result bare = counted([&] { return raw_blocking(manager.server_region(0), Size, o); });
    report(common, "cold_read", "raw_blocking_get", Size, bare);
    report(common, "cold_write", "raw_get_put", Size, counted([&] { return raw(manager.server_region(0), Size, true, o); }));
    // The runtime's own share of a miss (AIFM's Fig. 12b "overhead"): a
    // cold read's median minus the cheapest bare get's of the same bytes.
    const double overhead = median(reads.ns) - median(bare.ns);
    common.with("case", "cold_read")
        .field("variant", far::to_string(path))
        .field("size", Size)
        .field("outstanding", 1)
        .field("metric", "overhead_ns_p50")
        .field("value", overhead)
        .print();
    std::fprintf(stderr, "far cold_read  %-11s %5zu B    overhead over a bare get %.0f ns at p50\n", far::to_string(path), Size, overhead);
  }
  // Latency hiding: batches of misses in flight together, after an untimed
  // read pass that leaves the victims clean again.
  sweep(manager, set, cursor, false, set.size(), 3600);
  report(common, "cold_read", far::to_string(path), Size, counted([&] { return sweep(manager, set, cursor, false, o.ops, o.seconds, batch); }),
         batch);
  if (path == far::Path::one_sided)
    report(common, "cold_read", "raw_get", Size, counted([&] { return raw(manager.server_region(0), Size, false, o, batch); }), batch);
}

// Lookups in a hash table whose entries (64-byte blocks) are 16 times the
// cache, `outstanding` keys per find_all; a sample is a batch's time per key.
void inflight(const JsonLine& common, far::Path path, const Options& o) {
  rdmx::Job& job = rdmx::Job::current();
  far::Manager manager(job, bench_config(job, path));
  if (job.rank() != 0) return;
  struct Value {
    std::uint64_t words[5];
  };
  far::HashTable<std::uint64_t, Value> table(1 << 14);
  const std::uint64_t keys = 16 * cache_bytes / 64;
  for (std::uint64_t k = 0; k < keys; ++k) table.insert_or_assign(k, Value{{k, k + 1, k + 2, k + 3, k + 4}});
  {  // one untimed pass over every key: the entries inserted last are written back, the cache holds clean ones
    std::vector<std::uint64_t> all(keys);
    for (std::uint64_t k = 0; k < keys; ++k) all[k] = k;
    std::vector<std::optional<Value>> out(keys);
    table.find_all(all, out);
  }
  std::mt19937_64 rng(42);
  for (std::size_t outstanding : {std::size_t{1}, std::size_t{8}, std::size_t{64}}) {
    std::vector<std::uint64_t> batch(outstanding);
    std::vector<std::optional<Value>> out(outstanding);
    Result r;
    std::size_t lookups = 0, wrong = 0;
    const std::uint64_t misses_before = manager.stats().misses;
    const auto start = Clock::now();
    const auto end = start + std::chrono::duration<double>(o.seconds);
    while (lookups < o.ops && (r.ns.size() % 16 != 0 || Clock::now() < end)) {
      for (auto& k : batch) k = rng() % keys;
      const auto t0 = Clock::now();
      if (outstanding == 1) out[0] = table.find(batch[0]);
      else table.find_all(batch, out, outstanding);
      r.ns.push_back(std::chrono::duration<double, std::nano>(Clock::now() - t0).count() / static_cast<double>(outstanding));
      for (std::size_t i = 0; i < outstanding; ++i) wrong += !out[i] || out[i]->words[4] != batch[i] + 4;
      lookups += outstanding;
    }
    r.seconds = std::chrono::duration<double>(Clock::now() - start).count();
    r.local_fraction = 1.0 - static_cast<double>(manager.stats().misses - misses_before) / static_cast<double>(lookups);
    if (wrong != 0) throw rdmx::Error(rdmx::Errc::protocol, "inflight: " + std::to_string(wrong) + " lookups returned a wrong value");
    report(common, "inflight", far::to_string(path), sizeof(Value), r, outstanding);
  }
}


// A program's passes, timed: `reps` runs of pass(), each checked against
// `expected` (what the all-local program computes). local_fraction is the
// share of the data the cache can hold.
template <class Pass>
Result timed_passes(const std::string& what, std::size_t reps, std::uint64_t expected, double local_fraction, Pass&& pass) {
  Result r;
  const auto start = Clock::now();
  for (std::size_t k = 0; k < reps; ++k) {
    const auto t0 = Clock::now();
    const std::uint64_t got = pass();
    r.ns.push_back(std::chrono::duration<double, std::nano>(Clock::now() - t0).count());
    if (got != expected) throw rdmx::Error(rdmx::Errc::protocol, what + " computed " + std::to_string(got) + ", not " + std::to_string(expected));
  }
  r.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  r.local_fraction = local_fraction;
  return r;
}

void granularity(const JsonLine& common, far::Path path, const Options& o) {
  rdmx::Job& job = rdmx::Job::current();
  far::Manager manager(job, bench_config(job, path));
  if (job.rank() != 0) return;
  using Record = Object<64>;
  using Page = Object<4096>;
  constexpr std::size_t per_page = sizeof(Page) / sizeof(Record);
  const std::size_t records = 4 * cache_bytes / sizeof(Record);
  std::vector<far::UniquePtr<Record>> objects;
  std::vector<far::UniquePtr<Page>> pages;
  for (std::size_t i = 0; i < records; ++i) {
    Record r{};
    r.bytes[0] = static_cast<unsigned char>(i);
    objects.push_back(far::make_unique<Record>(r));
  }
  for (std::size_t p = 0; p < records / per_page; ++p) {
    Page page{};
    for (std::size_t k = 0; k < per_page; ++k) page.bytes[k * sizeof(Record)] = static_cast<unsigned char>(p * per_page + k);
    pages.push_back(far::make_unique<Page>(page));
  }
  // Zipf 0.99 by inverse CDF; rank k is record scatter[k].
  std::vector<double> cdf(records);
  double total = 0;
  for (std::size_t k = 0; k < records; ++k) cdf[k] = total += 1.0 / std::pow(static_cast<double>(k + 1), 0.99);
  std::vector<std::size_t> scatter(records);
  for (std::size_t k = 0; k < records; ++k) scatter[k] = k;
  std::shuffle(scatter.begin(), scatter.end(), std::mt19937_64(3));
  const auto run = [&](const char* variant, bool zipf, auto&& read) {
    std::mt19937_64 rng(7);
    std::uniform_real_distribution<double> unit(0, total);
    const auto next = [&] {
      if (!zipf) return static_cast<std::size_t>(rng() % records);
      const auto k = static_cast<std::size_t>(std::lower_bound(cdf.begin(), cdf.end(), unit(rng)) - cdf.begin());
      return scatter[std::min(k, records - 1)];
    };
    for (std::size_t i = 0; i < 2 * records; ++i) read(next());  // untimed: the cache holds this variant's data
    Result r;
    std::size_t wrong = 0, reads = 0;
    const std::uint64_t misses_before = manager.stats().misses;
    const auto start = Clock::now();
    const auto end = start + std::chrono::duration<double>(o.seconds);
    while (reads < o.ops && (reads % 64 != 0 || Clock::now() < end)) {
      const std::size_t i = next();
      const auto t0 = Clock::now();
      const unsigned char got = read(i);
      r.ns.push_back(std::chrono::duration<double, std::nano>(Clock::now() - t0).count());
      wrong += got != static_cast<unsigned char>(i);
      ++reads;
    }
    r.seconds = std::chrono::duration<double>(Clock::now() - start).count();
    r.local_fraction = 1.0 - static_cast<double>(manager.stats().misses - misses_before) / static_cast<double>(reads);
    if (wrong != 0) throw rdmx::Error(rdmx::Errc::protocol, std::string("granularity: ") + variant + " read wrong records");
    report(common.with("path", far::to_string(path)).with("distribution", zipf ? "zipf" : "uniform"), "granularity", variant,
           sizeof(Record), r);
  };
  for (bool zipf : {false, true}) {
    run("object", zipf, [&](std::size_t i) {
      far::DerefScope scope;
      return objects[i].deref(scope)->bytes[0];
    });
    run("page", zipf, [&](std::size_t i) {
      far::DerefScope scope;
      return pages[i / per_page].deref(scope)->bytes[(i % per_page) * sizeof(Record)];
    });
  }
}

#ifdef RDMX_HAVE_SNAPPY
// Words drawn with a skew, so that the text compresses about as well as prose.
std::vector<char> generated_text(std::size_t bytes) {
  static const char* const words[] = {"the", "of", "and", "to", "in", "a", "is", "that", "for", "it", "as", "was", "with",
                                      "be", "by", "on", "not", "he", "this", "are", "or", "his", "from", "at", "which",
                                      "memory", "remote", "object", "server", "cache", "network", "pointer", "thread"};
  constexpr std::size_t count = sizeof words / sizeof *words;
  std::mt19937_64 rng(11);
  std::vector<char> text;
  text.reserve(bytes);
  while (text.size() < bytes) {
    const std::size_t w = std::min<std::size_t>(count - 1, static_cast<std::size_t>(std::pow(static_cast<double>(rng() % 1000) / 1000.0, 3) * count));
    for (const char* c = words[w]; *c != 0 && text.size() < bytes; ++c) text.push_back(*c);
    if (text.size() < bytes) text.push_back(rng() % 13 == 0 ? '\n' : ' ');
    if (rng() % 7 == 0)  // a number now and then: not every byte is a word's
      for (int d = 0; d < 4 && text.size() < bytes; ++d) text.push_back(static_cast<char>('0' + rng() % 10));
  }
  return text;
}

// snappy reads a block through this: its two halves, where they lie in the cache.
class TwoPieces final : public snappy::Source {
 public:
  TwoPieces(const char* a, const char* b, std::size_t half) : piece_{a, b}, half_(half) {}
  std::size_t Available() const override { return 2 * half_ - read_; }
  const char* Peek(std::size_t* len) override {
    const std::size_t in = read_ % half_;
    *len = read_ >= 2 * half_ ? 0 : half_ - in;
    return read_ >= 2 * half_ ? nullptr : piece_[read_ / half_] + in;
  }
  void Skip(std::size_t n) override { read_ += n; }

 private:
  const char* piece_[2];
  std::size_t half_;
  std::size_t read_ = 0;
};

void snappy_case(const JsonLine& common, far::Path path, const Options& o) {
  constexpr std::size_t half = 16 << 10, block = 2 * half;
  constexpr std::size_t cache = 2 << 20, blocks = 4 * cache / block;  // 8 MiB of text, a quarter local
  rdmx::Job& job = rdmx::Job::current();
  far::Manager manager(job, bench_config(job, path, cache, 32 << 20));
  if (job.rank() != 0) return;
  const std::vector<char> text = generated_text(blocks * block);
  struct Half {
    char bytes[half];
  };
  std::vector<far::UniquePtr<Half>> far_text;
  for (std::size_t h = 0; h < 2 * blocks; ++h) {
    far_text.push_back(far::make_unique<Half>());
    far::DerefScope scope;
    std::memcpy(far_text.back().deref_mut(scope)->bytes, text.data() + h * half, half);
  }
  std::string out;
  std::vector<char> sunk(snappy::MaxCompressedLength(block));
  // `ahead` blocks travel while one compresses (AIFM's prefetcher, as a window).
  constexpr std::size_t ahead = 4;
  const auto pass_far = [&] {
    using Pointer = far::UniquePtr<Half>;
    struct InFlight {
      far::DerefScope scope;
      std::optional<far::Prefetch<Pointer>> halves;
    };
    std::deque<InFlight> window;
    std::size_t compressed = 0, issued = 0;
    const auto issue = [&] {
      window.emplace_back();
      window.back().halves.emplace(window.back().scope, std::span<const Pointer>(far_text.data() + 2 * issued++, 2));
    };
    while (issued < std::min(ahead, blocks)) issue();
    for (std::size_t b = 0; b < blocks; ++b) {
      const std::vector<Half*> halves = window.front().halves->get();
      if (issued < blocks) issue();
      TwoPieces source(halves[0]->bytes, halves[1]->bytes, half);
      snappy::UncheckedByteArraySink sink(sunk.data());
      compressed += snappy::Compress(&source, &sink);
      window.pop_front();
    }
    return compressed;
  };
  const auto pass_local = [&] {
    std::size_t compressed = 0;
    for (std::size_t b = 0; b < blocks; ++b) {
      snappy::Compress(text.data() + b * block, block, &out);
      compressed += out.size();
    }
    return compressed;
  };
  const std::size_t expected = pass_local();
  const auto run = [&](const char* variant, auto&& pass) {
    const std::uint64_t misses_before = manager.stats().misses;
    const bool local = std::string(variant) == "local";
    const Result r = timed_passes(std::string("snappy: ") + variant, std::max<std::size_t>(3, std::min<std::size_t>(o.ops / 2000, 10)),
                                  expected, local ? 1.0 : static_cast<double>(cache) / static_cast<double>(blocks * block), pass);
    if (!local && manager.stats().misses == misses_before)
      throw rdmx::Error(rdmx::Errc::protocol, "snappy: the far pass never missed: it did not measure far memory");
    report(common.with("path", far::to_string(path)), "snappy", variant, block, r);
  };
  run("far", pass_far);
  run("local", pass_local);
  std::fprintf(stderr, "far snappy: %zu bytes of text compress to %zu\n", blocks * block, expected);
}

void web(const JsonLine& common, far::Path path, const Options& o) {
  struct Page {
    char bytes[8192];
  };
  struct Entry {
    std::uint64_t page;
    std::uint64_t views;
    char title[48];
  };
  constexpr std::size_t keys = 16384, pages = 1024;  // 1 MiB of entries (64 B blocks) + 8 MiB of pages
  constexpr std::size_t cache = (keys * 64 + pages * sizeof(Page)) / 4;
  rdmx::Job& job = rdmx::Job::current();
  far::Manager manager(job, bench_config(job, path, cache, 32 << 20));
  if (job.rank() != 0) return;
  const std::vector<char> text = generated_text(pages * sizeof(Page));
  far::HashTable<std::uint64_t, Entry> table(keys);
  std::unordered_map<std::uint64_t, Entry> local_table;
  far::Array<Page, sizeof(Page)> far_pages(pages);
  std::vector<Page> local_pages(pages);
  const auto key_of = [](std::size_t k) { return k * 0x9e3779b97f4a7c15ULL; };
  for (std::size_t k = 0; k < keys; ++k) {
    const Entry e{k % pages, 0, {}};
    table.insert_or_assign(key_of(k), e);
    local_table.emplace(key_of(k), e);
  }
  for (std::size_t p = 0; p < pages; ++p) {
    std::memcpy(local_pages[p].bytes, text.data() + p * sizeof(Page), sizeof(Page));
    far::DerefScope scope;
    std::memcpy(far_pages.at_mut(scope, p).bytes, text.data() + p * sizeof(Page), sizeof(Page));
  }
  std::vector<double> cdf(keys);
  double total = 0;
  for (std::size_t k = 0; k < keys; ++k) cdf[k] = total += 1.0 / std::pow(static_cast<double>(k + 1), 0.85);
  std::vector<char> sunk(snappy::MaxCompressedLength(sizeof(Page)));
  // One request: the entry, then its page, hashed and compressed. Returns a digest.
  const auto serve = [&](const Page& page) {
    std::uint64_t h = 1469598103934665603ULL;
    for (char c : page.bytes) h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ULL;
    std::size_t length = 0;
    snappy::RawCompress(page.bytes, sizeof(Page), sunk.data(), &length);
    return h ^ length;
  };
  const auto run = [&](const char* variant, auto&& request) {
    std::mt19937_64 rng(5);
    std::uniform_real_distribution<double> unit(0, total);
    const auto next = [&] {
      return key_of(std::min<std::size_t>(keys - 1, std::lower_bound(cdf.begin(), cdf.end(), unit(rng)) - cdf.begin()));
    };
    for (std::size_t i = 0; i < keys; ++i) request(next());  // untimed: the cache settles
    Result r;
    std::uint64_t digest = 0;
    std::size_t requests = 0;
    const std::uint64_t misses_before = manager.stats().misses;
    const far::Stats evictions_before = manager.stats();
    const auto start = Clock::now();
    while (requests < o.ops) {  // a fixed count: both variants serve the same requests, and must agree
      const std::uint64_t key = next();
      const auto t0 = Clock::now();
      digest += request(key);
      r.ns.push_back(std::chrono::duration<double, std::nano>(Clock::now() - t0).count());
      ++requests;
    }
    r.seconds = std::chrono::duration<double>(Clock::now() - start).count();
    r.local_fraction = std::string(variant) == "local" ? 1.0 : static_cast<double>(cache) / (keys * 64 + pages * sizeof(Page));
    if (std::string(variant) == "far") r.background_share = background_share(evictions_before, manager.stats());
    if (std::string(variant) == "far" && manager.stats().misses == misses_before)
      throw rdmx::Error(rdmx::Errc::protocol, "web: the far requests never missed: they did not measure far memory");
    report(common.with("path", far::to_string(path)), "web", variant, sizeof(Page), r);
    return digest;
  };
  const std::uint64_t far_digest = run("far", [&](std::uint64_t key) -> std::uint64_t {
    std::uint64_t page = 0;
    if (!table.update(key, [&](Entry& e) {
          ++e.views;
          page = e.page;
        }))
      throw rdmx::Error(rdmx::Errc::protocol, "web: a key went missing from the far table");
    far::DerefScope scope;
    return serve(far_pages.at_nt(scope, page));
  });
  const std::uint64_t local_digest = run("local", [&](std::uint64_t key) -> std::uint64_t {
    Entry& e = local_table.at(key);
    ++e.views;
    return serve(local_pages[e.page]);
  });
  if (far_digest != local_digest) throw rdmx::Error(rdmx::Errc::protocol, "web: far and local requests computed different digests");
}
#endif

void aggregate(const JsonLine& common, far::Path path, const Options& o) {
  rdmx::Job& job = rdmx::Job::current();
  far::Manager manager(job, bench_config(job, path));
  if (job.rank() != 0) return;
  constexpr std::size_t n = std::size_t{1} << 20;
  far::Array<std::uint64_t> a(n);
  a.for_each_mut([](std::size_t i, std::uint64_t& x) { x = i * 3; });
  std::vector<std::uint64_t> local(n);
  for (std::size_t i = 0; i < n; ++i) local[i] = i * 3;
  const std::uint64_t expected = 3 * (std::uint64_t{n} * (n - 1) / 2);
  const auto run = [&](const char* variant, auto&& sum) {
    const double fraction = static_cast<double>(cache_bytes) / static_cast<double>(n * sizeof(std::uint64_t));
    const Result r = timed_passes(std::string("aggregate: ") + variant, std::max<std::size_t>(3, std::min<std::size_t>(o.ops / 1000, 20)),
                                  expected, fraction, sum);
    report(common.with("path", far::to_string(path)), "aggregate", variant, n * sizeof(std::uint64_t), r);
  };
  run("far", [&] {
    std::uint64_t s = 0;
    a.for_each([&](std::size_t, const std::uint64_t& x) { s += x; });
    return s;
  });
  run("far_offload", [&] { return a.reduce_remote(far::Sum<std::uint64_t>{}); });
  run("local", [&] {
    std::uint64_t s = 0;
    for (std::uint64_t x : local) s += x;
    return s;
  });
}

void stride(const JsonLine& common, far::Path path, const Options& o) {
  rdmx::Job& job = rdmx::Job::current();
  constexpr std::size_t cache = 1 << 20;
  far::Manager manager(job, bench_config(job, path, cache));
  if (job.rank() != 0) return;
  using Array = far::Array<std::uint64_t>;
  constexpr std::size_t n = std::size_t{1} << 20;  // 8 MiB
  constexpr std::size_t chunks = n / Array::per_chunk;
  constexpr std::size_t step = 3;
  Array a(n);
  a.for_each_mut([](std::size_t i, std::uint64_t& x) { x = i; });
  std::uint64_t expected = 0;
  for (std::size_t c = 0; c < chunks; ++c)
    for (std::size_t k = 0; k < 4; ++k) expected += c * Array::per_chunk + k * (Array::per_chunk / 4);
  const auto pass = [&] {
    std::uint64_t sum = 0;
    for (std::size_t first = 0; first < step; ++first)
      for (std::size_t c = first; c < chunks; c += step)
        for (std::size_t k = 0; k < 4; ++k) {
          far::DerefScope scope;
          sum += a.at(scope, c * Array::per_chunk + k * (Array::per_chunk / 4));
        }
    return sum;
  };
  const std::size_t reps = std::max<std::size_t>(3, std::min<std::size_t>(o.ops / 1000, 15));
  Result on, off;
  std::uint64_t hits = 0;
  for (std::size_t r = 0; r < reps; ++r) {
    for (const bool prefetch : {true, false}) {
      a.set_prefetch_depth(prefetch ? 16 : 0);
      const far::Stats before = manager.stats();
      Result one = timed_passes(prefetch ? "stride: prefetch" : "stride: no_prefetch", 1, expected, 0, pass);
      (prefetch ? on : off).ns.push_back(one.ns[0] / chunks);
      (prefetch ? on : off).seconds += one.seconds;
      if (prefetch) hits += manager.stats().prefetch_hits - before.prefetch_hits;
      if (!prefetch && manager.stats().prefetched != before.prefetched)
        throw rdmx::Error(rdmx::Errc::protocol, "stride: the prefetcher ran while turned off");
    }
  }
  const double fraction = static_cast<double>(cache) / static_cast<double>(n * sizeof(std::uint64_t));
  on.local_fraction = off.local_fraction = fraction;
  const JsonLine line = common.with("path", far::to_string(path));
  report(line, "stride", "prefetch", Array::per_chunk * sizeof(std::uint64_t), on, 1);
  report(line, "stride", "no_prefetch", Array::per_chunk * sizeof(std::uint64_t), off, 1);
  std::sort(on.ns.begin(), on.ns.end());
  std::sort(off.ns.begin(), off.ns.end());
  const double speedup = off.ns[off.ns.size() / 2] / on.ns[on.ns.size() / 2];
  const double share = static_cast<double>(hits) / static_cast<double>(reps * chunks);
  const JsonLine ratio = line.with("case", "stride").field("variant", "prefetch_vs_off").field("size", Array::per_chunk * sizeof(std::uint64_t));
  ratio.with("metric", "speedup_p50").field("value", speedup).print();
  ratio.with("metric", "prefetch_hit_share").field("value", share).print();
  std::fprintf(stderr, "far stride     prefetch is %.2fx no_prefetch (p50 per chunk), %.0f %% of chunks came ahead\n", speedup, share * 100);
}

}  // namespace

int main(int argc, char** argv) {
  rdmx::Job job(argc, argv);
  try {
    const Options o = parse(argc, argv);
    // AIFM's set-up: one compute process, one memory server. More processes would each
    // take an equal share of the one server's region and leave the computing one short.
    if (job.size() != 2)
      throw rdmx::Error(rdmx::Errc::invalid_argument, "exactly 2 processes are needed (a compute and a server), not " +
                                                          std::to_string(job.size()) + " (RDMX_BENCH_NP=2)");
    const char* tls_env = std::getenv("UCX_TLS");
    const std::string tls = tls_env != nullptr && std::string(tls_env).find("tcp") != std::string::npos ? "tcp" : "shm";
    JsonLine common;
    common.field("bench", "far").field("tls", tls);
    for (far::Path path : {far::Path::one_sided, far::Path::two_sided}) {
      if (!o.runs(path)) continue;
      if (o.runs("cold")) {
        measure<64>(common, path, o);
        measure<4096>(common, path, o);
      }
      if (o.runs("inflight")) inflight(common, path, o);
      if (o.runs("granularity")) granularity(common, path, o);
      if (o.runs("aggregate")) aggregate(common, path, o);
      if (o.runs("stride")) stride(common, path, o);
#ifdef RDMX_HAVE_SNAPPY
      if (o.runs("snappy")) snappy_case(common, path, o);
      if (o.runs("web")) web(common, path, o);
#endif
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rdmx-bench-far: %s\n", e.what());
    return 1;
  }
  return 0;
}
