// far::Vector in one process, over the in-process device: its contents
// against a std::vector under eviction, every offloaded operation against
// the same operation run here and against plain loops, the fall-backs, the
// replicas, and the errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "../error_from.hpp"
#include "rdmx/far/vector.hpp"

using namespace rdmx;
using namespace rdmx::far;

namespace {

Config small_cache(std::size_t replication = 1) {
  Config c;
  c.cache_bytes = 64 * 1024;
  c.region_bytes = 8 << 20;
  c.replication = replication;
  return c;
}
Error error_of(auto&& f) { return rdmx::testing::error_from(f); }
bool says(const Error& e, const char* what) { return std::string(e.what()).find(what) != std::string::npos; }

struct Trip {
  std::uint8_t vendor;
  std::uint8_t passengers;
  double fare;
};
struct Cheap {
  double below;
  bool operator()(const Trip& t) const { return t.fare < below; }
};
struct Odd {
  bool operator()(const std::uint64_t& x) const { return x % 2 == 1; }
};

template <class T, std::size_t C>
Vector<T, C> far_copy_of(const std::vector<T>& v, std::size_t server = 0) {
  Vector<T, C> out(server);
  out.append(v);
  return out;
}

std::vector<Trip> random_trips(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<Trip> trips(n);
  for (Trip& t : trips) t = {static_cast<std::uint8_t>(rng() % 3), static_cast<std::uint8_t>(rng() % 7), static_cast<double>(rng() % 10000) / 100};
  return trips;
}

bool same(const std::vector<Trip>& a, const std::vector<Trip>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(Trip)) == 0;
}

// A device that cannot compute: offloaded operations must run here.
class NoCompute final : public Device {
 public:
  explicit NoCompute(std::unique_ptr<Device> inner) : inner_(std::move(inner)) {}
  const char* name() const noexcept override { return "no-compute"; }
  std::size_t servers() const noexcept override { return inner_->servers(); }
  std::uint64_t region_bytes(std::size_t s) const override { return inner_->region_bytes(s); }
  std::uint32_t rank_of(std::size_t s) const override { return inner_->rank_of(s); }
  void read(std::size_t s, std::uint64_t o, void* l, std::size_t b) override { inner_->read(s, o, l, b); }
  void write(std::size_t s, std::uint64_t o, const void* l, std::size_t b) override { inner_->write(s, o, l, b); }
  void compute(std::size_t, const Offload&) override { throw Error(Errc::invalid_argument, "NoCompute: compute called"); }
  bool computes() const noexcept override { return false; }

 private:
  std::unique_ptr<Device> inner_;
};

}  // namespace

// Contents through push_back, append, at, for_each and for_each_mut on a
// vector 16 times the cache, against a std::vector.
TEST(FarVector, MatchesStdVectorUnderEviction) {
  Manager manager(make_local_device(2, 8 << 20), small_cache());
  std::mt19937_64 rng(1);
  std::vector<std::uint64_t> shadow;
  Vector<std::uint64_t> v;
  v.reserve(1000);
  for (int i = 0; i < 1000; ++i) {
    shadow.push_back(rng());
    v.push_back(shadow.back());
  }
  std::vector<std::uint64_t> batch(130000);
  for (auto& x : batch) x = rng();
  v.append(batch);
  shadow.insert(shadow.end(), batch.begin(), batch.end());
  ASSERT_EQ(v.size(), shadow.size());
  EXPECT_EQ(v.to_vector(), shadow);
  v.for_each_mut([](std::size_t i, std::uint64_t& x) { x ^= i; });
  std::size_t wrong = 0;
  v.for_each([&](std::size_t i, const std::uint64_t& x) { wrong += x != (shadow[i] ^ i); });
  EXPECT_EQ(wrong, 0u);
  for (int k = 0; k < 200; ++k) {
    const std::size_t i = rng() % shadow.size();
    DerefScope scope;
    EXPECT_EQ(v.at(scope, i), shadow[i] ^ i);
  }
  std::size_t seen = 0;
  v.for_each([&](std::size_t i, const std::uint64_t&) { seen += i >= 5000 && i < 7000; }, 5000, 7000);
  EXPECT_EQ(seen, 2000u);
  EXPECT_GT(manager.stats().evictions, 100u);
  EXPECT_LE(manager.stats().peak_resident_bytes, manager.stats().cache_bytes);
}

