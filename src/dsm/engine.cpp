#include "engine.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>

#include "rdmx/core/log.hpp"
#include "rdmx/core/backoff.hpp"
#include "rdmx/core/error.hpp"
#include "rdmx/fabric/call.hpp"
#include "rdmx/fabric/job.hpp"
#include "rdmx/fabric/layer.hpp"
#include "rdmx/fabric/rma.hpp"
#include "rdmx/transfer/transmitter.hpp"
#include "signals.hpp"

namespace rdmx::dsm {

std::atomic<Engine*> Engine::current_{nullptr};

namespace {
constexpr std::uint32_t no_source = ~0u;
constexpr int attempts = 8;

std::string hex(std::uintptr_t v) {
  char text[32];
  std::snprintf(text, sizeof text, "0x%zx", static_cast<std::size_t>(v));
  return text;
}

template <class T>
std::vector<T> gather(Job& job, const T& mine) {
  std::vector<T> out;
  for (const auto& bytes : job.allgather(std::as_bytes(std::span(&mine, 1)))) {
    if (bytes.size() != sizeof(T)) throw Error(Errc::protocol, "dsm: a process sent a malformed start-up record");
    T value;
    std::memcpy(&value, bytes.data(), sizeof value);
    out.push_back(value);
  }
  return out;
}

std::byte* map_or_throw(void* hint, std::size_t bytes, int protection, int flags, int fd, const char* what) {
  void* p = ::mmap(hint, bytes, protection, flags, fd, 0);
  if (p == MAP_FAILED)
    throw Error(Errc::out_of_memory, std::string("dsm: mapping the ") + what + " (" + std::to_string(bytes) +
                                         " bytes) failed: " + std::strerror(errno));
  return static_cast<std::byte*>(p);
}

// Releasers compare blocks a word at a time; most of a block is unchanged.
bool same_word(const std::byte* a, const std::byte* b) {
  std::uint64_t x, y;
  std::memcpy(&x, a, 8);
  std::memcpy(&y, b, 8);
  return x == y;
}
}  // namespace

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

void Engine::map_heap() {
  const std::size_t bytes = config_.heap_bytes;
  memfd_ = ::memfd_create("rdmx-dsm-heap", MFD_CLOEXEC);
  if (memfd_ < 0) throw Error(Errc::out_of_memory, std::string("dsm: memfd_create failed: ") + std::strerror(errno));
  if (::ftruncate(memfd_, static_cast<off_t>(bytes)) != 0)
    throw Error(Errc::out_of_memory, "dsm: sizing the heap to " + std::to_string(bytes) + " bytes failed: " +
                                         std::strerror(errno));
  rw_ = map_or_throw(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, memfd_, "runtime view");
  twin_ = map_or_throw(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1,
                       "twin area");

  // Process 0 proposes an address, every process tries to map the heap
  // there; if any cannot, all drop it and process 0 proposes another.
  std::string failures;
  for (int attempt = 0; attempt < attempts; ++attempt) {
    std::uintptr_t proposal = config_.address;
    if (proposal == 0 && rank_ == 0) {
      if (attempt == 0) {
        // Where the kernel would put it here: usually free in the peers too.
        void* probe = ::mmap(nullptr, bytes + config_.block_bytes, PROT_NONE,
                             MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (probe != MAP_FAILED) {
          ::munmap(probe, bytes + config_.block_bytes);
          proposal = (reinterpret_cast<std::uintptr_t>(probe) + config_.block_bytes - 1) / config_.block_bytes *
                     config_.block_bytes;
        }
      }
      // Then the middle of the 47-bit user space, far from heap, libraries and stacks.
      if (proposal == 0) proposal = (std::uintptr_t{0x200000000000} + std::uintptr_t(attempt) * 0x40000000000ull);
    }
    proposal = gather(job_, proposal)[0];
    // A job of one process has no other copy to keep coherent: its threads
    // share the app view like any memory, so it is never protected and
    // never faults (no twins, no merges, no notices).
    const int protection = local() ? PROT_READ | PROT_WRITE : PROT_NONE;
    void* p = ::mmap(reinterpret_cast<void*>(proposal), bytes, protection, MAP_SHARED | MAP_FIXED_NOREPLACE, memfd_, 0);
    std::uint32_t ok = p != MAP_FAILED && reinterpret_cast<std::uintptr_t>(p) == proposal ? 1 : 0;
    const int error = errno;
    if (p != MAP_FAILED && ok == 0) ::munmap(p, bytes);  // a kernel that took the address as a hint
    const auto oks = gather(job_, ok);
    std::string failed;
    for (std::uint32_t q = 0; q < processes_; ++q)
      if (oks[q] == 0) failed += (failed.empty() ? "" : ", ") + std::to_string(q);
    if (failed.empty()) {
      app_ = static_cast<std::byte*>(p);
      return;
    }
    if (ok != 0) ::munmap(p, bytes);
    failures += "\n  " + hex(proposal) + ": taken in process(es) " + failed +
                (ok == 0 ? std::string(" (here: ") + std::strerror(error) + ")" : "");
    if (config_.address != 0) break;
  }
  throw Error(Errc::out_of_memory, "dsm: no address range of " + std::to_string(bytes) +
                                       " bytes is free in every process; tried:" + failures +
                                       "\n  (a smaller RDMX_DSM_HEAP, or Config::address of a range free everywhere)");
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

std::uint32_t Engine::probable_owner(std::uint32_t block) const noexcept {
  if (config_.home == HomePolicy::fixed) return block % processes_;
  return std::atomic_ref<std::uint32_t>(link_[block]).load(std::memory_order_relaxed);
}

void Engine::learn_owner(std::uint32_t block, std::uint32_t process, std::uint64_t version) noexcept {
  // Under the block's local lock, except for the reads of find_home, which
  // only ever move the link forward in versions: relaxed atomics suffice.
  std::atomic_ref<std::uint64_t> known(link_version_[block]);
  if (version < known.load(std::memory_order_relaxed)) return;
  known.store(version, std::memory_order_relaxed);
  std::atomic_ref<std::uint32_t>(link_[block]).store(process, std::memory_order_relaxed);
}

std::uint64_t Engine::find_home(std::uint32_t block, std::uint32_t& home) {
  std::uint32_t at = probable_owner(block);
  Backoff backoff;
  for (std::uint32_t hops = 0;; ++hops) {
    std::uint64_t seen;
    try {
      seen = blocking_fetch_add(owner_word(at, block), 0);
    } catch (const Error& e) {
      if (e.code() != Errc::peer_failed) throw;
      at = search_home(block, at);
      continue;
    }
    if (word::owner(seen) == at) {
      learn_owner(block, at, word::version(seen));
      home = at;
      return seen;
    }
    // A link: the block moved on from `at` to a later home.
    counters_.links_followed.fetch_add(1, std::memory_order_relaxed);
    at = word::owner(seen);
    // Links only point to later homes, so a search ends unless the block
    // keeps moving faster than it is followed: then let the movers finish.
    if (hops >= processes_) backoff(false);
  }
}

std::uint32_t Engine::search_home(std::uint32_t block, std::uint32_t failed) {
  // A home that failed holds the only copy of its versions: nothing to find.
  // A failed process on the way holds a link only: the home is elsewhere.
  for (int round = 0; round < 3; ++round) {
    for (std::uint32_t p = 0; p < processes_; ++p) {
      if (p == failed || job_.process_failed(p)) continue;
      try {
        if (word::owner(blocking_fetch_add(owner_word(p, block), 0)) == p) return p;
      } catch (const Error& e) {
        if (e.code() != Errc::peer_failed) throw;
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));  // a home handing the block over
  }
  throw Error(Errc::peer_failed, "dsm: block " + std::to_string(block) + ": its home was process " +
                                     std::to_string(failed) + " or another that failed; its data is lost");
}

void Engine::advance(std::uint64_t t) noexcept {
  std::uint64_t cur = time_.load(std::memory_order_relaxed);
  while (cur < t && !time_.compare_exchange_weak(cur, t, std::memory_order_acq_rel)) {
  }
}

std::uint64_t Engine::extend_lease(std::uint32_t home, std::uint32_t block, std::uint64_t until) {
  const RemoteLocator where = lease_word(home, block);
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
  const std::uint64_t leased = fetch_add(lease_word(home, block), 0).get();
  const std::uint64_t wts = std::max(leased + 1, now());
  advance(wts);
  return wts;
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

void Engine::protect(std::uint32_t block, int protection) { protect(block, 1, protection); }

void Engine::protect(std::uint32_t first, std::uint32_t count, int protection) {
  counters_.protects.fetch_add(1, std::memory_order_relaxed);
  if (::mprotect(app_ + offset(first), std::size_t{count} * config_.block_bytes, protection) != 0)
    throw Error(Errc::invalid_argument, "dsm: mprotect of blocks " + std::to_string(first) + " to " +
                                            std::to_string(first + count - 1) + " failed: " + std::strerror(errno));
}

// ---- the fault path --------------------------------------------------------

// The fault path waits only for its own operations: the blocking ones move
// the network and nothing else, so no call runs inside the handler (it could
// touch the block whose lock we hold), and none allocates (the thread may
// have faulted inside malloc, holding its lock).
void Engine::fault(void* address, bool write) {
  const auto block = static_cast<std::uint32_t>((static_cast<std::byte*>(address) - app_) / config_.block_bytes);
  void** warmed = fabric::acting_word<Engine>();
  if (warmed != nullptr && *warmed != this) [[unlikely]] {
    *warmed = this;  // first: a call run while warming that faults goes on to its fetch
    warm();
  }
  lock_block(block);
  try {
    const BlockState s = state_[block].load(std::memory_order_relaxed);
    // Another thread may have served this block while we waited for its lock.
    if (s == BlockState::dirty || (s == BlockState::clean && !write)) {
      unlock_block(block);
      return;
    }
    (write ? counters_.write_faults : counters_.read_faults).fetch_add(1, std::memory_order_relaxed);
    if (s == BlockState::invalid) fetch(block, write);
    // The blocks taken ahead are locked and cached: one mprotect for the run.
    const std::uint32_t last = block + take_ahead(block, write);
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
std::uint32_t Engine::take_ahead(std::uint32_t block, bool write) {
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
          fetch(b, write);
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
  if (at_home_[block] == 0) std::memcpy(twin_ + offset(block), rw_ + offset(block), config_.block_bytes);
  quiet_[block] = 0;
  while (dirty_lock_.test_and_set(std::memory_order_acquire)) std::this_thread::yield();
  if (listed_[block] == 0) {
    listed_[block] = 1;
    dirty_.push_back(block);  // within the reserved capacity: each block is listed once
  }
  dirty_lock_.clear(std::memory_order_release);
  state_[block].store(BlockState::dirty, std::memory_order_release);
}

void Engine::warm() {
  // Every block's owner word, lease word and directory word lies in some
  // process's metadata, its home copy in some process's home area.
  for (std::uint32_t p = 0; p < processes_; ++p) {
    transmitter(p);
    resolve(metas_[p]);
    resolve(homes_[p]);
  }
}

// Reads the block into the runtime view: from the writer a write notice
// named (fast read: one get), else from the home its links lead to.
void Engine::fetch(std::uint32_t block, bool for_write) {
  WriteNotice& hint = hint_[block];
  std::uint32_t source;
  std::uint64_t version;
  std::uint64_t seen = 0;
  std::uint64_t lease = 0;  // none: dropped by any overflowed signature
  // Directory: listed before the owner word is read. A release whose
  // invalidation does not see us had already published its new owner and
  // version, so the word read below names the home holding its writes; a
  // release that does see us leaves a mark for our next acquire.
  if (config_.invalidation == Invalidation::directory) join_sharers(block);
  if (hint.source != no_source) {
    // Fast read: no lease (the home is not asked), the notice is enough.
    source = hint.source;
    version = hint.version;
    counters_.fast_reads.fetch_add(1, std::memory_order_relaxed);
  } else {
    seen = find_home(block, source);
    version = word::version(seen);
    // Take a lease on this version; valid only if no release began meanwhile
    // (a releaser locks or bumps the owner word before it reads the lease word).
    // A block fetched to be written needs none: its release leases it anew,
    // and a lease of ours would only push our own write timestamp past it.
    if ((seen & word::lock_mask) == 0 && leasing() && !for_write) {
      lease = now() + config_.lease;
      extend_lease(source, block, lease);
    }
  }
  std::byte* into = rw_ + offset(block);
  at_home_[block] = source == rank_ && config_.home == HomePolicy::floating ? 1 : 0;
  if (source == rank_) {
    std::memcpy(into, home_ + offset(block), config_.block_bytes);
  } else {
    blocking_get(into, home_block(source, block));
    counters_.bytes_fetched.fetch_add(config_.block_bytes, std::memory_order_relaxed);
  }
  if (lease != 0 && blocking_fetch_add(owner_word(source, block), 0) != seen) lease = 0;
  hint.source = no_source;
  version_[block] = version;
  lease_[block] = lease;
}

// ---- release -----------------------------------------------------------------

std::byte* Engine::twin(std::uint32_t block) const noexcept {
  return (at_home_[block] != 0 ? home_ : twin_) + offset(block);
}

bool Engine::changed(std::uint32_t block) const {
  return std::memcmp(rw_ + offset(block), twin(block), config_.block_bytes) != 0;
}

bool Engine::release_block(std::uint32_t block) {
  // Read-only first: a thread writing now faults and waits for this block's
  // lock, then twins the merged block, so no write slips between diff and merge.
  protect(block, PROT_READ);
  return merge(block);
}

bool Engine::merge(std::uint32_t block) {
  // Nothing written since the twin (a fast-released block left alone since
  // its last release): nothing to publish, no new version, no notice.
  if (!changed(block)) {
    state_[block].store(BlockState::clean, std::memory_order_release);
    return false;
  }
  if (config_.home == HomePolicy::floating)
    release_floating(block, false);
  else
    release_fixed(block);
  if (config_.invalidation == Invalidation::directory) invalidate_sharers(block);
  state_[block].store(BlockState::clean, std::memory_order_release);
  counters_.merges.fetch_add(1, std::memory_order_relaxed);
  return true;
}

// The fast release (floating home; MENPS's fast release mode): a dirty
// block that changed since its twin is merged while it stays writable and
// stays dirty, its twin now the merged state; one that went Config::keep
// releases unchanged is made read-only and clean (one mprotect per run of
// adjacent ones), the rest stay as they are. A block written in every
// interval (or every few) so costs one write fault and one mprotect in all,
// not one of each per interval; a block written once costs the same two as
// before, the second `keep` releases later, and a comparison with its twin
// at each release until then. With a fixed home (or keep 0) every dirty
// block is made read-only and merged (remote diffs are put from the runtime
// view, which must not change under the puts).
// Every block of the list is locked, in ascending order (the only order in
// which any thread holds several), for the whole release: the floating
// home's blocks are then released together (release_floating_all).
void Engine::release_blocks(std::vector<std::uint32_t>& blocks) {
  std::sort(blocks.begin(), blocks.end());
  const bool floating = config_.home == HomePolicy::floating;
  const bool fast = floating && config_.keep > 0;
  std::vector<FloatingRelease> todo;
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
      if (!floating) {
        merge(b);
      } else if (changed(b)) {
        todo.push_back({b, false});
      } else {
        state_[b].store(BlockState::clean, std::memory_order_release);
      }
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
  release_floating_all(todo);
  for (const FloatingRelease& r : todo) {
    if (config_.invalidation == Invalidation::directory) invalidate_sharers(r.block);
    if (!r.writable) state_[r.block].store(BlockState::clean, std::memory_order_release);
    counters_.merges.fetch_add(1, std::memory_order_relaxed);
    if (r.writable) counters_.fast_releases.fetch_add(1, std::memory_order_relaxed);
  }
  for (std::uint32_t b : blocks) unlock_block(b);
  unlock.locked = nullptr;
  // Assigned, not swapped: the list keeps its capacity (release_all hands it
  // back as the spare, so that a release allocates no list of every block).
  blocks.assign(kept.begin(), kept.end());
}

// Releases floating-home blocks together: for the blocks this process was
// home of at its last release (their words are its own), every lock is
// asked for at once (each word expected as that release left it), then
// every lease word of those taken is read at once, the blocks are merged
// here, and every lock is given back at once: three round trips for the lot
// where one block at a time costs three each, which is what a release of
// many blocks spends its time on where a round trip is dear (TCP, a large
// machine's shared memory). The other blocks, and those whose word was not
// as expected (locked by another process, or taken since), are released one
// at a time after the others, holding no other owner word, as
// release_floating does.
void Engine::release_floating_all(std::span<const FloatingRelease> todo) {
  if (todo.size() <= 1) {
    for (const FloatingRelease& r : todo) release_floating(r.block, r.writable);
    return;
  }
  const std::uint64_t me = rank_ + 1;
  std::vector<std::uint64_t> expected(todo.size());
  std::vector<std::uint8_t> held(todo.size(), 0);
  std::vector<Future<std::uint64_t>> ops;
  ops.reserve(todo.size());
  for (std::size_t i = 0; i < todo.size(); ++i) {
    if (probable_owner(todo[i].block) != rank_) continue;
    expected[i] = word::pack(version_[todo[i].block], rank_, 0);
    ops.push_back(compare_swap(owner_word(rank_, todo[i].block), expected[i], expected[i] | me));
    held[i] = 1;
  }
  std::size_t next = 0;
  for (std::size_t i = 0; i < todo.size(); ++i)
    if (held[i] != 0) held[i] = ops[next++].get() == expected[i] ? 1 : 0;
  ops.clear();
  for (std::size_t i = 0; i < todo.size(); ++i)
    if (held[i] != 0) ops.push_back(fetch_add(lease_word(rank_, todo[i].block), 0));
  next = 0;
  for (std::size_t i = 0; i < todo.size(); ++i) {
    if (held[i] == 0) continue;
    const std::uint32_t block = todo[i].block;
    // Tardis, as write_timestamp: past every lease readers took on the version it replaces.
    const std::uint64_t wts = std::max(ops[next++].get() + 1, now());
    advance(wts);
    const std::uint64_t lease = leasing() ? wts + config_.lease : 0;
    if (lease != 0) extend_lease(rank_, block, lease);
    lease_[block] = lease;
    if (todo[i].writable)
      merge_writable(block, false);
    else
      merge_into_home(block, false);
    at_home_[block] = 1;  // the view (or, still writable, the twin) is what the home copy now holds
  }
  std::atomic_thread_fence(std::memory_order_release);
  ops.clear();
  for (std::size_t i = 0; i < todo.size(); ++i)
    if (held[i] != 0)
      ops.push_back(compare_swap(owner_word(rank_, todo[i].block), expected[i] | me,
                                 word::pack(word::version(expected[i]) + 1, rank_, 0)));
  next = 0;
  for (std::size_t i = 0; i < todo.size(); ++i) {
    if (held[i] == 0) continue;
    const std::uint32_t block = todo[i].block;
    if (ops[next++].get() != (expected[i] | me))
      throw Error(Errc::protocol, "dsm: the owner word of block " + std::to_string(block) +
                                      " changed while this process held its lock");
    version_[block] = word::version(expected[i]) + 1;
    learn_owner(block, rank_, version_[block]);
    note(WriteNotice{block, rank_, version_[block]});
  }
  for (std::size_t i = 0; i < todo.size(); ++i)
    if (held[i] == 0) release_floating(todo[i].block, todo[i].writable);
}

void Engine::release_floating(std::uint32_t block, bool writable) {
  const std::uint32_t me = rank_ + 1;
  // Lock the home's word. Start at the probable owner and expect its word
  // as the last release we know of left it: right whenever we released the
  // block last, which is what floating homes are for, and a wrong guess
  // costs no more than reading the word first would, as a failed swap
  // returns it. A word that names another process is a link: follow it.
  std::uint32_t home_process = probable_owner(block);
  const std::uint64_t known = home_process == rank_
                                  ? version_[block]
                                  : std::atomic_ref<std::uint64_t>(link_version_[block]).load(std::memory_order_relaxed);
  std::uint64_t expected = word::pack(known, home_process, 0);
  Backoff backoff;
  for (std::uint32_t hops = 0;;) {
    std::uint64_t seen;
    try {
      seen = compare_swap(owner_word(home_process, block), expected, expected | me).get();
    } catch (const Error& e) {
      if (e.code() != Errc::peer_failed) throw;
      home_process = search_home(block, home_process);
      expected = word::pack(0, home_process, 0);  // a guess: the swap returns the word
      continue;
    }
    if (seen == expected) break;
    if (word::owner(seen) != home_process) {
      counters_.links_followed.fetch_add(1, std::memory_order_relaxed);
      home_process = word::owner(seen);
      expected = word::pack(word::version(seen), home_process, 0);
      if (++hops >= processes_) backoff(false);  // the block keeps moving: let the movers finish
      continue;
    }
    expected = seen & ~word::lock_mask;  // locked by another releaser: wait for it
    backoff(false);
  }
  const std::uint64_t version = word::version(expected);
  std::byte* home = home_ + offset(block);
  const bool moved = home_process != rank_;
  // Our merged copy is the newest version: lease it to ourselves past the
  // write, once leases are worth their two round trips (leasing()).
  const std::uint64_t wts = write_timestamp(home_process, block);
  const std::uint64_t lease = leasing() ? wts + config_.lease : 0;
  if (lease != 0) extend_lease(rank_, block, lease);
  lease_[block] = lease;
  if (moved) {
    // The twin our home copy served as is about to be overwritten.
    if (at_home_[block] != 0) {
      std::memcpy(twin_ + offset(block), home, config_.block_bytes);
      at_home_[block] = 0;
    }
    // Migration: the previous home's copy, with one get, straight into ours.
    get(home, home_block(home_process, block)).get();
    counters_.migrations.fetch_add(1, std::memory_order_relaxed);
    counters_.bytes_fetched.fetch_add(config_.block_bytes, std::memory_order_relaxed);
  }
  if (writable)
    merge_writable(block, moved);
  else
    merge_into_home(block, moved);
  at_home_[block] = 1;  // the view (or, still writable, the twin) is what the home copy now holds
  std::atomic_thread_fence(std::memory_order_release);
  const std::uint64_t released = word::pack(version + 1, rank_, 0);
  if (moved) {
    // Our word names us before the previous home's links to us, so that a
    // search that follows that link finds the home. Nobody else changes
    // our word meanwhile: a lock is only ever taken on a word that names
    // its own process, and ours names another.
    std::uint64_t ours = std::atomic_ref<std::uint64_t>(reinterpret_cast<std::uint64_t*>(meta_)[block])
                             .load(std::memory_order_acquire);
    for (;;) {
      const std::uint64_t seen = compare_swap(owner_word(rank_, block), ours, released).get();
      if (seen == ours) break;
      ours = seen;
    }
  }
  const std::uint64_t was = compare_swap(owner_word(home_process, block), expected | me, released).get();
  if (was != (expected | me))
    throw Error(Errc::protocol, "dsm: the owner word of block " + std::to_string(block) +
                                    " changed while this process held its lock");
  version_[block] = version + 1;
  learn_owner(block, rank_, version + 1);
  note(WriteNotice{block, rank_, version + 1});
}

// The merge of a read-only block: the bytes that differ from the twin go to
// the home copy; after a migration our copy becomes the merged block.
void Engine::merge_into_home(std::uint32_t block, bool moved) {
  const std::size_t off = offset(block);
  std::byte* home = home_ + off;
  const std::byte* mine = rw_ + off;
  const std::byte* twin = this->twin(block);
  for (std::size_t i = 0; i < config_.block_bytes; i += 8) {
    if (same_word(mine + i, twin + i)) continue;
    for (std::size_t j = i; j < i + 8; ++j) {
      if (mine[j] == twin[j]) continue;
      if (config_.check_races && moved && home[j] != twin[j]) report_race(block, j);
      home[j] = mine[j];
    }
  }
  // It holds every write up to the new version.
  if (moved) std::memcpy(rw_ + off, home, config_.block_bytes);
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
void Engine::merge_writable(std::uint32_t block, bool moved) {
  const std::size_t off = offset(block);
  auto* mine = reinterpret_cast<std::uint64_t*>(rw_ + off);
  auto* twin = reinterpret_cast<std::uint64_t*>(this->twin(block));
  auto* home = reinterpret_cast<std::uint64_t*>(home_ + off);
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
  const std::size_t words = config_.block_bytes / 8;
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
  for (std::size_t w = 0; w < words; ++w) {
    std::atomic_ref<std::uint64_t> word(mine[w]);
    std::uint64_t seen = word.load(std::memory_order_acquire);
    if (seen == twin[w] && home[w] == seen) continue;
    if (config_.check_races)
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

void Engine::report_race(std::uint32_t block, std::size_t at) {
  counters_.races.fetch_add(1, std::memory_order_relaxed);
  rdmx::log(rdmx::LogLevel::error,
            "dsm: data race: block %u offset %zu (heap offset %zu) was written by process %u and by "
            "another process between the same synchronizations\n",
            block, at, offset(block) + at, rank_);
}

void Engine::release_fixed(std::uint32_t block) {
  const std::uint32_t home_process = block % processes_;
  const std::size_t off = offset(block);
  const std::byte* mine = rw_ + off;
  const std::byte* twin = this->twin(block);
  // Remote diff merge: each changed run of bytes is its own put.
  std::size_t i = 0;
  bool sent = false;
  while (i < config_.block_bytes) {
    if (mine[i] == twin[i]) {
      ++i;
      continue;
    }
    std::size_t end = i + 1;
    while (end < config_.block_bytes && mine[end] != twin[end]) ++end;
    if (home_process == rank_) {
      std::memcpy(home_ + off + i, mine + i, end - i);
    } else {
      post_put(mine + i, home_block(home_process, block).slice(i, end - i));
      sent = true;
    }
    i = end;
  }
  // The runs must be at the home before the version says so.
  if (sent) flush(home_process);
  write_timestamp(home_process, block);
  lease_[block] = 0;  // others may have merged runs we do not hold
  const std::uint64_t was = fetch_add(owner_word(home_process, block), std::uint64_t{1} << 32).get();
  // Our copy is current only if nobody else merged since we fetched it.
  if (word::version(was) == version_[block]) version_[block] = word::version(was) + 1;
  note(WriteNotice{block, home_process, word::version(was) + 1});
}

void Engine::note(const WriteNotice& notice) {
  if (config_.invalidation == Invalidation::directory) return;  // sharers were told directly
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
// dirty blocks wait for its next full release. A floating-home block that
// changed is fast-released (stays dirty and listed); a fixed-home one is
// made read-only and merged (it stays listed; release_blocks skips it).
void Engine::release_range(const void* address, std::size_t bytes) {
  if (!contains(address) || bytes == 0 || bytes > config_.heap_bytes ||
      static_cast<const std::byte*>(address) - app_ > static_cast<std::ptrdiff_t>(config_.heap_bytes - bytes))
    throw Error(Errc::invalid_argument, "dsm: a release of a range outside the shared heap");
  const std::size_t at = static_cast<std::size_t>(static_cast<const std::byte*>(address) - app_);
  const auto first = static_cast<std::uint32_t>(at / config_.block_bytes);
  const auto last = static_cast<std::uint32_t>((at + bytes - 1) / config_.block_bytes);
  for (std::uint32_t b = first; b <= last; ++b) lock_block(b);
  try {
    for (std::uint32_t b = first; b <= last; ++b) {
      if (state_[b].load(std::memory_order_relaxed) != BlockState::dirty || !changed(b)) continue;
      if (config_.home == HomePolicy::floating && config_.keep > 0) {
        release_floating(b, true);
        quiet_[b] = 0;
        if (config_.invalidation == Invalidation::directory) invalidate_sharers(b);
        counters_.merges.fetch_add(1, std::memory_order_relaxed);
        counters_.fast_releases.fetch_add(1, std::memory_order_relaxed);
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

// ---- acquire -------------------------------------------------------------------

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

// ---- directory invalidation (the baseline) ----------------------------------

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

// ---- barrier ---------------------------------------------------------------------

// Two ways to exchange signatures, chosen once for the job (disseminate_):
// - Where every process reaches every other with native one-sided
//   operations (shared memory, RDMA), a process that released or acquired
//   something puts its signature into every other process's slot for this
//   barrier's parity and flushes; then all meet in a dissemination barrier
//   (round k: a record to process rank + 2^k, wait for the one from
//   rank - 2^k), log2(P) rounds of one put each instead of P - 1, whose
//   records carry the largest logical clock seen so far. A slot whose
//   signature is from this barrier was filled before its sender's first
//   round, so before the rounds end here; an older one means the sender
//   had nothing to say.
// - Otherwise (TCP, where a put is a round trip through the peer's
//   service thread) every process sends every other its signature as one
//   message, whose handler raises the sender's flag here, and waits for
//   every flag.
// Two slot sets suffice: nobody can start barrier e+2, and overwrite e's
// set, before every process has entered e+1, which it does only after
// reading e's signatures. Flags and records are per parity too: a
// signature sent as a message may go to either of two threads (by its
// size), so e+2's may be delivered before e+1's, and must not raise the
// flag e+1's waiter reads.
void Engine::process_barrier(bool alone) {
  counters_.barriers.fetch_add(1, std::memory_order_relaxed);
  if (local()) {
    // Nothing is ever dirty or stale (map_heap); the threads met in barrier().
    ++epoch_;
    return;
  }
  release_all();
  std::vector<std::byte> mine;
  {
    std::lock_guard<std::mutex> hold(history_mutex_);
    mine = history_.encode(epoch_, now());
  }
  const std::uint64_t target = epoch_ + 1;
  const std::uint64_t parity = target % 2;
  if (disseminate_) {
    advance(disseminate(mine, target));
  } else {
    // One message per peer: it goes to worker thread 0, which runs every
    // process's barrier and receives it as it waits, if the receive needs
    // no allocation: the message may arrive while that thread serves a
    // fault, which may have interrupted malloc. A larger one goes to the
    // service thread, which wakes up for it (slower).
    const std::uint32_t receiver = mine.size() <= fabric::receive_reserved_bytes ? 0 : service_thread;
    for (std::uint32_t q = 0; q < processes_; ++q) {
      if (q == rank_) continue;
      const std::uint32_t sender = rank_;
      call_buffer(ThreadId{q, receiver},
                  [sender, target](std::span<std::byte> signature) { deliver_barrier(sender, target, signature); },
                  mine);
    }
    for (std::uint32_t p = 0; p < processes_; ++p)
      if (p != rank_) wait_for_peer(p, target);
  }
  std::vector<DecodedSignature> received;
  for (std::uint32_t p = 0; p < processes_; ++p) {
    if (p == rank_) continue;
    const std::byte* slot = meta_ + barrier_slot_offset(parity, p);
    SignatureHeader header;
    std::memcpy(&header, slot, sizeof header);
    if (header.count > config_.notices)
      throw Error(Errc::protocol, "dsm: process " + std::to_string(p) + " sent a malformed barrier signature");
    if (header.epoch + 1 != target) {
      if (disseminate_) continue;  // nothing from p this time
      // Every process passes the same barriers.
      throw Error(Errc::protocol, "dsm: process " + std::to_string(p) + "'s signature in barrier " +
                                      std::to_string(target) + "'s slot is from barrier " + std::to_string(header.epoch + 1));
    }
    received.push_back(decode({slot, Signature::encoded_size(header.count)}, blocks_, processes_));
  }
  acquire(received, alone);
  if (config_.invalidation == Invalidation::directory) acquire_directory();
  // Everything acquired here every process acquired too: no need to pass it on.
  std::lock_guard<std::mutex> hold(history_mutex_);
  history_.clear();
  ++epoch_;
}

std::uint64_t Engine::disseminate(std::span<const std::byte> signature, std::uint64_t target) {
  const std::uint64_t parity = target % 2;
  SignatureHeader header;
  std::memcpy(&header, signature.data(), sizeof header);
  if (header.count != 0 || header.overflowed != 0) {
    for (std::uint32_t q = 0; q < processes_; ++q)
      if (q != rank_) post_put(signature.data(), barrier_slot(q, parity, rank_, signature.size()));
    for (std::uint32_t q = 0; q < processes_; ++q)
      if (q != rank_) flush(q);
  }
  std::uint64_t clock = header.time;
  std::uint32_t round = 0;
  for (std::uint32_t distance = 1; distance < processes_; distance *= 2, ++round) {
    const std::uint32_t to = (rank_ + distance) % processes_;
    const std::uint64_t sent = clock;
    put(&sent, round_word(to, parity, round, 0)).get();
    transmitter(to).fence();  // the clock lands before the flag says it is there
    put(&target, round_word(to, parity, round, 1)).get();
    auto* record = reinterpret_cast<std::uint64_t*>(meta_ + rounds_offset_ + (parity * max_rounds + round) * 16);
    await_flag(record[1], target, every_peer);
    clock = std::max(clock, std::atomic_ref<std::uint64_t>(record[0]).load(std::memory_order_relaxed));
  }
  return clock;
}

// A barrier signature that came as a message: stored where a put would have
// put it, then the flag raised, as the puts' flush orders them. Runs on the
// service thread. One too large to be a signature is stored as a header
// that says so, which process_barrier reports.
void Engine::deliver_barrier(std::uint32_t sender, std::uint64_t target, std::span<const std::byte> signature) {
  Engine* engine = current();
  if (engine == nullptr || sender >= engine->processes_) return;  // the Space is gone; nobody waits
  std::byte* at = engine->meta_ + engine->barrier_slot_offset(target % 2, sender);
  if (signature.size() <= engine->slot_bytes_ && signature.size() >= sizeof(SignatureHeader)) {
    std::memcpy(at, signature.data(), signature.size());
  } else {
    SignatureHeader malformed{};
    malformed.count = ~0u;
    std::memcpy(at, &malformed, sizeof malformed);
  }
  std::atomic_ref<std::uint64_t>(*reinterpret_cast<std::uint64_t*>(engine->meta_ + engine->barrier_flag_offset(target % 2, sender)))
      .store(target, std::memory_order_release);
}

// Waits until `process` has raised its flag here to `target`; a process that
// died never will, so it is probed every few milliseconds (Errc::peer_failed).
void Engine::wait_for_peer(std::uint32_t process, std::uint64_t target) {
  await_flag(*reinterpret_cast<std::uint64_t*>(meta_ + barrier_flag_offset(target % 2, process)), target, process);
}

// Waits until a flag peers raise here reaches `target`. A process that died
// never raises it, so `process` (every peer: every_peer) is asked every few
// milliseconds whether it is alive: a waiter in a dissemination round hears
// from one peer only, which may itself wait on the dead one.
void Engine::await_flag(std::uint64_t& word, std::uint64_t target, std::uint32_t process) {
  std::atomic_ref<std::uint64_t> flag(word);
  Backoff backoff;
  auto last_check = std::chrono::steady_clock::now();
  while (flag.load(std::memory_order_acquire) < target) {
    backoff(progress() != 0);
    const auto t = std::chrono::steady_clock::now();
    if (t - last_check < std::chrono::milliseconds(5)) continue;
    last_check = t;
    probe_peers("dsm::barrier", process);
  }
}

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

void Engine::barrier(bool every_thread) {
  const std::uint32_t threads = job_.threads_per_process();
  if (!every_thread || threads <= 1) {
    // Peers send their signatures to worker thread 0 (process_barrier): the
    // barrier must run there, or on the main thread outside Job::run.
    if (const ThreadId me = this_thread(); me.is_service() || me.thread != 0)
      throw Error(Errc::invalid_argument, "dsm::barrier: called by " + to_string(me) +
                                              "; only worker thread 0 (or the main thread outside Job::run) may call it, "
                                              "or every worker thread dsm::thread_barrier");
    process_barrier(threads <= 1);
    return;
  }
  // Worker thread 0 runs the process's barrier once the others have arrived
  // (Job::allgather belongs to it); the others wait for it.
  std::unique_lock<std::mutex> hold(meet_mutex_);
  const std::uint64_t generation = generation_;
  const ThreadId me = this_thread();
  if (me.is_service() || me.thread >= threads)
    throw Error(Errc::invalid_argument, "dsm::thread_barrier: called by " + to_string(me) + ", not a worker thread");
  if (me.thread != 0) {
    ++arrived_;
    meet_cv_.notify_all();
    meet_cv_.wait(hold, [&] { return generation_ != generation; });
    if (meet_error_) std::rethrow_exception(meet_error_);
    return;
  }
  meet_cv_.wait(hold, [&] { return arrived_ == threads - 1; });
  arrived_ = 0;
  meet_error_ = nullptr;
  hold.unlock();
  std::exception_ptr error;
  try {
    process_barrier(true);
  } catch (...) {
    error = std::current_exception();
  }
  hold.lock();
  meet_error_ = error;
  ++generation_;
  meet_cv_.notify_all();
  if (error) std::rethrow_exception(error);
}

// ---- allocation --------------------------------------------------------------------

void* Engine::allocate(std::size_t bytes, std::size_t alignment) {
  if (alignment == 0 || (alignment & (alignment - 1)) != 0 || alignment > config_.block_bytes)
    throw Error(Errc::invalid_argument, "dsm::allocate: alignment " + std::to_string(alignment) +
                                            " is not a power of two up to the block size " +
                                            std::to_string(config_.block_bytes));
  struct Request {
    std::uint64_t bytes, alignment;
  };
  const Request mine{bytes, alignment};
  const auto all = gather(job_, mine);
  for (std::uint32_t p = 0; p < processes_; ++p)
    if (all[p].bytes != bytes || all[p].alignment != alignment)
      throw Error(Errc::invalid_argument, "dsm::allocate is collective: process " + std::to_string(p) + " asked for " +
                                              std::to_string(all[p].bytes) + " bytes (alignment " +
                                              std::to_string(all[p].alignment) + ") while process " +
                                              std::to_string(rank_) + " asked for " + std::to_string(bytes) + " (" +
                                              std::to_string(alignment) + ")");
  const std::size_t start = (allocated_ + alignment - 1) / alignment * alignment;
  if (bytes == 0 || start > config_.heap_bytes || bytes > config_.heap_bytes - start)
    throw Error(bytes == 0 ? Errc::invalid_argument : Errc::out_of_memory,
                "dsm::allocate: " + std::to_string(bytes) + " bytes do not fit the shared heap (" +
                    std::to_string(config_.heap_bytes - std::min(start, config_.heap_bytes)) + " of " +
                    std::to_string(config_.heap_bytes) + " bytes left; RDMX_DSM_HEAP sets its size)");
  allocated_ = start + bytes;
  return app_ + start;
}

// ---- mutexes -------------------------------------------------------------------------

void Engine::check_mutex(std::uint32_t mutex, const char* what) const {
  if (mutex >= config_.mutexes)
    throw Error(Errc::invalid_argument, std::string("dsm::Mutex::") + what + ": mutex " + std::to_string(mutex) +
                                            " does not exist (the space has " + std::to_string(config_.mutexes) +
                                            "; RDMX_DSM_MUTEXES)");
}

// A mutex word: bits 0-15 the holder + 1 (0: free), bits 16-63 a stamp:
// the epoch + 1 of the last unlock that put a signature into the slot (0:
// none yet). An acquirer whose epoch is past the stamp skips the slot (its
// barrier delivered what the slot holds). A lock's compare-and-swap expects
// the free word this process last saw, so re-taking a mutex this process
// released is one round trip.
namespace mutex_bits {
inline constexpr std::uint64_t holder_mask = 0xffff;
inline std::uint64_t stamp(std::uint64_t w) { return w >> 16; }
inline std::uint64_t free_word(std::uint64_t stamp) { return stamp << 16; }
}  // namespace mutex_bits

bool Engine::try_lock(std::uint32_t mutex) {
  check_mutex(mutex, "try_lock");
  const RemoteLocator where = mutex_word(mutex);
  std::uint64_t expected = mutex_free_[mutex].load(std::memory_order_relaxed);
  for (;;) {
    const std::uint64_t seen = blocking_compare_swap(where, expected, expected | (rank_ + 1));
    if (seen == expected) break;
    if ((seen & mutex_bits::holder_mask) != 0) return false;
    expected = seen;  // free, with another stamp than we knew
  }
  acquire_mutex(mutex, expected);
  return true;
}

void Engine::lock(std::uint32_t mutex) {
  check_mutex(mutex, "lock");
  const RemoteLocator where = mutex_word(mutex);
  std::uint64_t expected = mutex_free_[mutex].load(std::memory_order_relaxed);
  Backoff backoff;
  auto last_check = std::chrono::steady_clock::now();
  for (;;) {
    const std::uint64_t seen = blocking_compare_swap(where, expected, expected | (rank_ + 1));
    if (seen == expected) break;
    const std::uint64_t holder = seen & mutex_bits::holder_mask;
    if (holder == 0) {
      expected = seen;  // free, with another stamp than we knew: try again at once
      continue;
    }
    if (holder > processes_)
      throw Error(Errc::protocol, "dsm: mutex " + std::to_string(mutex) + " holds a malformed word " +
                                      std::to_string(seen));
    // The holder's unlock keeps its stamp or sets its epoch's; guess the former.
    expected = seen & ~mutex_bits::holder_mask;
    // A holder that died never unlocks: touching it every few milliseconds
    // turns its death into Errc::peer_failed here.
    const auto now = std::chrono::steady_clock::now();
    if (now - last_check > std::chrono::milliseconds(5)) {
      last_check = now;
      probe_peers("dsm: mutex " + std::to_string(mutex) + "'s holder", static_cast<std::uint32_t>(holder - 1));
    }
    progress();
    backoff(false);
  }
  acquire_mutex(mutex, expected);
}

void Engine::acquire_mutex(std::uint32_t mutex, std::uint64_t free_word) {
  counters_.locks.fetch_add(1, std::memory_order_relaxed);
  held_[mutex].store(free_word | (rank_ + 1), std::memory_order_relaxed);
  // The lock word changed hands through UCX, not a C++ atomic: order this
  // thread's later accesses after it (all a one-process job needs).
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (local()) return;
  if (config_.invalidation == Invalidation::directory) acquire_directory();
  // A signature from before our last barrier names nothing we have not
  // acquired there; the stamp says so without reading the slot.
  const std::uint64_t stamp = mutex_bits::stamp(free_word);
  if (stamp == 0 || stamp - 1 < epoch_) return;
  // One get reads the header and, for a short list, the notices with it.
  std::vector<std::byte> bytes(std::min<std::size_t>(slot_bytes_, 1024));
  blocking_get(bytes.data(), mutex_slot(mutex, bytes.size()));
  SignatureHeader header{};
  std::memcpy(&header, bytes.data(), sizeof header);
  if (header.count > config_.notices)
    throw Error(Errc::protocol, "dsm: mutex " + std::to_string(mutex) + " holds a malformed signature");
  if (header.epoch < epoch_) return;
  if (Signature::encoded_size(header.count) > bytes.size()) {
    bytes.resize(Signature::encoded_size(header.count));
    blocking_get(bytes.data(), mutex_slot(mutex, bytes.size()));
  }
  const DecodedSignature sig = decode(bytes, blocks_, processes_);
  acquire({&sig, 1}, job_.threads_per_process() <= 1);
}

void Engine::unlock(std::uint32_t mutex) { unlock(mutex, nullptr, 0); }

void Engine::unlock(std::uint32_t mutex, const void* only, std::size_t bytes) {
  check_mutex(mutex, "unlock");
  std::atomic_thread_fence(std::memory_order_seq_cst);  // the critical section's accesses before the word frees
  const RemoteLocator where = mutex_word(mutex);
  const std::uint64_t held = held_[mutex].load(std::memory_order_relaxed);
  if ((held & mutex_bits::holder_mask) != rank_ + 1) throw not_held(mutex, blocking_fetch_add(where, 0));
  std::uint64_t free_word = held & ~mutex_bits::holder_mask;
  if (!local()) {
    if (only == nullptr)
      release_all();
    else
      release_range(only, bytes);
    std::vector<std::byte> sig;
    {
      std::lock_guard<std::mutex> hold(history_mutex_);
      // An empty history (nothing released or acquired since the last
      // barrier) tells the next holder nothing its barrier did not: the slot
      // and its stamp stay as they are, and the unlock is one round trip.
      if (!history_.notices().empty() || history_.overflowed()) {
        sig = history_.encode(epoch_, now());
        free_word = mutex_bits::free_word(epoch_ + 1);
      }
    }
    if (!sig.empty()) {
      put(sig.data(), mutex_slot(mutex, sig.size())).get();
      transmitter(where.process).fence();  // the signature lands before the lock word frees
    }
  }
  // Cleared before the word frees: another thread of ours may take it next.
  held_[mutex].store(0, std::memory_order_relaxed);
  const std::uint64_t was = blocking_compare_swap(where, held, free_word);
  if (was != held) throw not_held(mutex, was);
  mutex_free_[mutex].store(free_word, std::memory_order_relaxed);
}

Error Engine::not_held(std::uint32_t mutex, std::uint64_t word) {
  const std::uint64_t holder = word & mutex_bits::holder_mask;
  return Error(Errc::invalid_argument, "dsm::Mutex::unlock: mutex " + std::to_string(mutex) +
                                           " is not held by this process" +
                                           (holder == 0 ? std::string(" (it is free)")
                                                        : " (process " + std::to_string(holder - 1) + " holds it)"));
}

}  // namespace rdmx::dsm
