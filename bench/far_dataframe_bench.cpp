// rdmx-bench-dataframe: AIFM's DataFrame evaluation (section 8.3) on
// far::Vector. A generated NYC-taxi-like table (vendor, pickup and dropoff
// times, passengers, distance, coordinates, fare, store-and-forward flag)
// is kept column by column, and the nine analysis steps of the C++
// DataFrame library's taxi example run over it:
//   1 trips per vendor, distinct pickup latitudes
//   2 passengers and fares of vendor 1's trips (select, shuffle, group-by)
//   3 the same for vendor 2
//   4 trip durations: a new column, its sum, least and greatest
//   5 store-and-forward trips: their share, durations per vendor
//   6 haversine distance column: its sum, least, greatest, trips over 10 km
//   7 pickup hour, weekday and month columns; trips and durations per hour
//   8 durations per weekday (the library's group-by: copy, select, shuffle, aggregate)
//   9 durations per month (the same)
// Variants: `local` (std::vector, everything in memory), `far` (far
// vectors, every operation run here through the cache) and `far_offload`
// (copy, select, shuffle and aggregations run on the server), the far ones
// with the local budget at each --fractions of the table (default 0.25 and
// 0.10). Every variant's results are checked against the local one's
// ("verified"). Process 0 computes, the last process serves.
// Each variant runs --repeat times (default 3, 1 with --quick); the run with
// the median total is reported.
//   --trips=N (default 10M)  --fractions=F,F  --repeat=N  --quick (200k trips)  --path=one-sided|two-sided
#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <functional>
#include <numeric>
#include <random>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "json.hpp"
#include "rdmx/core/env.hpp"
#include "rdmx/core/error.hpp"
#include "rdmx/fabric/job.hpp"
#include "rdmx/far/vector.hpp"

namespace {

using Clock = std::chrono::steady_clock;
using rdmx::bench::JsonLine;
namespace far = rdmx::far;

struct Options {
  std::size_t trips = 10'000'000;
  std::vector<double> fractions{0.25, 0.10};
  far::Path path = far::Path::one_sided;
  std::size_t repeat = 3;  // runs per variant; the median is reported
};

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--quick") {
      o.trips = 200'000;
      o.repeat = 1;
    } else if (a.rfind("--trips=", 0) == 0) {
      o.trips = rdmx::env::parse_count(a.substr(8), "--trips");
      if (o.trips < 1000 || o.trips > 200'000'000) throw rdmx::Error(rdmx::Errc::invalid_argument, "--trips wants 1000 to 200M");
    } else if (a.rfind("--fractions=", 0) == 0) {
      o.fractions.clear();
      std::stringstream list(a.substr(12));
      for (std::string f; std::getline(list, f, ',');) {
        const double x = std::stod(f);
        if (!(x > 0 && x <= 1)) throw rdmx::Error(rdmx::Errc::invalid_argument, "--fractions wants values in (0, 1]");
        o.fractions.push_back(x);
      }
    } else if (a.rfind("--repeat=", 0) == 0) {
      o.repeat = rdmx::env::parse_count(a.substr(9), "--repeat");
      if (o.repeat < 1 || o.repeat > 100) throw rdmx::Error(rdmx::Errc::invalid_argument, "--repeat wants 1 to 100");
    } else if (a.rfind("--path=", 0) == 0) {
      o.path = far::parse_path(a.substr(7), "--path");
    } else {
      throw rdmx::Error(rdmx::Errc::invalid_argument, "unknown argument '" + a +
                                                          "'\nusage: rdmx-bench-dataframe [--trips=N] [--fractions=F,F] [--repeat=N] [--path=P] [--quick]");
    }
  }
  return o;
}

// Bytes per trip of every column the analysis holds at its end: the table
// (1 + 8 + 8 + 1 + 6 * 8 + 1) and the derived duration, distance, hour,
// weekday and month. The local budget is a fraction of this.
constexpr std::size_t trip_bytes = 67 + 8 + 8 + 3;

// ---- The two backends the steps run on. --------------------------------