// Every offloaded operation equals the same one run here and a plain loop,
// on random data, chunk sizes that do not divide the vector, and an element
// type whose size does not divide the chunk.
TEST(FarVector, OffloadedEqualsHereEqualsPlainLoops) {
  Manager manager(make_local_device(1, 16 << 20), small_cache());
  const std::vector<Trip> trips = random_trips(70001, 2);
  const auto far = far_copy_of<Trip, 4096>(trips);

  for (rdmx::far::Run run : {rdmx::far::Run::offloaded, rdmx::far::Run::here}) {
    SCOPED_TRACE(run == rdmx::far::Run::offloaded ? "offloaded" : "here");
    EXPECT_TRUE(same(far.copy(run).to_vector(), trips));

    std::vector<std::uint64_t> order(trips.size() / 2);
    std::mt19937_64 rng(3);
    for (auto& i : order) i = rng() % trips.size();
    const auto index = far_copy_of<std::uint64_t, 4096>(order);
    std::vector<Trip> shuffled;
    for (auto i : order) shuffled.push_back(trips[i]);
    EXPECT_TRUE(same(far.gather(index, run).to_vector(), shuffled));

    std::vector<Trip> cheap;
    std::vector<std::uint64_t> where;
    for (std::size_t i = 0; i < trips.size(); ++i)
      if (trips[i].fare < 20) cheap.push_back(trips[i]), where.push_back(i);
    EXPECT_TRUE(same(far.filter(Cheap{20}, run).to_vector(), cheap));
    EXPECT_EQ(far.where(Cheap{20}, run).to_vector(), where);
    EXPECT_EQ(far.reduce(Count<Trip, Cheap>{{20}}, run), cheap.size());
  }

  std::vector<double> fares;
  std::vector<std::uint8_t> vendors;
  for (const Trip& t : trips) fares.push_back(t.fare), vendors.push_back(t.vendor);
  const auto fare = far_copy_of<double, 4096>(fares);
  const auto vendor = far_copy_of<std::uint8_t, 4096>(vendors);
  EXPECT_EQ(fare.reduce(Sum<double>{}), fare.reduce(Sum<double>{}, rdmx::far::Run::here));  // bit for bit
  EXPECT_NEAR(fare.reduce(Sum<double>{}), std::accumulate(fares.begin(), fares.end(), 0.0), 1e-6);
  EXPECT_EQ(fare.reduce(Min<double>{}), *std::min_element(fares.begin(), fares.end()));
  EXPECT_EQ(fare.reduce(Max<double>{}, rdmx::far::Run::here), *std::max_element(fares.begin(), fares.end()));
  const GroupStats<double> summary = fare.reduce(Summary<double>{});
  EXPECT_EQ(summary, fare.reduce(Summary<double>{}, rdmx::far::Run::here));
  EXPECT_EQ(summary.count, fares.size());
  EXPECT_EQ(summary.max, *std::max_element(fares.begin(), fares.end()));
  const auto groups = vendor.group_by(fare, GroupBy<std::uint8_t, double, 3>{});
  EXPECT_EQ(groups, (vendor.group_by(fare, GroupBy<std::uint8_t, double, 3>{}, rdmx::far::Run::here)));
  for (std::size_t g = 0; g < 3; ++g) {
    std::uint64_t count = 0;
    double lo = 1e9, hi = -1;
    for (const Trip& t : trips)
      if (t.vendor == g) ++count, lo = std::min(lo, t.fare), hi = std::max(hi, t.fare);
    EXPECT_EQ(groups[g].count, count);
    EXPECT_EQ(groups[g].min, lo);
    EXPECT_EQ(groups[g].max, hi);
  }

  // Empty vectors and empty selections.
  Vector<Trip> none(0);
  EXPECT_EQ(none.copy().size(), 0u);
  EXPECT_EQ(far.filter(Cheap{-1}).size(), 0u);
  EXPECT_EQ(none.reduce(Count<Trip, Cheap>{{20}}), 0u);
}

