// far::HashTable in one process, over the in-process device, with a cache
// far smaller than the table: every check below also crosses evictions.
#include <gtest/gtest.h>

#include <atomic>
#include <optional>
#include <random>
#include <thread>
#include <unordered_map>
#include <vector>

#include "../error_from.hpp"
#include "rdmx/far/hash_table.hpp"

using namespace rdmx;
using namespace rdmx::far;

namespace {
Config small_cache(std::size_t cache = 64 * 1024) {
  Config c;
  c.cache_bytes = cache;
  c.region_bytes = 16 << 20;
  return c;
}
struct Record {
  std::uint64_t id;
  std::uint64_t hits;
  char pad[48];
};
// Every key in one bucket with one hash: only the key comparison tells them apart.
struct Collide {
  std::size_t operator()(std::uint64_t) const noexcept { return 7; }
};
}  // namespace

TEST(FarHashTable, RandomOperationsAgreeWithUnorderedMap) {
  Manager manager(make_local_device(2, 16 << 20), small_cache());
  HashTable<std::uint64_t, Record> table(16);
  std::unordered_map<std::uint64_t, Record> shadow;
  std::mt19937_64 rng(1);
  for (int op = 0; op < 40000; ++op) {
    const std::uint64_t key = rng() % 4000;
    switch (rng() % 5) {
      case 0:
      case 1: {
        const Record r{key, rng(), {}};
        EXPECT_EQ(table.insert_or_assign(key, r), !shadow.contains(key));
        shadow[key] = r;
        break;
      }
      case 2: {
        const auto found = table.find(key);
        const auto it = shadow.find(key);
        ASSERT_EQ(found.has_value(), it != shadow.end()) << "key " << key;
        if (found) EXPECT_EQ(found->hits, it->second.hits);
        break;
      }
      case 3:
        EXPECT_EQ(table.update(key, [](Record& r) { ++r.hits; }), shadow.contains(key));
        if (auto it = shadow.find(key); it != shadow.end()) ++it->second.hits;
        break;
      default:
        EXPECT_EQ(table.erase(key), shadow.erase(key) == 1);
    }
  }
  EXPECT_EQ(table.size(), shadow.size());
  EXPECT_GT(table.bucket_count(), 16u);
  // The table is 4000 x 64 B against a 64 KiB cache: most entries were evicted.
  EXPECT_GT(manager.stats().misses, 1000u);

  std::vector<std::uint64_t> keys;
  for (std::uint64_t k = 0; k < 4100; ++k) keys.push_back(k % 4000 == 5 ? 5 : k);  // absent keys and repeats
  std::vector<std::optional<Record>> out(keys.size());
  table.find_all(keys, out, 1000);  // larger than the cache allows: the table narrows it
  for (std::size_t i = 0; i < keys.size(); ++i) {
    const auto it = shadow.find(keys[i]);
    ASSERT_EQ(out[i].has_value(), it != shadow.end()) << "key " << keys[i];
    if (out[i]) {
      EXPECT_EQ(out[i]->id, keys[i]);
      EXPECT_EQ(out[i]->hits, it->second.hits);
    }
  }
}

TEST(FarHashTable, KeysWithOneHashAreToldApart) {
  Manager manager(make_local_device(1, 16 << 20), small_cache());
  HashTable<std::uint64_t, std::uint64_t, Collide> table;
  for (std::uint64_t k = 0; k < 300; ++k) EXPECT_TRUE(table.insert_or_assign(k, k * 3));
  EXPECT_FALSE(table.insert_or_assign(10, 1));
  EXPECT_TRUE(table.erase(11));
  EXPECT_FALSE(table.erase(11));
  EXPECT_EQ(table.find(10), 1u);
  EXPECT_FALSE(table.find(11));
  EXPECT_EQ(table.find(299), 897u);
  std::vector<std::uint64_t> keys{299, 11, 10, 0, 400, 0};
  std::vector<std::optional<std::uint64_t>> out(keys.size());
  table.find_all(keys, out);
  EXPECT_EQ(out[0], 897u);
  EXPECT_FALSE(out[1]);
  EXPECT_EQ(out[2], 1u);
  EXPECT_EQ(out[3], 0u);
  EXPECT_FALSE(out[4]);
  EXPECT_EQ(out[5], 0u);
  EXPECT_EQ(table.size(), 299u);
}