struct Local {
  template <class T>
  using Col = std::vector<T>;
  template <class T>
  Col<T> column() const {
    return {};
  }
  template <class T>
  static void append(Col<T>& c, const std::vector<T>& items) {
    c.insert(c.end(), items.begin(), items.end());
  }
  template <class T>
  static Col<T> copy(const Col<T>& c) {
    return c;
  }
  template <class T, class Pred>
  static Col<std::uint64_t> where(const Col<T>& c, const Pred& pred) {
    Col<std::uint64_t> out;
    for (std::size_t i = 0; i < c.size(); ++i)
      if (pred(c[i])) out.push_back(i);
    return out;
  }
  template <class T>
  static Col<T> gather(const Col<T>& c, const Col<std::uint64_t>& index) {
    Col<T> out;
    out.reserve(index.size());
    for (std::uint64_t i : index) out.push_back(c.at(i));
    return out;
  }
  template <class T, class Op>
  static typename Op::Result reduce(const Col<T>& c, const Op& op) {
    typename Op::Result r = op.identity();
    op.fold(r, c.data(), c.size());
    return r;
  }
  template <class K, class V, class Op>
  static typename Op::Result group_by(const Col<K>& keys, const Col<V>& values, const Op& op) {
    typename Op::Result r = op.identity();
    for (std::size_t i = 0; i < keys.size(); ++i) op.fold(r, keys[i], values[i]);
    return r;
  }
  // out[i] = fn(cols[i]...)
  template <class R, class F, class... T>
  Col<R> map(F&& fn, const Col<T>&... cols) const {
    const std::size_t n = std::min({cols.size()...});
    Col<R> out(n);
    for (std::size_t i = 0; i < n; ++i) out[i] = fn(cols[i]...);
    return out;
  }
};

struct Far {
  far::Run run;
  std::size_t server;
  template <class T>
  using Col = far::Vector<T>;
  template <class T>
  Col<T> column() const {
    return Col<T>(server);
  }
  template <class T>
  static void append(Col<T>& c, const std::vector<T>& items) {
    c.append(items);
  }
  template <class T>
  Col<T> copy(const Col<T>& c) const {
    return c.copy(run);
  }
  template <class T, class Pred>
  Col<std::uint64_t> where(const Col<T>& c, const Pred& pred) const {
    return c.where(pred, run);
  }
  template <class T>
  Col<T> gather(const Col<T>& c, const Col<std::uint64_t>& index) const {
    return c.gather(index, run);
  }
  template <class T, class Op>
  typename Op::Result reduce(const Col<T>& c, const Op& op) const {
    return c.reduce(op, run);
  }
  template <class K, class V, class Op>
  typename Op::Result group_by(const Col<K>& keys, const Col<V>& values, const Op& op) const {
    return keys.group_by(values, op, run);
  }
  // Here in both far variants (AIFM offloads no element-wise maps): the
  // inputs stream through the cache, a window ahead, and the output is
  // appended a chunk at a time. The loop runs over spans: from element i,
  // as far as every input's chunk and the output batch go, with plain
  // pointers (the chunks stay pinned while their reader's window holds them).
  template <class R, class F, class... T>
  Col<R> map(F&& fn, const Col<T>&... cols) const {
    const std::size_t n = std::min({cols.size()...});
    Col<R> out(server);
    std::tuple<typename Col<T>::Reader...> readers{typename Col<T>::Reader(cols)...};
    std::vector<R> batch(Col<R>::per_chunk);
    std::size_t filled = 0;
    for (std::size_t i = 0; i < n;) {
      const std::size_t len =
          std::min({n - i, Col<R>::per_chunk - filled, (Col<T>::per_chunk - i % Col<T>::per_chunk)...});
      const auto inputs = std::apply(
          [&](auto&... r) { return std::tuple{(r.items(i / Col<T>::per_chunk) + i % Col<T>::per_chunk)...}; }, readers);
      std::apply(
          [&](const auto*... in) {
            for (std::size_t k = 0; k < len; ++k) batch[filled + k] = fn(in[k]...);
          },
          inputs);
      i += len;
      filled += len;
      if (filled == batch.size()) {
        out.append(batch);
        filled = 0;
      }
    }
    out.append(std::span<const R>(batch.data(), filled));
    return out;
  }
};

// ---- The table. -----------------------------------------------------------

template <class B>
struct Table {
  explicit Table(const B& b)
      : vendor(b.template column<std::uint8_t>()), passengers(b.template column<std::uint8_t>()),
        store_fwd(b.template column<std::uint8_t>()), pickup(b.template column<std::int64_t>()),
        dropoff(b.template column<std::int64_t>()), distance(b.template column<double>()), pickup_lon(b.template column<double>()),
        pickup_lat(b.template column<double>()), dropoff_lon(b.template column<double>()),
        dropoff_lat(b.template column<double>()), fare(b.template column<double>()) {}
  typename B::template Col<std::uint8_t> vendor, passengers, store_fwd;
  typename B::template Col<std::int64_t> pickup, dropoff;  // seconds since 1970
  typename B::template Col<double> distance, pickup_lon, pickup_lat, dropoff_lon, dropoff_lat, fare;
};

