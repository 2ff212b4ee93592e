// Releases: the dirty list, which blocks a release merges and which a fast
// release keeps writable, and a release of one range. The merge itself is
// the home protocol's (home.hpp).
#include "engine.hpp"

#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <mutex>
#include <thread>

#include "rdmx/core/error.hpp"

namespace rdmx::dsm {

std::byte* Engine::twin(std::uint32_t block) const noexcept {
  return at_home_[block] != 0 ? meta_.home_copy(block) : heap_.twin(block);
}

bool Engine::changed(std::uint32_t block) const {
  return std::memcmp(heap_.rw(block), twin(block), config_.block_bytes) != 0;
}

bool Engine::release_block(std::uint32_t block) {
  // Read-only first: a thread writing now faults and waits for this block's
  // lock, then twins the merged block, so no write slips between diff and merge.
  protect(block, 1, PROT_READ);
  return merge(block);
}

bool Engine::merge(std::uint32_t block) {
  // Nothing written since the twin (a fast-released block left alone since
  // its last release): nothing to publish, no new version, no notice.
  if (!changed(block)) {
    state_[block].store(BlockState::clean, std::memory_order_release);
    return false;
  }
  const Merge one{block, false};
  home_->merge({&one, 1});
  merged({&one, 1});
  return true;
}

void Engine::merged(std::span<const Merge> blocks) {
  for (const Merge& m : blocks) {
    invalidator_->merged(m.block);
    if (!m.writable) state_[m.block].store(BlockState::clean, std::memory_order_release);
    counters_.merges.fetch_add(1, std::memory_order_relaxed);
    if (m.writable) counters_.fast_releases.fetch_add(1, std::memory_order_relaxed);
  }
}

// The fast release (Home::fast_release; MENPS's fast release mode): a dirty
// block that changed since its twin is merged while it stays writable and
// stays dirty, its twin now the merged state; one that went Config::keep
// releases unchanged is made read-only and clean (one mprotect per run of
// adjacent ones), the rest stay as they are. A block written in every
// interval (or every few) so costs one write fault and one mprotect in all,
// not one of each per interval; a block written once costs the same two as
// before, the second `keep` releases later, and a comparison with its twin
// at each release until then. Without it (the fixed home, or keep 0) every
// dirty block is made read-only and merged.
// Every block of the list is locked, in ascending order (the only order in
// which any thread holds several), for the whole release: the home protocol
// then merges them together (the floating home overlaps their round trips).
void Engine::release_blocks(std::vector<std::uint32_t>& blocks) {
  std::sort(blocks.begin(), blocks.end());
  const bool fast = home_->fast_release();
  std::vector<Merge> todo;
  std::vector<std::uint32_t> kept;  // the blocks a fast release leaves writable
  for (std::uint32_t b : blocks) lock_block(b);
  struct Unlock {
    Engine& engine;
    const std::vector<std::uint32_t>* locked;
    ~Unlock() {
      if (locked != nullptr)
        for (std::uint32_t b : *locked) engine.unlock_block(b);
    }
  } unlock{*this, &blocks};
  // Adjacent dirty blocks to make read-only and merge, with one mprotect.
  std::uint32_t run_first = 0, run_count = 0;
  auto settle = [&] {
    if (run_count == 0) return;
    protect(run_first, run_count, PROT_READ);
    for (std::uint32_t b = run_first; b < run_first + run_count; ++b) {
      if (changed(b))
        todo.push_back({b, false});
      else
        state_[b].store(BlockState::clean, std::memory_order_release);
    }
    run_count = 0;
  };
  for (std::uint32_t b : blocks) {
    // Another thread may have released it meanwhile (an acquire's early release).
    if (state_[b].load(std::memory_order_relaxed) != BlockState::dirty) {
      settle();
      continue;
    }
    if (fast && changed(b)) {
      settle();
      todo.push_back({b, true});
      quiet_[b] = 0;
      kept.push_back(b);
      continue;
    }
    if (fast && ++quiet_[b] < config_.keep) {  // unchanged, but may be written again soon
      settle();
      kept.push_back(b);
      continue;
    }
    if (run_count != 0 && b != run_first + run_count) settle();
    if (run_count == 0) run_first = b;
    ++run_count;
  }
  settle();
  home_->merge(todo);
  merged(todo);
  for (std::uint32_t b : blocks) unlock_block(b);
  unlock.locked = nullptr;
  // Assigned, not swapped: the list keeps its capacity (release_all hands it
  // back as the spare, so that a release allocates no list of every block).
  blocks.assign(kept.begin(), kept.end());
}

void Engine::note(const WriteNotice& notice) {
  if (!invalidator_->keeps_notices()) return;
  std::lock_guard<std::mutex> hold(history_mutex_);
  history_.add(notice);
}

void Engine::release_all() {
  // Threads may release at once: each takes the list there is, and leaves an
  // empty one with full capacity for the fault path: the spare one a previous
  // release handed back, so that a release allocates nothing, or a new one
  // allocated outside the lock the fault path spins on.
  std::vector<std::uint32_t> batch, fresh;
  auto take = [this] {
    while (dirty_lock_.test_and_set(std::memory_order_acquire)) std::this_thread::yield();
  };
  // A release is complete only when every block written before it is merged,
  // also those another thread's release took from the list and is still
  // merging: wait for those batches before returning.
  struct AwaitOthers {
    std::atomic<std::uint32_t>& merging;
    ~AwaitOthers() {
      while (merging.load(std::memory_order_acquire) != 0) std::this_thread::yield();
    }
  } await_others{merging_};
  take();
  const bool nothing = dirty_.empty();
  if (!nothing && spare_.capacity() >= blocks_) fresh.swap(spare_);
  dirty_lock_.clear(std::memory_order_release);
  if (nothing) return;
  if (fresh.capacity() < blocks_) fresh.reserve(blocks_);
  take();
  batch.swap(dirty_);
  dirty_.swap(fresh);
  for (std::uint32_t block : batch) listed_[block] = 0;
  merging_.fetch_add(1, std::memory_order_relaxed);  // under the lock: a release that finds the list taken sees it
  dirty_lock_.clear(std::memory_order_release);
  struct Merged {
    std::atomic<std::uint32_t>& merging;
    ~Merged() { merging.fetch_sub(1, std::memory_order_release); }
  } merged{merging_};
  release_blocks(batch);
  take();
  // The blocks a fast release kept writable stay listed for the next release.
  for (std::uint32_t block : batch)
    if (listed_[block] == 0 && state_[block].load(std::memory_order_relaxed) == BlockState::dirty) {
      listed_[block] = 1;
      dirty_.push_back(block);
    }
  batch.clear();
  if (spare_.capacity() < blocks_) spare_.swap(batch);
  dirty_lock_.clear(std::memory_order_release);
}

void Engine::release() { release_all(); }

// Releases only the blocks holding [address, address + bytes), for an
// unlock that publishes one variable (a relaxed atomic): the caller's other
// dirty blocks wait for its next full release. A block that changed is
// fast-released where the home protocol allows it (stays dirty and
// listed), else made read-only and merged (it stays listed; release_blocks
// skips it).
void Engine::release_range(const void* address, std::size_t bytes) {
  if (!contains(address) || bytes == 0 || bytes > config_.heap_bytes ||
      static_cast<const std::byte*>(address) - base() > static_cast<std::ptrdiff_t>(config_.heap_bytes - bytes))
    throw Error(Errc::invalid_argument, "dsm: a release of a range outside the shared heap");
  const std::uint32_t first = heap_.block_of(address);
  const std::uint32_t last = heap_.block_of(static_cast<const std::byte*>(address) + bytes - 1);
  for (std::uint32_t b = first; b <= last; ++b) lock_block(b);
  try {
    for (std::uint32_t b = first; b <= last; ++b) {
      if (state_[b].load(std::memory_order_relaxed) != BlockState::dirty || !changed(b)) continue;
      if (home_->fast_release()) {
        const Merge kept{b, true};
        home_->merge({&kept, 1});
        quiet_[b] = 0;
        merged({&kept, 1});
      } else {
        release_block(b);
      }
    }
  } catch (...) {
    for (std::uint32_t b = first; b <= last; ++b) unlock_block(b);
    throw;
  }
  for (std::uint32_t b = first; b <= last; ++b) unlock_block(b);
}

}  // namespace rdmx::dsm