TEST(FarHashTable, BadArgumentsAreClearErrors) {
  Manager manager(make_local_device(1, 16 << 20), small_cache());
  HashTable<int, int> table;
  std::vector<int> keys{1, 2, 3};
  std::vector<std::optional<int>> out(2);
  const Error e = rdmx::testing::error_from([&] { table.find_all(keys, out); });
  EXPECT_EQ(e.code(), Errc::invalid_argument);
  EXPECT_NE(std::string(e.what()).find("3 keys but 2 results"), std::string::npos) << e.what();
}

TEST(FarHashTable, NeedsAManager) {
  const Error e = rdmx::testing::error_from([] {
    HashTable<int, int> table;
    table.insert_or_assign(1, 1);
  });
  EXPECT_EQ(e.code(), Errc::invalid_argument);
}

// Writers grow the table while readers look up in batches and updaters
// count: nothing is lost, no count is missed.
TEST(FarHashTable, ConcurrentWritersReadersAndUpdaters) {
  Manager manager(make_local_device(2, 16 << 20), small_cache(128 * 1024));
  HashTable<std::uint64_t, Record> table(8);
  constexpr std::uint64_t per_writer = 1500, counters = 16, bumps = 2000;
  for (std::uint64_t c = 0; c < counters; ++c) table.insert_or_assign(1'000'000 + c, Record{c, 0, {}});
  std::atomic<std::uint64_t> written[2] = {0, 0};
  std::atomic<bool> writing{true};
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int w = 0; w < 2; ++w)
    threads.emplace_back([&, w] {
      for (std::uint64_t i = 0; i < per_writer; ++i) {
        const std::uint64_t key = w * per_writer + i;
        table.insert_or_assign(key, Record{key, key * 2, {}});
        written[w].store(i + 1, std::memory_order_release);
      }
    });
  threads.emplace_back([&] {  // batches over what each writer has published
    std::mt19937_64 rng(2);
    while (writing.load()) {
      std::vector<std::uint64_t> keys;
      for (int w = 0; w < 2; ++w) {
        const std::uint64_t n = written[w].load(std::memory_order_acquire);
        for (int j = 0; j < 32 && n > 0; ++j) keys.push_back(w * per_writer + rng() % n);
      }
      std::vector<std::optional<Record>> out(keys.size());
      table.find_all(keys, out);
      for (std::size_t i = 0; i < keys.size(); ++i)
        if (!out[i] || out[i]->id != keys[i] || out[i]->hits != keys[i] * 2) ++wrong;
    }
  });
  for (int u = 0; u < 2; ++u)
    threads.emplace_back([&, u] {
      for (std::uint64_t i = 0; i < bumps; ++i)
        if (!table.update(1'000'000 + (i + u) % counters, [](Record& r) { ++r.hits; })) ++wrong;
    });
  threads[0].join();
  threads[1].join();
  writing = false;
  for (std::size_t t = 2; t < threads.size(); ++t) threads[t].join();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_EQ(table.size(), 2 * per_writer + counters);
  std::uint64_t total = 0;
  for (std::uint64_t c = 0; c < counters; ++c) total += table.find(1'000'000 + c)->hits;
  EXPECT_EQ(total, 2 * bumps);
  for (std::uint64_t key = 0; key < 2 * per_writer; ++key) {
    const auto r = table.find(key);
    ASSERT_TRUE(r) << key;
    EXPECT_EQ(r->hits, key * 2);
  }
}

TEST(FarHashTable, ClearFreesEveryEntry) {
  Manager manager(make_local_device(1, 1 << 20), small_cache());
  HashTable<std::uint64_t, Record> table;
  // An entry takes a 128-byte block; 1 MiB of region holds 8192: three rounds of 5000 fit only if clear frees them.
  for (int round = 0; round < 3; ++round) {
    for (std::uint64_t k = 0; k < 5000; ++k) table.insert_or_assign(k, Record{k, 0, {}});
    EXPECT_EQ(table.size(), 5000u);
    table.clear();
    EXPECT_TRUE(table.empty());
    EXPECT_FALSE(table.find(3));
  }
}
