// The fault path: an access the app view does not allow fetches the block
// (from a write notice's writer, or from the home its links lead to),
// twins it for a write, and takes following blocks ahead of a sequential
// access (read- and write-ahead).
#include "engine.hpp"

#include <sys/mman.h>

#include <algorithm>
#include <cstring>
#include <thread>

#include "rdmx/fabric/layer.hpp"
#include "rdmx/fabric/rma.hpp"

namespace rdmx::dsm {

// The fault path waits only for its own operations: the blocking ones move
// the network and nothing else, so no call runs inside the handler (it could
// touch the block whose lock we hold), and none allocates (the thread may
// have faulted inside malloc, holding its lock).
void Engine::fault(void* address, bool write) {
  const std::uint32_t block = heap_.block_of(address);
  void** warmed = fabric::acting_word<Engine>();
  if (warmed != nullptr && *warmed != this) [[unlikely]] {
    // A thread's first fault (the constructing thread warmed in the
    // constructor) sets up its endpoints and remote keys before it takes
    // the block's lock: setting one up allocates and waits for the owner's
    // answer, running calls meanwhile.
    *warmed = this;  // first: a call run while warming that faults goes on to its fetch
    meta_.warm();
  }
  bool newer = false;
  lock_block(block);
  try {
    const BlockState s = state_[block].load(std::memory_order_relaxed);
    // Another thread may have served this block while we waited for its lock.
    if (s == BlockState::dirty || (s == BlockState::clean && !write)) {
      unlock_block(block);
      return;
    }
    (write ? counters_.write_faults : counters_.read_faults).fetch_add(1, std::memory_order_relaxed);
    if (s == BlockState::invalid) newer = fetch(block, write);
    // The blocks taken ahead are locked and cached: one mprotect for the run.
    const std::uint32_t last = block + take_ahead(block, write, newer);
    if (write)
      for (std::uint32_t b = block; b <= last; ++b) make_dirty(b);
    try {
      protect(block, last - block + 1, write ? PROT_READ | PROT_WRITE : PROT_READ);
    } catch (...) {
      for (std::uint32_t b = block + 1; b <= last; ++b) unlock_block(b);
      throw;
    }
    for (std::uint32_t b = block; b <= last; ++b) {
      if (!write) state_[b].store(BlockState::clean, std::memory_order_release);
      if (b != block) unlock_block(b);
    }
  } catch (...) {
    unlock_block(block);
    throw;
  }
  unlock_block(block);
  // Before the access completes, holding no block's lock (the acquire takes
  // them): the access may read data written before the write it found.
  if (newer) acquire_causal();
}

// After a fault on `block` (its lock held, cached): when the thread's
// previous fault of the same kind ended just before it (a sequential read or
// write), takes following blocks for the same access, each one's lock in
// ascending order (the global one), stopping at the first whose lock another
// thread holds or that needs nothing (cached, for a read; writable, for a
// write), and fetches those not cached, each exactly as a miss would.
// Returns how many; their locks stay held for the caller, which makes them
// readable or dirty with `block` (one mprotect) and unlocks them.
// Reads take up to Config::read_ahead blocks at once: one never read costs
// a get. Writes ramp up, one block the first time and twice the previous
// run after that, up to Config::write_ahead: one never written costs a twin
// copy and, at the next release, a comparison that finds it unchanged (it
// is made read-only again, no merge), and the doubling keeps those fewer
// than the blocks the thread wrote when its write ends soon.
std::uint32_t Engine::take_ahead(std::uint32_t block, bool write, bool& newer) {
  struct Run {
    const Engine* engine = nullptr;
    std::uint32_t next = 0;  // the block after the last one the run took
    std::uint32_t last = 0;  // blocks its previous fault took ahead
  };
  thread_local Run runs[2];
  Run& run = runs[write ? 1 : 0];
  const bool sequential = run.engine == this && run.next == block;
  const std::uint32_t most = write ? config_.write_ahead : config_.read_ahead;
  const std::uint32_t want = write ? std::min(most, std::max(1u, 2 * run.last)) : most;
  std::uint32_t n = 0;
  if (sequential && most > 0) {
    for (std::uint32_t b = block + 1; b < blocks_ && n < want; ++b) {
      if (block_lock_[b].exchange(1, std::memory_order_acquire) != 0) break;
      const BlockState s = state_[b].load(std::memory_order_relaxed);
      if (s == BlockState::dirty || (s == BlockState::clean && !write)) {
        unlock_block(b);
        break;
      }
      if (s == BlockState::invalid) {
        try {
          newer = fetch(b, write) || newer;
        } catch (...) {
          for (std::uint32_t k = block + 1; k <= b; ++k) unlock_block(k);
          throw;
        }
      }
      ++n;
    }
    (write ? counters_.write_ahead : counters_.read_ahead).fetch_add(n, std::memory_order_relaxed);
  }
  run = Run{this, block + n + 1, n};
  return n;
}

// A cached block (its lock held) about to be made writable: twinned, listed
// for the next release. A floating-home block whose cached copy is our home
// copy's bytes needs no copy: only our own releases of the block change our
// home copy, so until this block's release it keeps the bytes a twin would
// (a release that migrates the block copies it to the twin area first).
// MG rewrites whole grids between barriers: a copy of every block it writes
// was a tenth of its time.
void Engine::make_dirty(std::uint32_t block) {
  if (at_home_[block] == 0) std::memcpy(heap_.twin(block), heap_.rw(block), config_.block_bytes);
  quiet_[block] = 0;
  while (dirty_lock_.test_and_set(std::memory_order_acquire)) std::this_thread::yield();
  if (listed_[block] == 0) {
    listed_[block] = 1;
    dirty_.push_back(block);  // within the reserved capacity: each block is listed once
  }
  dirty_lock_.clear(std::memory_order_release);
  state_[block].store(BlockState::dirty, std::memory_order_release);
}

// Reads the block into the runtime view: from the writer a write notice
// named (fast read: one get), else from the home its links lead to.
//
// With Config::causal_mutex set it also tells whether the copy may hold
// writes of a release this process has not acquired: the home's word, read
// again after the get, is not the one the fetch expected (a release
// locked, bumped or moved it meanwhile: its merge may have reached the
// bytes we read), or, without a notice, the version found is newer than
// the last copy this process had (0: none). A notice names a version an
// acquire delivered. Releasers lock the word (floating home) or count
// themselves in it (fixed home) before their merge writes the home copy.
bool Engine::fetch(std::uint32_t block, bool for_write) {
  WriteNotice& hint = hint_[block];
  const bool causal = config_.causal_mutex != Config::no_mutex;
  bool newer = false;
  std::uint32_t source;
  std::uint64_t version;
  std::uint64_t seen = 0;
  std::uint64_t lease = 0;  // none: dropped by any overflowed signature
  // Directory: listed before the owner word is read. A release whose
  // invalidation does not see us had already published its new owner and
  // version, so the word read below names the home holding its writes; a
  // release that does see us leaves a mark for our next acquire.
  invalidator_->fetching(block);
  if (hint.source != no_source) {
    // Fast read: no lease (the home is not asked), the notice is enough.
    source = hint.source;
    version = hint.version;
    seen = word::pack(version, source, 0);
    counters_.fast_reads.fetch_add(1, std::memory_order_relaxed);
  } else {
    seen = find_home(block, source);
    version = word::version(seen);
    newer = causal && (version > version_[block] || (seen & word::lock_mask) != 0);
    // Take a lease on this version; valid only if no release began meanwhile
    // (a releaser locks or bumps the owner word before it reads the lease word).
    // A block fetched to be written needs none: its release leases it anew,
    // and a lease of ours would only push our own write timestamp past it.
    if ((seen & word::lock_mask) == 0 && leasing() && !for_write) {
      lease = now() + config_.lease;
      extend_lease(source, block, lease);
    }
  }
  std::byte* into = heap_.rw(block);
  at_home_[block] = home_->home_copy_is_twin(source) ? 1 : 0;
  if (source == rank_) {
    std::memcpy(into, meta_.home_copy(block), config_.block_bytes);
  } else {
    blocking_get(into, meta_.home_block(source, block));
    counters_.bytes_fetched.fetch_add(config_.block_bytes, std::memory_order_relaxed);
  }
  if (lease != 0 || causal) {
    const std::uint64_t after =
        source == rank_ ? std::atomic_ref<std::uint64_t>(meta_.owner_word_here(block)).load(std::memory_order_acquire)
                        : blocking_fetch_add(meta_.owner_word(source, block), 0);
    if (after != seen) {
      lease = 0;
      newer = causal;
    }
  }
  hint.source = no_source;
  version_[block] = version;
  lease_[block] = lease;
  return newer;
}

}  // namespace rdmx::dsm
