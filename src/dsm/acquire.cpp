// Acquires: applying signatures (write notices and, past an overflow,
// logical leases after Tardis), the logical clock and lease words that
// releases and fetches stamp, and the signature protocol itself (MENPS
// Fig. 6), which keeps every merge's write notice for acquirers.
#include "engine.hpp"

#include <sys/mman.h>

#include <algorithm>
#include <mutex>
#include <vector>

#include "rdmx/fabric/rma.hpp"

namespace rdmx::dsm {

// Write notices travel in the history (Engine::note) and reach acquirers in
// the signatures; everything else happens where signatures are applied
// (Engine::acquire), which the directory protocol runs too, with none.
class Engine::SignatureInvalidation final : public Invalidator {
 public:
  void fetching(std::uint32_t) override {}
  void merged(std::uint32_t) override {}
  bool keeps_notices() const noexcept override { return true; }
  void acquired() override {}
};

std::unique_ptr<Invalidator> Engine::make_signature_invalidation() {
  return std::make_unique<SignatureInvalidation>();
}

void Engine::advance(std::uint64_t t) noexcept {
  std::uint64_t cur = time_.load(std::memory_order_relaxed);
  while (cur < t && !time_.compare_exchange_weak(cur, t, std::memory_order_acq_rel)) {
  }
}

std::uint64_t Engine::extend_lease(std::uint32_t home, std::uint32_t block, std::uint64_t until) {
  const RemoteLocator where = meta_.lease_word(home, block);
  std::uint64_t cur = blocking_fetch_add(where, 0);
  while (cur < until) {
    const std::uint64_t seen = blocking_compare_swap(where, cur, until);
    if (seen == cur) break;
    cur = seen;
  }
  return cur;
}

// Tardis: a write's timestamp is past every lease readers took on the
// version it replaces, and not before this process's logical time.
std::uint64_t Engine::write_timestamp(std::uint32_t home, std::uint32_t block) {
  const std::uint64_t leased = fetch_add(meta_.lease_word(home, block), 0).get();
  const std::uint64_t wts = std::max(leased + 1, now());
  advance(wts);
  return wts;
}

// With the block's lock held: whether the cached copy is older than the
// notice (the caller then drops it). A dirty copy is merged first: our
// unreleased writes must not be lost (an early release is always allowed),
// and the merged copy may already be new enough. A copy that goes, or is
// already gone, keeps the newest notice as its hint.
bool Engine::outdated(std::uint32_t block, const WriteNotice& notice) {
  BlockState s = state_[block].load(std::memory_order_relaxed);
  // A copy, dirty or not, that holds at least the notice's version lacks none
  // of its writes: a fast-released block stays writable (our own notices
  // come back to us through others' histories).
  if (s != BlockState::invalid && version_[block] >= notice.version) return false;
  if (s == BlockState::dirty) {
    release_block(block);
    s = BlockState::clean;
  }
  if (s == BlockState::clean && version_[block] >= notice.version) return false;
  WriteNotice& hint = hint_[block];
  if (hint.source == no_source || notice.version > hint.version) hint = notice;
  return s == BlockState::clean;
}

// Drops the cached copies of blocks first .. first+count-1 (locked, clean)
// with one mprotect.
void Engine::drop(std::uint32_t first, std::uint32_t count) {
  protect(first, count, PROT_NONE);
  for (std::uint32_t b = first; b < first + count; ++b)
    state_[b].store(BlockState::invalid, std::memory_order_release);
  counters_.invalidations.fetch_add(count, std::memory_order_relaxed);
}

void Engine::acquire(std::span<const DecodedSignature> signatures, bool alone) {
  bool overflowed = false;
  for (const DecodedSignature& sig : signatures) {
    advance(sig.header.time);
    overflowed = overflowed || sig.header.overflowed != 0;
  }
  // The newest notice per block, in block order: each run of adjacent
  // blocks is locked (ascending) and its outdated copies dropped with one
  // mprotect per run of them, not one per block.
  std::vector<WriteNotice> notices;
  for (const DecodedSignature& sig : signatures) notices.insert(notices.end(), sig.notices.begin(), sig.notices.end());
  std::sort(notices.begin(), notices.end(), [](const WriteNotice& a, const WriteNotice& b) {
    return a.block != b.block ? a.block < b.block : a.version > b.version;
  });
  notices.erase(std::unique(notices.begin(), notices.end(),
                            [](const WriteNotice& a, const WriteNotice& b) { return a.block == b.block; }),
                notices.end());
  std::size_t i = 0;
  while (i < notices.size()) {
    std::size_t end = i + 1;
    while (end < notices.size() && notices[end].block == notices[end - 1].block + 1) ++end;
    for (std::size_t k = i; k < end; ++k) lock_block(notices[k].block);
    try {
      // Dirty copies (fast-released blocks stay dirty) older than their
      // notice are merged first, an early release, each run of adjacent
      // ones made read-only by one mprotect; outdated() then drops them.
      // With no other thread to write it, an unchanged one needs neither:
      // it is dropped (to no access) with its run at once.
      auto early = [&](std::size_t k) {
        const std::uint32_t b = notices[k].block;
        if (state_[b].load(std::memory_order_relaxed) != BlockState::dirty || version_[b] >= notices[k].version)
          return false;
        if (alone && !changed(b)) {
          state_[b].store(BlockState::clean, std::memory_order_relaxed);
          return false;
        }
        return true;
      };
      for (std::size_t k = i; k < end;) {
        if (!early(k)) {
          ++k;
          continue;
        }
        std::size_t e = k + 1;
        while (e < end && early(e)) ++e;
        protect(notices[k].block, static_cast<std::uint32_t>(e - k), PROT_READ);
        for (std::size_t m = k; m < e; ++m) merge(notices[m].block);
        k = e;
      }
      std::size_t run = i;  // notices[run, k) are outdated copies not dropped yet
      for (std::size_t k = i; k < end; ++k) {
        // A floating home's notice names the home at its version (its releaser).
        learn_owner(notices[k].block, notices[k].source, notices[k].version);
        if (outdated(notices[k].block, notices[k])) continue;
        if (k > run) drop(notices[run].block, static_cast<std::uint32_t>(k - run));
        run = k + 1;
      }
      if (end > run) drop(notices[run].block, static_cast<std::uint32_t>(end - run));
    } catch (...) {
      for (std::size_t k = i; k < end; ++k) unlock_block(notices[k].block);
      throw;
    }
    for (std::size_t k = i; k < end; ++k) unlock_block(notices[k].block);
    i = end;
  }
  // After the notices: it also forgets their hints, since a dropped notice
  // may name a newer version than a listed one.
  if (overflowed) invalidate_expired();
  // Pass on what we acquired to whoever acquires from us (release-acquire chains).
  std::lock_guard<std::mutex> hold(history_mutex_);
  for (const DecodedSignature& sig : signatures) history_.merge(sig.header, sig.notices);
}

// An overflowed signature no longer names every block that changed; its
// logical time is past every write it dropped (Tardis): a copy whose lease
// ends before our (now raised) time may miss one of them and goes.
void Engine::invalidate_expired() {
  counters_.overflows.fetch_add(1, std::memory_order_relaxed);
  overflowed_.store(true, std::memory_order_relaxed);
  release_all();
  const std::uint64_t time = now();
  // Runs of adjacent expiring copies stay locked until one mprotect drops them all.
  std::uint32_t run = 0, count = 0;
  try {
    for (std::uint32_t b = 0; b < blocks_; ++b) {
      lock_block(b);
      hint_[b].source = no_source;
      BlockState s = state_[b].load(std::memory_order_relaxed);
      if (s == BlockState::dirty) {  // written by another thread since release_all
        try {
          release_block(b);
        } catch (...) {
          unlock_block(b);  // not in the run yet; the run is unlocked below
          throw;
        }
        s = BlockState::clean;
      }
      if (s != BlockState::invalid && (lease_[b] == 0 || lease_[b] < time)) {
        if (count++ == 0) run = b;
        continue;
      }
      unlock_block(b);
      if (count != 0) {
        drop(run, count);
        for (std::uint32_t k = run; k < run + count; ++k) unlock_block(k);
        count = 0;
      }
    }
    if (count != 0) drop(run, count);
  } catch (...) {
    for (std::uint32_t k = run; k < run + count; ++k) unlock_block(k);
    throw;
  }
  for (std::uint32_t k = run; k < run + count; ++k) unlock_block(k);
}

}  // namespace rdmx::dsm