// NYC-like trips with a fixed seed: two vendors, 2016 pickups, coordinates
// on a 1e-4 degree grid around Manhattan, durations and fares that follow
// the distance. Generated in batches, so a far table is appended a chunk at
// a time and the generator never holds the table.
template <class B>
Table<B> generate(const B& b, std::size_t trips) {
  Table<B> t(b);
  std::mt19937_64 rng(2016);
  std::uniform_real_distribution<double> unit(0, 1);
  constexpr std::int64_t year_2016 = 1451606400;
  constexpr std::size_t batch = 1 << 16;
  for (std::size_t first = 0; first < trips; first += batch) {
    const std::size_t n = std::min(batch, trips - first);
    std::vector<std::uint8_t> vendor(n), passengers(n), store_fwd(n);
    std::vector<std::int64_t> pickup(n), dropoff(n);
    std::vector<double> distance(n), plon(n), plat(n), dlon(n), dlat(n), fare(n);
    for (std::size_t i = 0; i < n; ++i) {
      vendor[i] = static_cast<std::uint8_t>(1 + (rng() % 100 < 53));
      passengers[i] = static_cast<std::uint8_t>(1 + std::min<std::uint64_t>(rng() % 10, rng() % 6));
      store_fwd[i] = rng() % 200 == 0 ? 'Y' : 'N';
      pickup[i] = year_2016 + static_cast<std::int64_t>(rng() % (366 * 86400));
      const auto grid = [&](double lo, double span) { return std::round((lo + span * unit(rng)) * 1e4) / 1e4; };
      plat[i] = grid(40.60, 0.25);
      plon[i] = grid(-74.05, 0.30);
      dlat[i] = grid(40.60, 0.25);
      dlon[i] = grid(-74.05, 0.30);
      distance[i] = std::round((0.3 + 15 * unit(rng) * unit(rng)) * 100) / 100;
      dropoff[i] = pickup[i] + static_cast<std::int64_t>(distance[i] * (120 + rng() % 240));
      fare[i] = std::round((2.5 + 2.5 * distance[i] + 0.5 * (rng() % 10)) * 100) / 100;
    }
    B::append(t.vendor, vendor), B::append(t.passengers, passengers), B::append(t.store_fwd, store_fwd);
    B::append(t.pickup, pickup), B::append(t.dropoff, dropoff), B::append(t.distance, distance);
    B::append(t.pickup_lon, plon), B::append(t.pickup_lat, plat), B::append(t.dropoff_lon, dlon);
    B::append(t.dropoff_lat, dlat), B::append(t.fare, fare);
  }
  return t;
}

// ---- Offloadable predicates and aggregations (trivially copyable). ---------

struct Equals {
  std::uint8_t value;
  bool operator()(const std::uint8_t& x) const { return x == value; }
};
// Which 1e-4 degree grid values occur, as a bitmap (the distinct count).
struct DistinctGrid {
  static constexpr std::size_t cells = 4096;
  using Result = std::array<std::uint64_t, cells / 64>;
  double low;
  Result identity() const { return Result{}; }
  void fold(Result& r, const double* items, std::size_t n) const {
    for (std::size_t i = 0; i < n; ++i) {
      const auto cell = static_cast<std::size_t>(std::llround((items[i] - low) * 1e4));
      if (cell < cells) r[cell / 64] |= std::uint64_t{1} << (cell % 64);
    }
  }
  void combine(Result& r, const Result& part) const {
    for (std::size_t k = 0; k < r.size(); ++k) r[k] |= part[k];
  }
};
struct Longer {
  bool operator()(const double& x) const { return x > 10; }
};

double haversine(double lat1, double lon1, double lat2, double lon2) {
  constexpr double rad = M_PI / 180;
  const double dlat = (lat2 - lat1) * rad, dlon = (lon2 - lon1) * rad;
  const double a = std::pow(std::sin(dlat / 2), 2) + std::pow(std::sin(dlon / 2), 2) * std::cos(lat1 * rad) * std::cos(lat2 * rad);
  return 6371 * 2 * std::asin(std::sqrt(a));
}

// ---- The nine steps. -------------------------------------------------------

// What the steps computed, in order, for the variants to be compared.
struct Digest {
  std::vector<double> values;
  template <class V>
  void stats(const V& groups) {
    for (const auto& g : groups) {
      values.push_back(static_cast<double>(g.count));
      if (g.count != 0) values.push_back(static_cast<double>(g.sum)), values.push_back(static_cast<double>(g.min)),
          values.push_back(static_cast<double>(g.max));
    }
  }
};

