// far::HashTable<K, V>: a concurrent hash map whose entries live in far
// memory (AIFM's hash table). The index stays local: per entry its 64-bit
// hash and the far pointer to a {key, value} object, 16 bytes. A lookup
// finds its candidates in the index and dereferences only those, so it
// costs at most one miss (two only when two keys share all 64 bits of
// their hash). find_all looks up many keys with their misses in flight
// together: the way to hide a far lookup's latency without green threads.
//
//   far::HashTable<std::uint64_t, Record> table;
//   table.insert_or_assign(42, record);
//   if (auto r = table.find(42)) use(*r);
//   table.update(42, [](Record& r) { ++r.hits; });
//   std::vector<std::optional<Record>> out(keys.size());
//   table.find_all(keys, out);                 // one batch of misses
//
// Keys and values are trivially copyable (they move byte for byte) and
// {K, V} fits a far object (16 KiB). Every operation may be called from
// any thread of the process; the table must be destroyed before the far::Manager.
#pragma once
#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "rdmx/core/error.hpp"
#include "rdmx/far/pointer.hpp"

namespace rdmx::far {

template <class K, class V, class Hash = std::hash<K>, class KeyEqual = std::equal_to<K>>
class HashTable {
  static_assert(std::is_trivially_copyable_v<K> && std::is_trivially_copyable_v<V>,
                "rdmx::far::HashTable: keys and values must be trivially copyable (they move byte for byte)");

 public:
  struct Entry {
    K key;
    V value;
  };

  // `buckets`: the index's starting size (rounded up to a power of two); it
  // doubles when the table holds more than two entries per bucket.
  explicit HashTable(std::size_t buckets = 1024) : buckets_(std::bit_ceil(std::max<std::size_t>(buckets, stripes))) {}
  HashTable(const HashTable&) = delete;
  HashTable& operator=(const HashTable&) = delete;

  std::size_t size() const noexcept { return size_.load(std::memory_order_relaxed); }
  bool empty() const noexcept { return size() == 0; }
  std::size_t bucket_count() const {
    std::shared_lock whole(resize_);
    return buckets_.size();
  }

  // Inserts the pair, or replaces the value of an equal key; true if inserted.
  bool insert_or_assign(const K& key, const V& value) {
    const std::uint64_t h = hash_of(key);
    bool inserted = false;
    {
      std::shared_lock whole(resize_);
      std::unique_lock stripe(stripe_of(h));
      Bucket& bucket = bucket_of(h);
      if (IndexEntry* indexed = find_entry(bucket, h, key)) {
        DerefScope scope;
        indexed->entry.deref_mut(scope)->value = value;
        return false;
      }
      bucket.push_back(IndexEntry{h, make_unique<Entry>(Entry{key, value})});
      inserted = true;
    }
    if (size_.fetch_add(1, std::memory_order_relaxed) + 1 > 2 * buckets_size_.load(std::memory_order_relaxed)) grow();
    return inserted;
  }

  // A copy of the value of `key`, if present.
  std::optional<V> find(const K& key) const {
    std::optional<V> out;
    visit(key, [&](const V& v) { out = v; });
    return out;
  }
  bool contains(const K& key) const {
    return visit(key, [](const V&) {});
  }

  // fn(const V&) on the value of `key`, in place, while the entry is pinned
  // and the key's stripe is locked for reading; false if absent.
  template <class F>
  bool visit(const K& key, F&& fn) const {
    const std::uint64_t h = hash_of(key);
    std::shared_lock whole(resize_);
    std::shared_lock stripe(stripe_of(h));
    for (const IndexEntry& indexed : bucket_of(h)) {
      if (indexed.hash != h) continue;
      DerefScope scope;
      const Entry* e = indexed.entry.deref(scope);
      if (equal_(e->key, key)) {
        fn(static_cast<const V&>(e->value));
        return true;
      }
    }
    return false;
  }

  // fn(V&) on the value of `key`, in place (the entry becomes dirty), with
  // the key's stripe locked for writing; false if absent.
  template <class F>
  bool update(const K& key, F&& fn) {
    const std::uint64_t h = hash_of(key);
    std::shared_lock whole(resize_);
    std::unique_lock stripe(stripe_of(h));
    IndexEntry* indexed = find_entry(bucket_of(h), h, key);
    if (!indexed) return false;
    DerefScope scope;
    fn(indexed->entry.deref_mut(scope)->value);
    return true;
  }

  // Removes `key`; true if it was there. Its far object is freed.
  bool erase(const K& key) {
    const std::uint64_t h = hash_of(key);
    {
      std::shared_lock whole(resize_);
      std::unique_lock stripe(stripe_of(h));
      Bucket& bucket = bucket_of(h);
      IndexEntry* indexed = find_entry(bucket, h, key);
      if (!indexed) return false;
      // Swap with the last and drop it: order within a bucket means nothing.
      if (indexed != &bucket.back()) std::swap(*indexed, bucket.back());
      bucket.pop_back();
    }
    size_.fetch_sub(1, std::memory_order_relaxed);
    return true;
  }

