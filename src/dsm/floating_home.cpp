// The floating home (MENPS II.B): a block's home moves to its last
// releaser. A releaser locks the home's owner word, takes the block over
// from the previous home with one get, merges its diff locally and leaves
// a link to itself behind; diffs are never written remotely.
#include <algorithm>
#include <atomic>
#include <cstring>
#include <string>
#include <vector>

#include "engine.hpp"
#include "rdmx/core/backoff.hpp"
#include "rdmx/core/error.hpp"
#include "rdmx/core/future.hpp"
#include "rdmx/core/log.hpp"
#include "rdmx/fabric/rma.hpp"

namespace rdmx::dsm {

namespace {
// Releasers compare blocks a word at a time; most of a block is unchanged.
bool same_word(const std::byte* a, const std::byte* b) {
  std::uint64_t x, y;
  std::memcpy(&x, a, 8);
  std::memcpy(&y, b, 8);
  return x == y;
}
}  // namespace

class Engine::FloatingHome final : public Home {
 public:
  explicit FloatingHome(Engine& engine) : e_(engine) {}

  // Where this process last saw the block's home.
  std::uint32_t probable_owner(std::uint32_t block) const noexcept override { return e_.link(block); }
  // Only this process's own releases change its home copy (a peer that
  // takes the block over reads it, never writes it): a block fetched from
  // there keeps the home copy's bytes until its next release here.
  bool home_copy_is_twin(std::uint32_t source) const noexcept override { return source == e_.rank_; }
  bool fast_release() const noexcept override { return e_.config_.keep > 0; }
  bool merge_leaves_newest() const noexcept override { return true; }
  void merge(std::span<const Merge> blocks) override;

 private:
  // One block, alone: its lock found by following links from the probable owner.
  void merge_one(std::uint32_t block, bool writable);
  void merge_into_home(std::uint32_t block, bool moved);
  void merge_writable(std::uint32_t block, bool moved);
  void report_race(std::uint32_t block, std::size_t at);