template <class B>
std::array<double, 9> analyze(const B& b, const Table<B>& t, Digest& d) {
  std::array<double, 9> seconds{};
  auto at = Clock::now();
  const auto lap = [&](int step) {
    const auto now = Clock::now();
    seconds[step - 1] = std::chrono::duration<double>(now - at).count();
    at = now;
  };

  // 1: trips (and fares) per vendor; distinct pickup latitudes.
  d.stats(b.group_by(t.vendor, t.fare, far::GroupBy<std::uint8_t, double, 3>{}));
  std::size_t distinct = 0;
  for (std::uint64_t w : b.reduce(t.pickup_lat, DistinctGrid{40.60})) distinct += static_cast<std::size_t>(__builtin_popcountll(w));
  d.values.push_back(static_cast<double>(distinct));
  lap(1);

  // 2, 3: one vendor's trips (a selection, each needed column shuffled by
  // it), their passenger counts with the fares per count.
  for (std::uint8_t vendor : {1, 2}) {
    const auto selected = b.where(t.vendor, Equals{vendor});
    const auto passengers = b.gather(t.passengers, selected);
    const auto fares = b.gather(t.fare, selected);
    d.stats(b.group_by(passengers, fares, far::GroupBy<std::uint8_t, double, 16>{}));
    lap(1 + vendor);
  }

  // 4: durations.
  const auto duration = b.template map<std::int64_t>([](std::int64_t p, std::int64_t q) { return q - p; }, t.pickup, t.dropoff);
  d.stats(std::array{b.reduce(duration, far::Summary<std::int64_t>{})});
  lap(4);

  // 5: store-and-forward trips: how many, their durations per vendor.
  {
    const auto selected = b.where(t.store_fwd, Equals{'Y'});
    d.values.push_back(static_cast<double>(selected.size()));
    d.stats(b.group_by(b.gather(t.vendor, selected), b.gather(duration, selected), far::GroupBy<std::uint8_t, std::int64_t, 3>{}));
  }
  lap(5);

  // 6: haversine distance column.
  const auto km = b.template map<double>(haversine, t.pickup_lat, t.pickup_lon, t.dropoff_lat, t.dropoff_lon);
  d.stats(std::array{b.reduce(km, far::Summary<double>{})});
  d.values.push_back(static_cast<double>(b.reduce(km, far::Count<double, Longer>{})));
  lap(6);

  // 7: pickup hour, weekday and month; trips and durations per hour.
  const auto civil = [](std::int64_t s) {
    const std::time_t time = s;
    std::tm tm{};
    gmtime_r(&time, &tm);
    return tm;
  };
  const auto hour = b.template map<std::uint8_t>([](std::int64_t s) { return static_cast<std::uint8_t>(s / 3600 % 24); }, t.pickup);
  const auto weekday = b.template map<std::uint8_t>([](std::int64_t s) { return static_cast<std::uint8_t>((s / 86400 + 4) % 7); }, t.pickup);
  const auto month = b.template map<std::uint8_t>([&](std::int64_t s) { return static_cast<std::uint8_t>(civil(s).tm_mon); }, t.pickup);
  d.stats(b.group_by(hour, duration, far::GroupBy<std::uint8_t, std::int64_t, 24>{}));
  lap(7);

  // 8, 9: durations per weekday, per month, as the library groups: a copy
  // of the columns, then per key a selection, its shuffle and the aggregate.
  const auto by_key = [&](const auto& key_column, std::uint8_t keys) {
    const auto keys_copy = b.copy(key_column);
    const auto durations = b.copy(duration);
    for (std::uint8_t k = 0; k < keys; ++k) {
      const auto selected = b.where(keys_copy, Equals{k});
      const auto group = b.gather(durations, selected);
      d.stats(std::array{b.reduce(group, far::Summary<std::int64_t>{})});
    }
  };
  by_key(weekday, 7);
  lap(8);
  by_key(month, 12);
  lap(9);
  return seconds;
}

// Counts exact, sums of doubles to 1e-9 relative (they add in another order).
bool agree(const Digest& a, const Digest& b) {
  if (a.values.size() != b.values.size()) return false;
  for (std::size_t i = 0; i < a.values.size(); ++i)
    if (std::abs(a.values[i] - b.values[i]) > 1e-9 * std::max(1.0, std::abs(a.values[i]))) return false;
  return true;
}