  // out[i] = the value of keys[i], or nullopt. The entries' misses go out
  // `window` at a time (at most a quarter of the cache's worth), in flight
  // together; keys may repeat.
  void find_all(std::span<const K> keys, std::span<std::optional<V>> out, std::size_t window = 64) const {
    if (out.size() != keys.size())
      throw Error(Errc::invalid_argument, "far::HashTable::find_all: " + std::to_string(keys.size()) + " keys but " +
                                              std::to_string(out.size()) + " results");
    // A batch pins its entries: keep it to a quarter of the cache, so that
    // a large window cannot exhaust the budget on its own.
    const std::size_t entry_bytes = std::bit_ceil(std::max<std::size_t>(sizeof(Entry), min_object_bytes));
    window = std::clamp<std::size_t>(window, 1, std::max<std::size_t>(1, detail::config(detail::runtime()).cache_bytes / (4 * entry_bytes)));
    std::shared_lock whole(resize_);
    std::vector<std::uint64_t> hashes;
    std::vector<const UniquePtr<Entry>*> batch;
    std::vector<std::pair<std::size_t, std::size_t>> wants;  // (key index, batch index)
    for (std::size_t first = 0; first < keys.size(); first += window) {
      const std::size_t n = std::min(window, keys.size() - first);
      hashes.resize(n);
      for (std::size_t i = 0; i < n; ++i) hashes[i] = hash_of(keys[first + i]);
      // Readers' stripe locks are taken in one order, so two batches never
      // wait for each other; writers hold one stripe at a time.
      std::array<bool, stripes> locked{};
      for (std::uint64_t h : hashes) locked[stripe_index(h)] = true;
      for (std::size_t s = 0; s < stripes; ++s)
        if (locked[s]) stripes_[s].lock_shared();
      struct Unlock {
        const HashTable& table;
        const std::array<bool, stripes>& locked;
        ~Unlock() {
          for (std::size_t s = stripes; s-- > 0;)
            if (locked[s]) table.stripes_[s].unlock_shared();
        }
      } unlock{*this, locked};
      batch.clear();
      wants.clear();
      for (std::size_t i = 0; i < n; ++i) {
        out[first + i].reset();
        for (const IndexEntry& indexed : bucket_of(hashes[i])) {
          if (indexed.hash != hashes[i]) continue;
          auto at = std::find(batch.begin(), batch.end(), &indexed.entry);
          if (at == batch.end()) at = batch.insert(batch.end(), &indexed.entry);
          wants.emplace_back(first + i, static_cast<std::size_t>(at - batch.begin()));
        }
      }
      if (batch.empty()) continue;
      DerefScope scope;
      const std::vector<Entry*> entries = Prefetch<UniquePtr<Entry>>(scope, std::span<const UniquePtr<Entry>* const>(batch), Access::read).get();
      for (auto [k, b] : wants)
        if (!out[k] && equal_(entries[b]->key, keys[k])) out[k] = entries[b]->value;
    }
  }

  // Removes every entry.
  void clear() {
    std::unique_lock whole(resize_);
    for (Bucket& b : buckets_) b.clear();
    size_.store(0, std::memory_order_relaxed);
  }

 private:
  static constexpr std::size_t stripes = 64;  // locks over the buckets; a power of two
  struct IndexEntry {  // the local index's entry for one far object
    std::uint64_t hash;
    UniquePtr<Entry> entry;
  };
  using Bucket = std::vector<IndexEntry>;

  std::uint64_t hash_of(const K& key) const {
    // Spread std::hash's identity on integers over the bits the index uses.
    std::uint64_t h = static_cast<std::uint64_t>(hasher_(key));
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ULL;
    return h ^ (h >> 33);
  }
  bool equal_(const K& a, const K& b) const { return key_equal_(a, b); }
  // A bucket's stripe is its index's low bits. The index has a multiple of
  // `stripes` buckets and doubles, so a key's bucket moves only by multiples
  // of that size: its stripe never changes, and one stripe guards every key
  // of a bucket.
  static std::size_t stripe_index(std::uint64_t h) noexcept { return (h >> 6) & (stripes - 1); }
  std::shared_mutex& stripe_of(std::uint64_t h) const { return stripes_[stripe_index(h)]; }
  Bucket& bucket_of(std::uint64_t h) { return buckets_[(h >> 6) & (buckets_.size() - 1)]; }
  const Bucket& bucket_of(std::uint64_t h) const { return buckets_[(h >> 6) & (buckets_.size() - 1)]; }

  IndexEntry* find_entry(Bucket& bucket, std::uint64_t h, const K& key) {
    for (IndexEntry& indexed : bucket) {
      if (indexed.hash != h) continue;
      DerefScope scope;
      if (equal_(indexed.entry.deref(scope)->key, key)) return &indexed;
    }
    return nullptr;
  }

  // Doubles the index: only the local index entries move, the far objects stay.
  void grow() {
    std::unique_lock whole(resize_);
    if (size_.load(std::memory_order_relaxed) <= 2 * buckets_.size()) return;  // another thread grew it
    std::vector<Bucket> next(buckets_.size() * 2);
    for (Bucket& b : buckets_)
      for (IndexEntry& indexed : b) next[(indexed.hash >> 6) & (next.size() - 1)].push_back(std::move(indexed));
    buckets_ = std::move(next);
    buckets_size_.store(buckets_.size(), std::memory_order_relaxed);
  }

  [[no_unique_address]] Hash hasher_;
  [[no_unique_address]] KeyEqual key_equal_;
  mutable std::shared_mutex resize_;  // shared by every operation, exclusive to grow and clear
  mutable std::array<std::shared_mutex, stripes> stripes_;
  std::vector<Bucket> buckets_;
  std::atomic<std::size_t> buckets_size_{buckets_.size()};
  std::atomic<std::size_t> size_{0};
};

}  // namespace rdmx::far
