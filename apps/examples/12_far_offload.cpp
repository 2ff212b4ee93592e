// 12_far_offload: whole-vector operations run where far data lives.
//   scripts/run --tls shm -np 2 build/apps/examples/rdmx-example-12-far-offload
// A far::Vector keeps its chunks, and a directory of them, on one server.
// filter, where, gather, reduce and group_by then run on that server's CPU
// (AIFM's remote agent) and only their results cross the network. Each
// also runs here, through the cache (Run::here), with the same result.
#include <chrono>
#include <cstdio>
#include <random>
#include <vector>

#include "rdmx/core/error.hpp"
#include "rdmx/fabric/job.hpp"
#include "rdmx/far/vector.hpp"

// Predicates travel to the server by value: trivially copyable, no pointers.
struct Below {
  double limit;
  bool operator()(const double& fare) const { return fare < limit; }
};
struct Is {
  std::uint32_t passengers;
  bool operator()(const std::uint32_t& p) const { return p == passengers; }
};

int main(int argc, char** argv) {
  try {
    rdmx::Job job(argc, argv);
    rdmx::far::Config config;
    config.cache_bytes = 256 << 10;
    rdmx::far::Manager far(job, config);
    if (far.serving()) return 0;
    namespace f = rdmx::far;
    using Clock = std::chrono::steady_clock;

    // Two columns of 300000 trips (2.4 MiB of fares), generated here.
    f::Vector<double> fares;
    f::Vector<std::uint32_t> passengers;
    std::vector<double> local_fares;
    std::vector<std::uint32_t> local_passengers;
    std::mt19937_64 rng(12);
    for (int i = 0; i < 300000; ++i) {
      local_fares.push_back(static_cast<double>(rng() % 6000) / 100.0);
      local_passengers.push_back(static_cast<std::uint32_t>(1 + rng() % 6));
    }
    fares.append(local_fares);
    passengers.append(local_passengers);
    std::uint64_t wrong = 0;

    // A filter on the server, and the same here: equal, element for element.
    auto t = Clock::now();
    const f::Vector<double> cheap = fares.filter(Below{10.0});
    const double offloaded_ms = std::chrono::duration<double, std::milli>(Clock::now() - t).count();
    t = Clock::now();
    const f::Vector<double> cheap_here = fares.filter(Below{10.0}, f::Run::here);
    const double here_ms = std::chrono::duration<double, std::milli>(Clock::now() - t).count();
    wrong += cheap.to_vector() != cheap_here.to_vector() ? 1 : 0;
    std::printf("filter: %zu of %zu fares below 10, offloaded %.1f ms, here %.1f ms\n", cheap.size(), fares.size(), offloaded_ms,
                here_ms);

    // Select by one column, gather another: the fares of single passengers.
    const f::Vector<std::uint64_t> singles = passengers.where(Is{1});
    const f::Vector<double> single_fares = fares.gather(singles);
    std::vector<double> expected;
    for (std::size_t i = 0; i < local_fares.size(); ++i)
      if (local_passengers[i] == 1) expected.push_back(local_fares[i]);
    wrong += single_fares.to_vector() != expected ? 1 : 0;

    // Aggregations: count, sum, least and greatest in one pass; per group too.
    const auto summary = fares.reduce(f::Summary<double>{});
    wrong += summary != fares.reduce(f::Summary<double>{}, f::Run::here) ? 1 : 0;
    const auto by_passengers = passengers.group_by(fares, f::GroupBy<std::uint32_t, double, 7>{});
    wrong += by_passengers != passengers.group_by(fares, f::GroupBy<std::uint32_t, double, 7>{}, f::Run::here) ? 1 : 0;
    for (std::uint32_t p = 1; p <= 6; ++p)
      std::printf("%u passenger(s): %llu trips, mean fare %.2f\n", p, static_cast<unsigned long long>(by_passengers[p].count),
                  by_passengers[p].sum / static_cast<double>(by_passengers[p].count));
    wrong += summary.count != local_fares.size() ? 1 : 0;

    if (wrong != 0) {
      std::fprintf(stderr, "12_far_offload: %llu results differ\n", static_cast<unsigned long long>(wrong));
      return 1;
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "12_far_offload: %s\n", e.what());
    return 1;
  }
  return 0;
}
