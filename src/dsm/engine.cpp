// The engine's construction: the configuration every process must share,
// per-block state, the registered metadata's layout and where each part of
// it lies in every process.
#include "engine.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <thread>

#include "rdmx/core/error.hpp"
#include "rdmx/fabric/job.hpp"
#include "rdmx/fabric/layer.hpp"
#include "rdmx/fabric/rma.hpp"
#include "signals.hpp"

namespace rdmx::dsm {

std::atomic<Engine*> Engine::current_{nullptr};

Counters AtomicCounters::snapshot() const {
  auto r = [](const std::atomic<std::uint64_t>& v) { return v.load(std::memory_order_relaxed); };
  return Counters{r(read_faults), r(write_faults), r(fast_reads), r(read_ahead), r(write_ahead), r(migrations),
                  r(links_followed), r(merges), r(fast_releases), r(invalidations), r(overflows), r(bytes_fetched),
                  r(races), r(protects), r(barriers), r(locks)};
}

Engine& Engine::require(const char* what) {
  Engine* e = current();
  if (e == nullptr)
    throw Error(Errc::invalid_argument,
                std::string("dsm::") + what + ": no dsm::Space in this process (construct one after the rdmx::Job)");
  return *e;
}

Engine::Engine(Job& job, const Config& config)
    : job_(job), config_(config), rank_(job.rank()), processes_(job.size()),
      history_(config.notices, 0) {
  const std::size_t page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  if (config_.block_bytes == 0 || config_.block_bytes % page != 0)
    throw Error(Errc::invalid_argument, "dsm: the block size " + std::to_string(config_.block_bytes) +
                                            " is not a multiple of the page size " + std::to_string(page));
  if (config_.heap_bytes == 0 || config_.heap_bytes % config_.block_bytes != 0)
    throw Error(Errc::invalid_argument, "dsm: the heap size " + std::to_string(config_.heap_bytes) +
                                            " is not a positive multiple of the block size " +
                                            std::to_string(config_.block_bytes));
  if (processes_ > 0xfffe) throw Error(Errc::invalid_argument, "dsm: at most 65534 processes");
  // notices == 0 is valid: every signature that carries a write overflows,
  // so acquirers rely on leases alone (Tardis; MENPS's sweep starts there).
  if (config_.mutexes == 0) throw Error(Errc::invalid_argument, "dsm: mutexes must be at least 1");
  if (current() != nullptr) throw Error(Errc::invalid_argument, "dsm: this process already has a dsm::Space");
  if (config_.invalidation == Invalidation::directory && processes_ > directory::max_processes)
    throw Error(Errc::invalid_argument, "dsm: directory invalidation tracks at most " +
                                            std::to_string(directory::max_processes) + " processes, the job has " +
                                            std::to_string(processes_) + " (RDMX_DSM_INVALIDATION=signature has no limit)");
  // Leases stand in for write notices a signature dropped; a directory
  // drops none.
  if (config_.invalidation == Invalidation::directory) config_.lease = 0;
  blocks_ = config_.heap_bytes / config_.block_bytes;
  if (blocks_ > 0xffffffffull) throw Error(Errc::invalid_argument, "dsm: more than 2^32 blocks");
  history_ = Signature(config_.notices, blocks_);

  // Every process must run the same configuration, or block numbers and
  // protocols would disagree.
  struct Shape {
    std::uint64_t heap, block, notices, mutexes, home, invalidation, races, lease;
    bool operator==(const Shape&) const = default;
  };
  const Shape mine{config_.heap_bytes, config_.block_bytes, config_.notices, config_.mutexes,
                   static_cast<std::uint64_t>(config_.home), static_cast<std::uint64_t>(config_.invalidation),
                   config_.check_races ? 1u : 0u, config_.lease};
  const auto shapes = gather(job_, mine);
  for (std::uint32_t p = 0; p < processes_; ++p)
    if (!(shapes[p] == mine))
      throw Error(Errc::invalid_argument, "dsm: process " + std::to_string(p) + " configured its space differently " +
                                              "from process " + std::to_string(rank_) +
                                              " (RDMX_DSM_* settings must match in every process)");

  block_lock_ = std::make_unique<std::atomic<std::uint8_t>[]>(blocks_);
  state_ = std::make_unique<std::atomic<BlockState>[]>(blocks_);
  version_ = std::make_unique<std::uint64_t[]>(blocks_);
  hint_ = std::make_unique<WriteNotice[]>(blocks_);
  lease_ = std::make_unique<std::uint64_t[]>(blocks_);
  link_ = std::make_unique<std::uint32_t[]>(blocks_);
  link_version_ = std::make_unique<std::uint64_t[]>(blocks_);
  quiet_ = std::make_unique<std::uint8_t[]>(blocks_);
  at_home_ = std::make_unique<std::uint8_t[]>(blocks_);
  held_ = std::make_unique<std::atomic<std::uint64_t>[]>(config_.mutexes);
  mutex_free_ = std::make_unique<std::atomic<std::uint64_t>[]>(config_.mutexes);
  config_.keep = std::min<std::uint32_t>(config_.keep, 255);
  listed_ = std::make_unique<std::uint8_t[]>(blocks_);
  shared_ = std::make_unique<std::uint8_t[]>(blocks_);
  for (std::size_t b = 0; b < blocks_; ++b) {
    state_[b].store(BlockState::invalid, std::memory_order_relaxed);
    hint_[b] = WriteNotice{static_cast<std::uint32_t>(b), no_source, 0};
    link_[b] = static_cast<std::uint32_t>(b % processes_);  // every block starts at home there
  }
  dirty_.reserve(blocks_);

  try {
    map_heap();
    exchange_locators();
    signals_ = std::make_unique<SignalGuard>(*this);
  } catch (...) {
    if (app_ != nullptr) ::munmap(app_, config_.heap_bytes);
    if (rw_ != nullptr) ::munmap(rw_, config_.heap_bytes);
    if (twin_ != nullptr) ::munmap(twin_, config_.heap_bytes);
    if (memfd_ >= 0) ::close(memfd_);
    throw;
  }
  current_.store(this, std::memory_order_release);
  if (!local()) {
    warm();
    if (void** warmed = fabric::acting_word<Engine>()) *warmed = this;
    std::uint32_t native = 1;
    for (std::uint32_t p = 0; p < processes_; ++p)
      if (p != rank_ && rma_emulated(p)) native = 0;
    disseminate_ = true;
    for (std::uint32_t all : gather(job_, native)) disseminate_ = disseminate_ && all != 0;
  }
  job_.barrier();
}

Engine::~Engine() {
  current_.store(nullptr, std::memory_order_release);
  if (void** warmed = fabric::acting_word<Engine>(); warmed != nullptr && *warmed == this) *warmed = nullptr;
  signals_.reset();
  ::munmap(app_, config_.heap_bytes);
  ::munmap(rw_, config_.heap_bytes);
  ::munmap(twin_, config_.heap_bytes);
  ::close(memfd_);
  // The home copies and metadata stay in the arena until the Job ends: a
  // peer may still be reading them.
}

void Engine::exchange_locators() {
  const std::size_t words = (blocks_ + processes_ - 1) / processes_;  // directory words managed here
  const std::size_t mutexes_here = (config_.mutexes + processes_ - 1) / processes_;
  slot_bytes_ = Signature::encoded_size(config_.notices);
  barrier_offset_ = blocks_ * 16 + mutexes_here * (16 + slot_bytes_);
  rounds_offset_ = barrier_offset_ + 2 * std::size_t{processes_} * (8 + slot_bytes_);
  directory_offset_ = rounds_offset_ + 2 * std::size_t{max_rounds} * 16;
  mailbox_offset_ = directory_offset_ + words * 8;
  meta_bytes_ = mailbox_offset_ + (blocks_ + 7) / 8 * 8;
  struct Mine {
    RemoteLocator home, meta;
  };
  Mine mine{allocate_remote(rank_, config_.heap_bytes), allocate_remote(rank_, meta_bytes_)};
  home_ = reinterpret_cast<std::byte*>(resolve(mine.home).address);
  meta_ = reinterpret_cast<std::byte*>(resolve(mine.meta).address);
  // Block b starts at home in process b mod P, at version 0, unlocked; the
  // other processes' words link there. Written before the gather below,
  // which every peer passes before it reads a word.
  auto* words_here = reinterpret_cast<std::uint64_t*>(meta_);
  for (std::size_t b = 0; b < blocks_; ++b) {
    words_here[b] = word::pack(0, static_cast<std::uint32_t>(b % processes_), 0);
    words_here[blocks_ + b] = 0;  // the lease word
  }
  for (const Mine& m : gather(job_, mine)) {
    homes_.push_back(m.home);
    metas_.push_back(m.meta);
  }
}

RemoteLocator Engine::owner_word(std::uint32_t process, std::uint32_t block) const {
  return metas_[process].slice(std::uint64_t{block} * 8, 8);
}

RemoteLocator Engine::directory_word(std::uint32_t block) const {
  return metas_[block % processes_].slice(directory_offset_ + std::uint64_t{block / processes_} * 8, 8);
}

RemoteLocator Engine::mailbox(std::uint32_t process, std::uint32_t block) const {
  return metas_[process].slice(mailbox_offset_ + block, 1);
}

RemoteLocator Engine::lease_word(std::uint32_t process, std::uint32_t block) const {
  return metas_[process].slice((blocks_ + std::uint64_t{block}) * 8, 8);
}

RemoteLocator Engine::home_block(std::uint32_t process, std::uint32_t block) const {
  return homes_[process].slice(offset(block), config_.block_bytes);
}

RemoteLocator Engine::mutex_word(std::uint32_t mutex) const {
  return metas_[mutex % processes_].slice(blocks_ * 16 + std::size_t{mutex / processes_} * (16 + slot_bytes_), 8);
}

RemoteLocator Engine::mutex_slot(std::uint32_t mutex, std::size_t bytes) const {
  RemoteLocator w = mutex_word(mutex);
  return w.slice(16, bytes);
}

// Barrier flags and signature slots, one of each per parity and sender:
// 2P flags of 8 bytes, then 2P slots.
std::size_t Engine::barrier_flag_offset(std::uint64_t parity, std::uint32_t sender) const {
  return barrier_offset_ + (static_cast<std::size_t>(parity) * processes_ + sender) * 8;
}

std::size_t Engine::barrier_slot_offset(std::uint64_t parity, std::uint32_t sender) const {
  return barrier_offset_ + 2 * std::size_t{processes_} * 8 +
         (static_cast<std::size_t>(parity) * processes_ + sender) * slot_bytes_;
}

RemoteLocator Engine::barrier_flag(std::uint32_t process, std::uint64_t parity, std::uint32_t sender) const {
  return metas_[process].slice(barrier_flag_offset(parity, sender), 8);
}

RemoteLocator Engine::barrier_slot(std::uint32_t process, std::uint64_t parity, std::uint32_t sender,
                                   std::size_t bytes) const {
  return metas_[process].slice(barrier_slot_offset(parity, sender), bytes);
}

RemoteLocator Engine::round_word(std::uint32_t process, std::uint64_t parity, std::uint32_t round,
                                 std::uint32_t word) const {
  return metas_[process].slice(rounds_offset_ + ((parity * max_rounds + round) * 2 + word) * 8, 8);
}

void Engine::lock_block(std::uint32_t block) noexcept {
  unsigned spins = 0;
  while (block_lock_[block].exchange(1, std::memory_order_acquire) != 0)
    if (++spins % 64 == 0) std::this_thread::yield();
}

void Engine::unlock_block(std::uint32_t block) noexcept { block_lock_[block].store(0, std::memory_order_release); }

// Asks `process` (every peer: every_peer) whether it is alive, one get each:
// a peer that died turns into Errc::peer_failed here, naming `what` waited.
void Engine::probe_peers(const std::string& what, std::uint32_t process) {
  for (std::uint32_t p = 0; p < processes_; ++p) {
    if (p == rank_ || (process != every_peer && p != process)) continue;
    try {
      std::uint64_t probe = 0;
      get(&probe, metas_[p].slice(0, 8)).get();
    } catch (const Error& e) {
      throw Error(Errc::peer_failed, what + ": process " + std::to_string(p) + " failed: " + e.what());
    }
  }
}

}  // namespace rdmx::dsm
