// Directory invalidation (the baseline ArgoDSM and classic DSMs use; MENPS
// Fig. 8 compares it with signatures): each block's manager, process
// b mod P, keeps its directory word, a bit per process that may cache the
// block; a releaser takes the sharers and sets a mailbox byte in each, which
// the sharer reads at its next acquire. Signatures then carry no notices, so
// there are no fast reads and no leases.
#include <sys/mman.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include "engine.hpp"
#include "rdmx/core/backoff.hpp"
#include "rdmx/fabric/call.hpp"
#include "rdmx/fabric/job.hpp"
#include "rdmx/fabric/rma.hpp"

namespace rdmx::dsm {

namespace {
// A directory word's top bit: set while a releaser tells the sharers it
// took (others' releases of the block wait for it to clear).
constexpr std::uint64_t telling = std::uint64_t{1} << 63;
static_assert(directory_max_processes < 64, "a process's bit must stay clear of `telling`");
}  // namespace

class Engine::DirectoryInvalidation final : public Invalidator {
 public:
  explicit DirectoryInvalidation(Engine& engine)
      : e_(engine), joined_(std::make_unique<std::uint8_t[]>(engine.blocks_)) {}

  // Listed before the owner word is read. A release whose invalidation
  // does not see us had already published its new owner and version, so
  // the word the fetch reads names the home holding its writes; a release
  // that does see us leaves a mark for our next acquire.
  void fetching(std::uint32_t block) override { join_sharers(block); }
  void merged(std::uint32_t block) override { invalidate_sharers(block); }
  // Sharers are told directly.
  bool keeps_notices() const noexcept override { return false; }
  void acquired() override;

 private:
  void join_sharers(std::uint32_t block);
  void invalidate_sharers(std::uint32_t block);

  Engine& e_;
  std::unique_ptr<std::uint8_t[]> joined_;  // per block: our bit is set in its directory word
};

std::unique_ptr<Invalidator> Engine::make_directory_invalidation() {
  return std::make_unique<DirectoryInvalidation>(*this);
}

void Engine::DirectoryInvalidation::join_sharers(std::uint32_t block) {
  if (joined_[block] != 0) return;
  // Set our bit (an OR by compare-and-swap: after an invalidation we cannot
  // tell whether the releaser cleared it or our own release set it again).
  const RemoteLocator where = e_.meta_.directory_word(block);
  const std::uint64_t me = std::uint64_t{1} << e_.rank_;
  std::uint64_t seen = blocking_fetch_add(where, 0);
  while ((seen & me) == 0) {
    const std::uint64_t was = blocking_compare_swap(where, seen, seen | me);
    if (was == seen) break;
    seen = was;
  }
  joined_[block] = 1;
}

void Engine::DirectoryInvalidation::invalidate_sharers(std::uint32_t block) {
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
  Engine& e = e_;
  const RemoteLocator where = e.meta_.directory_word(block);
  const std::uint64_t me = std::uint64_t{1} << e.rank_;
  const auto what = [block] {
    return "dsm: a release of block " + std::to_string(block) + " waited for another releaser's invalidation";
  };
  std::uint64_t seen = fetch_add(where, 0).get();
  Backoff backoff;
  auto last_check = std::chrono::steady_clock::now();
  for (;;) {
    if ((seen & telling) != 0) {
      // The word does not say who tells: any failed peer may be the one.
      e.throw_if_failed(every_peer, what);
      backoff(progress() != 0);
      if (const auto t = std::chrono::steady_clock::now(); t - last_check > std::chrono::milliseconds(5)) {
        last_check = t;
        e.probe_peers(what());
      }
      seen = fetch_add(where, 0).get();
      continue;
    }
    if (seen == me) break;
    const bool others = (seen & ~me) != 0;
    const std::uint64_t was = compare_swap(where, seen, others ? me | telling : me).get();
    if (was == seen) break;
    seen = was;
  }
  joined_[block] = 1;
  if ((seen & ~me) == 0) return;
  if (e.config_.tell_delay_us != 0) std::this_thread::sleep_for(std::chrono::microseconds(e.config_.tell_delay_us));
  static constexpr std::uint8_t stale = 1;
  for (std::uint32_t p = 0; p < e.processes_; ++p)
    if (p != e.rank_ && (seen >> p & 1) != 0) put(&stale, e.meta_.mailbox(p, block)).get();
  // A put's future is local completion. The next acquirer reads its mailbox
  // right after it takes the lock word, which this release frees next: the
  // byte must have landed by then. Over TCP (RDMA emulated) it had not, and
  // a sharer kept its stale copy (a mutex-protected counter lost increments).
  for (std::uint32_t p = 0; p < e.processes_; ++p)
    if (p != e.rank_ && (seen >> p & 1) != 0) flush(p);
  // Every byte landed: clear `telling`, keeping the bits of fetches that
  // joined meanwhile. Only we clear it, so it is set: adding it clears it
  // (the carry leaves the word), one atomic where a compare-and-swap would
  // retry after every join.
  fetch_add(where, telling).get();
}

void Engine::DirectoryInvalidation::acquired() {
  // Releasers that synchronized with us before this acquire have set our
  // mailbox bytes. Clear each before dropping the copy: a byte set again
  // meanwhile stays for the next acquire.
  Engine& e = e_;
  std::uint8_t* box = e.meta_.mailboxes_here();
  for (std::uint32_t block = 0; block < e.blocks_; ++block) {
    std::atomic_ref<std::uint8_t> flag(box[block]);
    if (flag.load(std::memory_order_acquire) == 0) continue;
    flag.store(0, std::memory_order_relaxed);
    e.lock_block(block);
    try {
      BlockState s = e.state_[block].load(std::memory_order_relaxed);
      // Our unreleased writes must survive: merge them first. A merge that
      // leaves our copy the newest version (the floating home's) keeps it.
      bool merged_newest = false;
      if (s == BlockState::dirty) {
        merged_newest = e.release_block(block) && e.home_->merge_leaves_newest();
        s = BlockState::clean;
      }
      if (s == BlockState::clean && !merged_newest) {
        e.protect(block, 1, PROT_NONE);
        e.state_[block].store(BlockState::invalid, std::memory_order_release);
        e.counters_.invalidations.fetch_add(1, std::memory_order_relaxed);
        // The releaser may have cleared our bit: list us again at the next fetch.
        joined_[block] = 0;
      }
    } catch (...) {
      e.unlock_block(block);
      throw;
    }
    e.unlock_block(block);
  }
}

}  // namespace rdmx::dsm
