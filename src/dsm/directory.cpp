// Directory invalidation (the baseline): a sharer bit per process in
// each block's directory word at its manager, a mailbox byte per block
// that releasers set, read at the next acquire.
#include "engine.hpp"

#include <sys/mman.h>

#include <chrono>
#include <string>
#include <thread>

#include "rdmx/core/backoff.hpp"
#include "rdmx/fabric/call.hpp"
#include "rdmx/fabric/rma.hpp"

namespace rdmx::dsm {

void Engine::join_sharers(std::uint32_t block) {
  if (shared_[block] != 0) return;
  // Set our bit (an OR by compare-and-swap: after an invalidation we cannot
  // tell whether the releaser cleared it or our own release set it again).
  const RemoteLocator where = directory_word(block);
  const std::uint64_t me = std::uint64_t{1} << rank_;
  std::uint64_t seen = blocking_fetch_add(where, 0);
  while ((seen & me) == 0) {
    const std::uint64_t was = blocking_compare_swap(where, seen, seen | me);
    if (was == seen) break;
    seen = was;
  }
  shared_[block] = 1;
}

void Engine::invalidate_sharers(std::uint32_t block) {
  // Take the sharers, leaving ourselves listed (our copy is current or,
  // with a fixed home, invalidated by the next releaser), and tell each.
  // While we tell them the word also carries `telling`, and another
  // releaser of the block waits for it to clear: a sharer whose bit we took
  // relies on our byte alone, and the next releaser, who no longer sees
  // that bit, may free a lock the sharer takes next. Without the wait the
  // sharer could take it before our byte landed (we were descheduled
  // between the swap and the put) and keep a stale copy: a mutex-protected
  // counter in a block another process released at a barrier lost an
  // increment. A fetch joins without waiting: its get comes after our merge.
  const RemoteLocator where = directory_word(block);
  const std::uint64_t me = std::uint64_t{1} << rank_;
  std::uint64_t seen = fetch_add(where, 0).get();
  Backoff backoff;
  auto last_check = std::chrono::steady_clock::now();
  for (;;) {
    if ((seen & directory::telling) != 0) {
      backoff(progress() != 0);
      if (const auto t = std::chrono::steady_clock::now(); t - last_check > std::chrono::milliseconds(5)) {
        last_check = t;
        probe_peers("dsm: a release of block " + std::to_string(block) + " waited for another releaser's invalidation");
      }
      seen = fetch_add(where, 0).get();
      continue;
    }
    if (seen == me) break;
    const bool others = (seen & ~me) != 0;
    const std::uint64_t was = compare_swap(where, seen, others ? me | directory::telling : me).get();
    if (was == seen) break;
    seen = was;
  }
  shared_[block] = 1;
  if ((seen & ~me) == 0) return;
  if (config_.tell_delay_us != 0) std::this_thread::sleep_for(std::chrono::microseconds(config_.tell_delay_us));
  static constexpr std::uint8_t stale = 1;
  for (std::uint32_t p = 0; p < processes_; ++p)
    if (p != rank_ && (seen >> p & 1) != 0) put(&stale, mailbox(p, block)).get();
  // A put's future is local completion. The next acquirer reads its mailbox
  // right after it takes the lock word, which this release frees next: the
  // byte must have landed by then. Over TCP (RDMA emulated) it had not, and
  // a sharer kept its stale copy (a mutex-protected counter lost increments).
  for (std::uint32_t p = 0; p < processes_; ++p)
    if (p != rank_ && (seen >> p & 1) != 0) flush(p);
  // Every byte landed: clear `telling`, keeping the bits of fetches that
  // joined meanwhile. Only we clear it, so it is set: adding it clears it
  // (the carry leaves the word), one atomic where a compare-and-swap would
  // retry after every join.
  fetch_add(where, directory::telling).get();
}

void Engine::acquire_directory() {
  // Releasers that synchronized with us before this acquire have set our
  // mailbox bytes. Clear each before dropping the copy: a byte set again
  // meanwhile stays for the next acquire.
  auto* box = reinterpret_cast<std::uint8_t*>(meta_ + mailbox_offset_);
  for (std::uint32_t block = 0; block < blocks_; ++block) {
    std::atomic_ref<std::uint8_t> flag(box[block]);
    if (flag.load(std::memory_order_acquire) == 0) continue;
    flag.store(0, std::memory_order_relaxed);
    lock_block(block);
    try {
      BlockState s = state_[block].load(std::memory_order_relaxed);
      // Our unreleased writes must survive: merge them first. A floating
      // home's merge starts from the newest version, so that copy stays.
      bool merged_newest = false;
      if (s == BlockState::dirty) {
        merged_newest = release_block(block) && config_.home == HomePolicy::floating;
        s = BlockState::clean;
      }
      if (s == BlockState::clean && !merged_newest) {
        protect(block, PROT_NONE);
        state_[block].store(BlockState::invalid, std::memory_order_release);
        counters_.invalidations.fetch_add(1, std::memory_order_relaxed);
        // The releaser may have cleared our bit: list us again at the next fetch.
        shared_[block] = 0;
      }
    } catch (...) {
      unlock_block(block);
      throw;
    }
    unlock_block(block);
  }
}

}  // namespace rdmx::dsm