// An offloaded filter makes one pass: before each request the result has
// room for all that the request's range could keep. Whatever it keeps, none
// of that room outlives the call: the result holds its chunks and its
// directory, nothing more.
TEST(FarVector, OffloadedFilterKeepsNoSpareRoom) {
  Manager manager(make_local_device(1, 16 << 20), small_cache());
  const std::vector<Trip> trips = random_trips(70001, 7);  // several requests' ranges
  const auto far = far_copy_of<Trip, 4096>(trips);
  EXPECT_EQ(far.reduce(Count<Trip, Cheap>{{1e9}}), trips.size());  // the source's directory exists from here on
  const std::size_t before = manager.stats().objects;
  const auto chunks = [](std::size_t n, std::size_t per_chunk) { return (n + per_chunk - 1) / per_chunk; };
  {
    const auto none = far.filter(Cheap{-1});
    EXPECT_EQ(none.size(), 0u);
    EXPECT_LE(manager.stats().objects - before, 1u);  // its directory
  }
  {
    const auto all = far.filter(Cheap{1e9});
    EXPECT_TRUE(same(all.to_vector(), trips));
    EXPECT_EQ(manager.stats().objects - before, chunks(trips.size(), Vector<Trip>::per_chunk) + 1);
  }
  {
    const auto every = far.where(Cheap{1e9});
    std::vector<std::uint64_t> expected(trips.size());
    std::iota(expected.begin(), expected.end(), 0);
    EXPECT_EQ(every.to_vector(), expected);
    EXPECT_EQ(manager.stats().objects - before, chunks(trips.size(), Vector<std::uint64_t>::per_chunk) + 1);
  }
  EXPECT_EQ(manager.stats().objects, before);
}

// Offloaded, the chunks do not travel: an offloaded copy and gather of a
// vector 30 times the cache cost a handful of misses where running here
// fetches every chunk.
TEST(FarVector, OffloadedOperationsDoNotFetchTheChunks) {
  Manager manager(make_local_device(1, 16 << 20), small_cache());
  std::vector<std::uint64_t> values(250000);
  std::iota(values.begin(), values.end(), 0);
  const auto v = far_copy_of<std::uint64_t, 4096>(values);
  std::reverse(values.begin(), values.end());
  const auto reversed = far_copy_of<std::uint64_t, 4096>(values);
  const std::uint64_t before = manager.stats().misses;
  const auto copied = v.copy();
  const auto gathered = v.gather(reversed);
  const std::uint64_t sum = v.reduce(Sum<std::uint64_t>{});
  EXPECT_LT(manager.stats().misses - before, 10u);
  EXPECT_EQ(sum, 250000ull * 249999 / 2);
  EXPECT_EQ(gathered.to_vector(), values);
  EXPECT_GT(manager.stats().misses - before, 400u);  // reading them back does fetch
  const std::uint64_t here = manager.stats().misses;
  EXPECT_EQ(v.reduce(Sum<std::uint64_t>{}, rdmx::far::Run::here), sum);
  EXPECT_GT(manager.stats().misses - here, 400u);
}