// Runs the steps o.repeat times; the median run's step times, and whether
// every run's results agree with `expected` (none given: the first run's).
template <class B>
std::pair<std::array<double, 9>, bool> measure(const B& b, const Table<B>& t, const Options& o, Digest& expected) {
  std::vector<std::array<double, 9>> runs;
  bool verified = true;
  for (std::size_t r = 0; r < o.repeat; ++r) {
    Digest d;
    runs.push_back(analyze(b, t, d));
    if (expected.values.empty()) expected = d;
    verified = verified && agree(d, expected);
  }
  const auto total = [](const std::array<double, 9>& s) { return std::accumulate(s.begin(), s.end(), 0.0); };
  std::sort(runs.begin(), runs.end(), [&](const auto& x, const auto& y) { return total(x) < total(y); });
  return {runs[runs.size() / 2], verified};
}

void report(const JsonLine& common, const Options& o, const char* variant, double fraction, const std::array<double, 9>& steps,
            bool verified) {
  double total = 0;
  for (double s : steps) total += s;
  JsonLine line = common.with("variant", variant)
                      .field("path", far::to_string(o.path))
                      .field("size", o.trips)
                      .field("outstanding", 1)
                      .field("local_fraction", fraction)
                      .field("threads", 1)
                      .field("repeats", o.repeat);
  line.with("metric", "seconds").field("value", total).field("verified", verified).print();
  for (std::size_t s = 0; s < steps.size(); ++s)
    line.with("step", static_cast<int>(s + 1)).field("metric", "step_seconds").field("value", steps[s]).print();
  // One write: the launcher interleaves stderr with the JSON lines on stdout.
  char text[256];
  int n = std::snprintf(text, sizeof text, "dataframe %-11s local %.2f  %7.3f s  (", variant, fraction, total);
  for (double s : steps) n += std::snprintf(text + n, sizeof text - static_cast<std::size_t>(n), " %.3f", s);
  std::snprintf(text + n, sizeof text - static_cast<std::size_t>(n), " )%s\n", verified ? "  verified" : "  WRONG RESULTS");
  std::fflush(stdout);
  std::fputs(text, stderr);
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  try {
    o = parse(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rdmx-bench-dataframe: %s\n", e.what());
    return 2;
  }
  // The server's region holds the table, the derived columns and the
  // temporaries; the compute process's cache up to the table. Each is one
  // registered chunk (a segment of its own): the arena must be allowed to
  // hold them (unless the user set its maximum).
  const std::size_t table = o.trips * trip_bytes;
  const std::size_t region = (table * 5 / 2 + (64 << 20)) / (64 << 20) * (64 << 20);
  setenv("RDMX_ARENA_MAX", std::to_string(3 * region).c_str(), 0);
  rdmx::Job job(argc, argv);
  try {
    // AIFM's set-up: one compute process, one memory server. More processes would each
    // take an equal share of the one server's region and leave the computing one short.
    if (job.size() != 2)
      throw rdmx::Error(rdmx::Errc::invalid_argument, "exactly 2 processes are needed (a compute and a server), not " +
                                                          std::to_string(job.size()) + " (RDMX_BENCH_NP=2)");
    const char* tls_env = std::getenv("UCX_TLS");
    const std::string tls = tls_env != nullptr && std::string(tls_env).find("tcp") != std::string::npos ? "tcp" : "shm";
    JsonLine common;
    common.field("bench", "far").field("tls", tls).field("case", "dataframe");

    Digest expected;
    bool all_verified = true;
    if (job.rank() == 0) {
      const Local local;
      const Table<Local> t = generate(local, o.trips);
      const auto [steps, verified] = measure(local, t, o, expected);
      report(common, o, "local", 1.0, steps, verified);
      all_verified = verified;
    }
    for (double fraction : o.fractions) {
      far::Config config;
      config.servers = {job.size() - 1};
      config.path = o.path;
      config.region_bytes = region;
      config.cache_bytes = std::max<std::size_t>(static_cast<std::size_t>(fraction * static_cast<double>(table)), 1 << 20);
      far::Manager manager(job, config);
      if (job.rank() != 0) continue;  // serve until the Manager's barrier
      const Far plain{far::Run::here, 0};
      const Table<Far> t = generate(plain, o.trips);
      for (const Far& b : {plain, Far{far::Run::offloaded, 0}}) {
        const auto [steps, verified] = measure(b, t, o, expected);
        all_verified = all_verified && verified;
        report(common, o, b.run == far::Run::here ? "far" : "far_offload", fraction, steps, verified);
      }
    }
    if (!all_verified) throw rdmx::Error(rdmx::Errc::protocol, "a far variant's results differ from the local variant's");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rdmx-bench-dataframe: %s\n", e.what());
    return 1;
  }
  return 0;
}