  Engine& e_;
};

std::unique_ptr<Home> Engine::make_floating_home() { return std::make_unique<FloatingHome>(*this); }

// Merges the blocks together: for the blocks this process was home of at
// its last release (their words are its own), every lock is asked for at
// once (each word expected as that release left it), then every lease word
// of those taken is read at once, the blocks are merged here, and every
// lock is given back at once: three round trips for the lot where one block
// at a time costs three each, which is what a release of many blocks spends
// its time on where a round trip is dear (TCP, a large machine's shared
// memory). The other blocks, and those whose word was not as expected
// (locked by another process, or taken since), are merged one at a time
// after the others, holding no other owner word, so no two releasers can
// wait on each other.
void Engine::FloatingHome::merge(std::span<const Merge> blocks) {
  if (blocks.size() <= 1) {
    for (const Merge& m : blocks) merge_one(m.block, m.writable);
    return;
  }
  Engine& e = e_;
  const std::uint32_t rank = e.rank_;
  const std::uint64_t me = rank + 1;
  std::vector<std::uint64_t> expected(blocks.size());
  std::vector<std::uint8_t> held(blocks.size(), 0);
  std::vector<Future<std::uint64_t>> ops;
  ops.reserve(blocks.size());
  for (std::size_t i = 0; i < blocks.size(); ++i) {
    if (probable_owner(blocks[i].block) != rank) continue;
    expected[i] = word::pack(e.version_[blocks[i].block], rank, 0);
    ops.push_back(compare_swap(e.meta_.owner_word(rank, blocks[i].block), expected[i], expected[i] | me));
    held[i] = 1;
  }
  std::size_t next = 0;
  for (std::size_t i = 0; i < blocks.size(); ++i)
    if (held[i] != 0) held[i] = ops[next++].get() == expected[i] ? 1 : 0;
  ops.clear();
  for (std::size_t i = 0; i < blocks.size(); ++i)
    if (held[i] != 0) ops.push_back(fetch_add(e.meta_.lease_word(rank, blocks[i].block), 0));
  next = 0;
  for (std::size_t i = 0; i < blocks.size(); ++i) {
    if (held[i] == 0) continue;
    const std::uint32_t block = blocks[i].block;
    // Tardis, as write_timestamp: past every lease readers took on the version it replaces.
    const std::uint64_t wts = std::max(ops[next++].get() + 1, e.now());
    e.advance(wts);
    const std::uint64_t lease = e.leasing() ? wts + e.config_.lease : 0;
    if (lease != 0) e.extend_lease(rank, block, lease);
    e.lease_[block] = lease;
    if (blocks[i].writable)
      merge_writable(block, false);
    else
      merge_into_home(block, false);
    e.at_home_[block] = 1;  // the view (or, still writable, the twin) is what the home copy now holds
  }
  std::atomic_thread_fence(std::memory_order_release);
  ops.clear();
  for (std::size_t i = 0; i < blocks.size(); ++i)
    if (held[i] != 0)
      ops.push_back(compare_swap(e.meta_.owner_word(rank, blocks[i].block), expected[i] | me,
                                 word::pack(word::version(expected[i]) + 1, rank, 0)));
  next = 0;
  for (std::size_t i = 0; i < blocks.size(); ++i) {
    if (held[i] == 0) continue;
    const std::uint32_t block = blocks[i].block;
    if (ops[next++].get() != (expected[i] | me))
      throw Error(Errc::protocol, "dsm: the owner word of block " + std::to_string(block) +
                                      " changed while this process held its lock");
    e.version_[block] = word::version(expected[i]) + 1;
    e.learn_owner(block, rank, e.version_[block]);
    e.note(WriteNotice{block, rank, e.version_[block]});
  }
  for (std::size_t i = 0; i < blocks.size(); ++i)
    if (held[i] == 0) merge_one(blocks[i].block, blocks[i].writable);
}

void Engine::FloatingHome::merge_one(std::uint32_t block, bool writable) {
  Engine& e = e_;
  const std::uint32_t rank = e.rank_;
  const std::uint32_t me = rank + 1;
  // Lock the home's word. Start at the probable owner and expect its word
  // as the last release we know of left it: right whenever we released the
  // block last, which is what floating homes are for, and a wrong guess
  // costs no more than reading the word first would, as a failed swap
  // returns it. A word that names another process is a link: follow it.
  std::uint32_t home_process = probable_owner(block);
  const std::uint64_t known = home_process == rank ? e.version_[block] : e.link_version(block);
  std::uint64_t expected = word::pack(known, home_process, 0);
  Backoff backoff;
  for (std::uint32_t hops = 0;;) {
    std::uint64_t seen;
    try {
      seen = compare_swap(e.meta_.owner_word(home_process, block), expected, expected | me).get();
    } catch (const Error& error) {
      if (error.code() != Errc::peer_failed) throw;
      home_process = e.search_home(block, home_process);
      expected = word::pack(0, home_process, 0);  // a guess: the swap returns the word
      continue;
    }
    if (seen == expected) break;
    if (word::owner(seen) != home_process) {
      e.counters_.links_followed.fetch_add(1, std::memory_order_relaxed);
      home_process = word::owner(seen);
      expected = word::pack(word::version(seen), home_process, 0);
      if (++hops >= e.processes_) backoff(false);  // the block keeps moving: let the movers finish
      continue;
    }
    // Locked by another releaser: wait for it, unless it has failed (it
    // would never unlock).
    const std::uint32_t holder = word::holder_plus_one(seen) - 1;
    e.throw_if_failed(holder, [&] {
      return "dsm: a release of block " + std::to_string(block) + " waited for the lock on its home's word";
    });
    expected = seen & ~word::lock_mask;
    backoff(false);
  }
  const std::uint64_t version = word::version(expected);
  std::byte* home = e.meta_.home_copy(block);
  const bool moved = home_process != rank;
  // Our merged copy is the newest version: lease it to ourselves past the
  // write, once leases are worth their two round trips (leasing()).
  const std::uint64_t wts = e.write_timestamp(home_process, block);
  const std::uint64_t lease = e.leasing() ? wts + e.config_.lease : 0;
  if (lease != 0) e.extend_lease(rank, block, lease);
  e.lease_[block] = lease;
  if (moved) {
    // The twin our home copy served as is about to be overwritten.
    if (e.at_home_[block] != 0) {
      std::memcpy(e.heap_.twin(block), home, e.config_.block_bytes);
      e.at_home_[block] = 0;
    }
    // Migration: the previous home's copy, with one get, straight into ours.
    get(home, e.meta_.home_block(home_process, block)).get();
    e.counters_.migrations.fetch_add(1, std::memory_order_relaxed);
    e.counters_.bytes_fetched.fetch_add(e.config_.block_bytes, std::memory_order_relaxed);
  }
  if (writable)
    merge_writable(block, moved);
  else
    merge_into_home(block, moved);
  e.at_home_[block] = 1;  // the view (or, still writable, the twin) is what the home copy now holds
  std::atomic_thread_fence(std::memory_order_release);
  const std::uint64_t released = word::pack(version + 1, rank, 0);
  if (moved) {
    // Our word names us before the previous home's links to us, so that a
    // search that follows that link finds the home. Nobody else changes
    // our word meanwhile: a lock is only ever taken on a word that names
    // its own process, and ours names another.
    std::uint64_t ours = std::atomic_ref<std::uint64_t>(e.meta_.owner_word_here(block)).load(std::memory_order_acquire);
    for (;;) {
      const std::uint64_t seen = compare_swap(e.meta_.owner_word(rank, block), ours, released).get();
      if (seen == ours) break;
      ours = seen;
    }
  }
  const std::uint64_t was = compare_swap(e.meta_.owner_word(home_process, block), expected | me, released).get();
  if (was != (expected | me))
    throw Error(Errc::protocol, "dsm: the owner word of block " + std::to_string(block) +
                                    " changed while this process held its lock");
  e.version_[block] = version + 1;
  e.learn_owner(block, rank, version + 1);
  e.note(WriteNotice{block, rank, version + 1});
}

// The merge of a read-only block: the bytes that differ from the twin go to
// the home copy; after a migration our copy becomes the merged block.
void Engine::FloatingHome::merge_into_home(std::uint32_t block, bool moved) {
  const std::size_t bytes = e_.config_.block_bytes;
  const bool check_races = e_.config_.check_races;
  std::byte* home = e_.meta_.home_copy(block);
  const std::byte* mine = e_.heap_.rw(block);
  const std::byte* twin = e_.twin(block);
  for (std::size_t i = 0; i < bytes; i += 8) {
    if (same_word(mine + i, twin + i)) continue;
    for (std::size_t j = i; j < i + 8; ++j) {
      if (mine[j] == twin[j]) continue;
      if (check_races && moved && home[j] != twin[j]) report_race(block, j);
      home[j] = mine[j];
    }
  }
  // It holds every write up to the new version.
  if (moved) std::memcpy(e_.heap_.rw(block), home, bytes);
}

// The merge of a block that stays writable: other threads of this process
// may write it meanwhile. Each word of the runtime view is read once; the
// bytes where it differs from the twin go to the home copy, and the twin
// takes the word as read, so a write that lands after the read still
// differs from the twin at the next release. After a migration the bytes
// others wrote (home differs, we did not write) are installed in our copy by
// a compare-and-swap of the word, redone from the new value if one of our
// threads wrote the word meanwhile. Without a migration the home copy is
// the twin, so each word goes to both as read, with no per-byte selection
// (the common case, and most of a release's time when it went per byte).
void Engine::FloatingHome::merge_writable(std::uint32_t block, bool moved) {
  auto* mine = reinterpret_cast<std::uint64_t*>(e_.heap_.rw(block));
  auto* twin = reinterpret_cast<std::uint64_t*>(e_.twin(block));
  auto* home = reinterpret_cast<std::uint64_t*>(e_.meta_.home_copy(block));
  // Per byte: ours where we wrote it (differs from the twin), else the home's.
  // Branch-free: a byte's top bit after adding 0x7f to its low seven bits,
  // or'ed with the byte, is set iff the byte is not zero (no carry leaves it).
  auto select = [](std::uint64_t ours, std::uint64_t before, std::uint64_t theirs) {
    constexpr std::uint64_t low7 = 0x7f7f7f7f7f7f7f7full, top = 0x8080808080808080ull;
    const std::uint64_t diff = ours ^ before;
    const std::uint64_t nonzero = (((diff & low7) + low7) | diff) & top;
    const std::uint64_t written = (nonzero >> 7) * 0xff;
    return (ours & written) | (theirs & ~written);
  };
  const std::size_t words = e_.config_.block_bytes / 8;
  if (!moved) {
    // Our home copy is the twin: the merged word is the word as read.
    for (std::size_t w = 0; w < words; ++w) {
      const std::uint64_t seen = std::atomic_ref<std::uint64_t>(mine[w]).load(std::memory_order_acquire);
      if (seen != twin[w]) {
        home[w] = seen;
        twin[w] = seen;
      }
    }
    return;
  }
  const bool check_races = e_.config_.check_races;
  for (std::size_t w = 0; w < words; ++w) {
    std::atomic_ref<std::uint64_t> word(mine[w]);
    std::uint64_t seen = word.load(std::memory_order_acquire);
    if (seen == twin[w] && home[w] == seen) continue;
    if (check_races)
      for (int byte = 0; byte < 8; ++byte) {
        const auto at = [byte](std::uint64_t v) { return v >> (8 * byte) & 0xff; };
        if (at(seen) != at(twin[w]) && at(home[w]) != at(twin[w])) report_race(block, w * 8 + byte);
      }
    const std::uint64_t theirs = home[w];
    for (;;) {
      const std::uint64_t merged = select(seen, twin[w], theirs);
      if (merged == seen || word.compare_exchange_strong(seen, merged, std::memory_order_acq_rel)) {
        home[w] = merged;
        twin[w] = merged;
        break;
      }
      // `seen` now holds the word one of our threads wrote meanwhile.
    }
  }
}

void Engine::FloatingHome::report_race(std::uint32_t block, std::size_t at) {
  e_.counters_.races.fetch_add(1, std::memory_order_relaxed);
  rdmx::log(rdmx::LogLevel::error,
            "dsm: data race: block %u offset %zu (heap offset %zu) was written by process %u and by "
            "another process between the same synchronizations\n",
            block, at, e_.offset(block) + at, e_.rank_);
}

}  // namespace rdmx::dsm