// Offloaded operations fall back to running here on a device that cannot
// compute, and for vectors on different servers; the results are the same.
TEST(FarVector, FallsBackWhenItCannotOffload) {
  std::vector<std::uint64_t> values(40000), order(30000);
  std::mt19937_64 rng(4);
  for (auto& x : values) x = rng();
  for (auto& i : order) i = rng() % values.size();
  std::vector<std::uint64_t> expected;
  for (auto i : order) expected.push_back(values[i]);
  {
    Manager manager(std::make_unique<NoCompute>(make_local_device(1, 8 << 20)), small_cache());
    const auto v = far_copy_of<std::uint64_t, 4096>(values);
    const auto index = far_copy_of<std::uint64_t, 4096>(order);
    EXPECT_EQ(v.gather(index).to_vector(), expected);
    EXPECT_EQ(v.copy().to_vector(), values);
    EXPECT_EQ(v.where(Odd{}).size(), v.reduce(Count<std::uint64_t, Odd>{}));
  }
  Manager manager(make_local_device(2, 8 << 20), small_cache());
  const auto v = far_copy_of<std::uint64_t, 4096>(values, 0);
  const auto index = far_copy_of<std::uint64_t, 2048>(order, 1);  // another server, another chunk size
  EXPECT_EQ(v.gather(index).to_vector(), expected);
  EXPECT_EQ(v.gather(index).server(), 0u);
}

// Replication 2: offloaded writes run on both copies, so the two servers'
// regions stay byte for byte the same.
TEST(FarVector, ReplicasStayIdentical) {
  auto device = make_local_device(2, 8 << 20);
  Device* inner = device.get();
  Manager manager(std::move(device), small_cache(2));
  const std::vector<Trip> trips = random_trips(50000, 5);
  const auto far = far_copy_of<Trip, 4096>(trips);
  std::vector<std::uint64_t> order(trips.size());
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), std::mt19937_64(6));
  const auto index = far_copy_of<std::uint64_t, 4096>(order);
  const auto copied = far.copy();
  const auto shuffled = far.gather(index);
  const auto cheap = far.filter(Cheap{30});
  const auto where = far.where(Cheap{30});
  std::vector<std::byte> a(8 << 20), b(8 << 20);
  inner->read(0, 0, a.data(), a.size());
  inner->read(1, 0, b.data(), b.size());
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size()), 0);
  std::vector<Trip> expected;
  for (auto i : order) expected.push_back(trips[i]);
  EXPECT_TRUE(same(shuffled.to_vector(), expected));
  EXPECT_EQ(cheap.size(), where.size());
}

TEST(FarVector, BadInputIsAClearError) {
  Manager manager(make_local_device(1, 4 << 20), small_cache());
  const auto v = far_copy_of<std::uint64_t, 4096>(std::vector<std::uint64_t>(10000, 1));
  const auto bad_index = far_copy_of<std::uint64_t, 4096>({0, 5, 10000});
  for (rdmx::far::Run run : {rdmx::far::Run::offloaded, rdmx::far::Run::here}) {
    const Error e = error_of([&] { v.gather(bad_index, run); });
    EXPECT_EQ(e.code(), Errc::invalid_argument) << e.what();
    EXPECT_TRUE(says(e, "10000 out of range")) << e.what();
    const auto keys = far_copy_of<std::uint64_t, 4096>(std::vector<std::uint64_t>(10000, 4));
    const Error key = error_of([&] { keys.group_by(v, GroupBy<std::uint64_t, std::uint64_t, 4>{}, run); });
    EXPECT_EQ(key.code(), Errc::invalid_argument) << key.what();
    EXPECT_TRUE(says(key, "outside the 4 groups")) << key.what();
    const Error lengths = error_of([&] { bad_index.group_by(v, GroupBy<std::uint64_t, std::uint64_t, 4>{}, run); });
    EXPECT_EQ(lengths.code(), Errc::invalid_argument);
    EXPECT_TRUE(says(lengths, "3 keys but 10000 values")) << lengths.what();
  }
  {
    DerefScope scope;
    EXPECT_EQ(error_of([&] { v.at(scope, 10000); }).code(), Errc::invalid_argument);
    v.at(scope, 3);  // pinned: no offloaded operation now
    const Error pinned = error_of([&] { v.copy(); });
    EXPECT_EQ(pinned.code(), Errc::invalid_argument);
    EXPECT_TRUE(says(pinned, "pins it")) << pinned.what();
  }
  EXPECT_EQ(error_of([] { Vector<int> w(7); }).code(), Errc::invalid_argument);
  Vector<std::uint64_t> w;
  EXPECT_EQ(error_of([&] { w.reserve(std::size_t{1} << 40); }).code(), Errc::out_of_memory);
  // Far memory runs out: a clear error, and what was stored stays.
  std::vector<std::uint64_t> block(4096, 9);
  const Error full = error_of([&] {
    for (;;) w.append(block);
  });
  EXPECT_EQ(full.code(), Errc::out_of_memory) << full.what();
  EXPECT_GT(w.size(), 0u);
  EXPECT_EQ(w.size() % 512, 0u);
  DerefScope scope;
  EXPECT_EQ(w.at(scope, w.size() - 1), 9u);
}

