// 11_far_data_structures: a far array scanned with a prefetcher, and a far hash table.
//   scripts/run --tls shm -np 2 build/apps/examples/rdmx-example-11-far-data-structures
// far::Array groups its elements into chunk objects; element access that
// keeps one stride (here every third chunk) is detected, and the chunks
// along it are fetched before they are reached. far::HashTable keeps its
// index local and its entries far: a lookup costs at most one miss, and
// find_all looks up many keys with their misses in flight together.
#include <cstdio>
#include <optional>
#include <random>
#include <unordered_map>
#include <vector>

#include "rdmx/core/error.hpp"
#include "rdmx/fabric/job.hpp"
#include "rdmx/far/array.hpp"
#include "rdmx/far/hash_table.hpp"

struct Account {
  std::uint64_t balance = 0;
  std::uint32_t updates = 0;
};

int main(int argc, char** argv) {
  try {
    rdmx::Job job(argc, argv);
    rdmx::far::Config config;
    config.cache_bytes = 256 << 10;
    config.prefetch_depth = 8;  // chunks fetched ahead along a detected stride (RDMX_FAR_PREFETCH)
    rdmx::far::Manager far(job, config);
    if (far.serving()) return 0;
    std::uint64_t wrong = 0;

    // An array of 2 MiB, eight times the budget, in 4 KiB chunks of 512 elements.
    rdmx::far::Array<std::uint64_t> squares(1 << 18);
    squares.for_each_mut([](std::size_t i, std::uint64_t& x) { x = i * i; });  // a window of chunks in flight
    const std::uint64_t prefetched_before = far.stats().prefetched;
    for (std::size_t i = 0; i < squares.size(); i += 3 * 512 + 5) {  // every third chunk
      rdmx::far::DerefScope scope;
      wrong += squares.at(scope, i) != i * i ? 1 : 0;
    }
    const rdmx::far::Stats after_scan = far.stats();
    std::printf("strided scan: %llu chunks fetched ahead, %llu of them used\n",
                static_cast<unsigned long long>(after_scan.prefetched - prefetched_before),
                static_cast<unsigned long long>(after_scan.prefetch_hits));

    // A hash table of 10000 accounts, 2.5 times the budget, against std::unordered_map.
    rdmx::far::HashTable<std::uint64_t, Account> accounts;
    std::unordered_map<std::uint64_t, Account> shadow;
    std::mt19937_64 rng(11);
    for (int op = 0; op < 40000; ++op) {
      const std::uint64_t key = rng() % 10000, amount = rng() % 100;
      if (!accounts.update(key, [&](Account& a) { a.balance += amount, ++a.updates; }))
        accounts.insert_or_assign(key, Account{amount, 1});
      Account& s = shadow[key];
      s.balance += amount, ++s.updates;
    }
    std::vector<std::uint64_t> keys;
    for (const auto& [key, account] : shadow) keys.push_back(key);
    std::vector<std::optional<Account>> found(keys.size());
    accounts.find_all(keys, found);  // 64 lookups at a time, their misses in flight together
    for (std::size_t i = 0; i < keys.size(); ++i) {
      const Account& s = shadow.at(keys[i]);
      wrong += !found[i] || found[i]->balance != s.balance || found[i]->updates != s.updates ? 1 : 0;
    }
    wrong += accounts.size() != shadow.size() ? 1 : 0;
    wrong += accounts.find(10001).has_value() ? 1 : 0;  // never inserted
    std::printf("%zu accounts checked against std::unordered_map, %llu misses in all\n", accounts.size(),
                static_cast<unsigned long long>(far.stats().misses));

    if (wrong != 0 || after_scan.prefetch_hits == 0) {
      std::fprintf(stderr, "11_far_data_structures: %llu wrong values, %llu prefetch hits\n", static_cast<unsigned long long>(wrong),
                   static_cast<unsigned long long>(after_scan.prefetch_hits));
      return 1;
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "11_far_data_structures: %s\n", e.what());
    return 1;
  }
  return 0;
}