// Hostile requests straight to the server's handler: a protocol error, not
// a read outside the region.
TEST(FarVector, MalformedRequestsAreRefused) {
  Manager manager(make_local_device(1, 1 << 20), small_cache());
  using Handler = rdmx::far::detail::VectorHandler<rdmx::far::detail::CopyKind<std::uint64_t>, rdmx::far::detail::NoOp>;
  const auto send = [&](const rdmx::far::detail::VectorRequest<rdmx::far::detail::NoOp>& r, std::size_t table_entries) {
    std::vector<std::byte> args(sizeof r + table_entries * 8);
    std::memcpy(args.data(), &r, sizeof r);
    std::uint64_t reply = 0;
    return error_of([&] {
      manager.device().compute(0, Device::Offload{fabric::FunctionId<Handler>::value, args, &reply, sizeof reply, true});
    });
  };
  rdmx::far::detail::VectorRequest<rdmx::far::detail::NoOp> r;
  r.table_entries = 100000;  // more than the bytes carry
  EXPECT_EQ(send(r, 2).code(), Errc::protocol);
  r.table_entries = 1;
  r.last = 10;
  r.views[0] = {1ull << 40, 512, 4096, 0, 1};  // more chunks than its directory lists
  r.views[1] = r.views[0];
  EXPECT_EQ(send(r, 1).code(), Errc::protocol);
  r.views[0] = {100, 512, 4096, 0, 1};
  r.views[1] = {100, 4096, 4096, 0, 1};  // 4096 uint64 do not fit 4096 bytes
  EXPECT_EQ(send(r, 1).code(), Errc::protocol);
  r.views[1] = r.views[0];
  r.last = 200;  // beyond the vectors
  EXPECT_EQ(send(r, 1).code(), Errc::invalid_argument);
}

// An offloaded operation writes dirty chunks back (the server sees the
// latest values) and leaves them cached: reading the vector again after it
// costs no misses.
TEST(FarVector, OffloadWritesBackAndKeepsTheCache) {
  Manager manager(make_local_device(1, 4 << 20), small_cache());
  Vector<std::uint64_t> v;
  v.append(std::vector<std::uint64_t>(4000, 1));  // 8 chunks: the cache holds them
  EXPECT_EQ(v.reduce(Sum<std::uint64_t>{}), 4000u);
  v.for_each_mut([](std::size_t i, std::uint64_t& x) { x = i; });  // dirty, local
  const std::uint64_t before = manager.stats().misses;
  EXPECT_EQ(v.reduce(Sum<std::uint64_t>{}), 4000ull * 3999 / 2);
  EXPECT_EQ(v.filter(Odd{}).size(), 2000u);
  std::uint64_t sum = 0;
  v.for_each([&](std::size_t, const std::uint64_t& x) { sum += x; });
  EXPECT_EQ(sum, 4000ull * 3999 / 2);
  EXPECT_EQ(manager.stats().misses, before);
}
