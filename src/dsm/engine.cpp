// The engine's construction: the configuration every process must share,
// the protocols it names, per-block state; and the waits on peers that
// may fail.
#include "engine.hpp"

#include <unistd.h>

#include <algorithm>
#include <string>
#include <thread>

#include "rdmx/core/error.hpp"
#include "rdmx/fabric/call.hpp"
#include "rdmx/fabric/job.hpp"
#include "rdmx/fabric/layer.hpp"
#include "rdmx/fabric/rma.hpp"
#include "signals.hpp"

namespace rdmx::dsm {

Counters AtomicCounters::snapshot() const {
  auto r = [](const std::atomic<std::uint64_t>& v) { return v.load(std::memory_order_relaxed); };
  return Counters{r(read_faults), r(write_faults), r(fast_reads), r(read_ahead), r(write_ahead), r(migrations),
                  r(links_followed), r(merges), r(fast_releases), r(invalidations), r(overflows), r(bytes_fetched),
                  r(races), r(protects), r(barriers), r(locks), r(causal_misses)};
}

Config Engine::agreed(Job& job, const Layer& layer, Config config) {
  const std::uint32_t processes = job.size();
  const std::size_t page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  if (config.block_bytes == 0 || config.block_bytes % page != 0)
    throw Error(Errc::invalid_argument, "dsm: the block size " + std::to_string(config.block_bytes) +
                                            " (RDMX_DSM_BLOCK, Config::block_bytes) is not a multiple of the page size " +
                                            std::to_string(page));
  if (config.heap_bytes == 0 || config.heap_bytes % config.block_bytes != 0)
    throw Error(Errc::invalid_argument, "dsm: the heap size " + std::to_string(config.heap_bytes) +
                                            " (RDMX_DSM_HEAP, Config::heap_bytes) is not a positive multiple of the "
                                            "block size " + std::to_string(config.block_bytes) + " (RDMX_DSM_BLOCK)");
  // Every process fills its heap's memory at start-up: one larger than the
  // machine's memory is refused before anything is mapped.
  const auto pages = ::sysconf(_SC_PHYS_PAGES);
  if (pages > 0 && config.heap_bytes > static_cast<std::size_t>(pages) * page)
    throw Error(Errc::out_of_memory, "dsm: the heap size " + std::to_string(config.heap_bytes) +
                                         " (RDMX_DSM_HEAP, Config::heap_bytes) is more than this machine's memory (" +
                                         std::to_string(static_cast<std::size_t>(pages) * page) +
                                         " bytes): every process fills its heap when the space starts");
  if (processes > 0xfffe) throw Error(Errc::invalid_argument, "dsm: at most 65534 processes");
  // notices == 0 is valid: every signature that carries a write overflows,
  // so acquirers rely on leases alone (Tardis; MENPS's sweep starts there).
  if (config.mutexes == 0) throw Error(Errc::invalid_argument, "dsm: mutexes must be at least 1");
  if (config.causal_mutex != Config::no_mutex && config.causal_mutex >= config.mutexes)
    throw Error(Errc::invalid_argument, "dsm: the causal mutex " + std::to_string(config.causal_mutex) +
                                            " does not exist (the space has " + std::to_string(config.mutexes) +
                                            "; RDMX_DSM_MUTEXES)");
  if (layer.engine() != nullptr) throw Error(Errc::invalid_argument, "dsm: this process already has a dsm::Space");
  if (config.invalidation == Invalidation::directory && processes > directory_max_processes)
    throw Error(Errc::invalid_argument, "dsm: directory invalidation tracks at most " +
                                            std::to_string(directory_max_processes) + " processes, the job has " +
                                            std::to_string(processes) + " (RDMX_DSM_INVALIDATION=signature has no limit)");
  // Leases stand in for write notices a signature dropped; a directory
  // drops none.
  if (config.invalidation == Invalidation::directory) config.lease = 0;
  if (config.heap_bytes / config.block_bytes > 0xffffffffull)
    throw Error(Errc::invalid_argument, "dsm: more than 2^32 blocks");
  config.keep = std::min<std::uint32_t>(config.keep, 255);

  // Every process must run the same configuration, or block numbers and
  // protocols would disagree.
  struct Shape {
    std::uint64_t heap, block, notices, mutexes, home, invalidation, races, lease, causal;
    bool operator==(const Shape&) const = default;
  };
  const Shape mine{config.heap_bytes, config.block_bytes, config.notices, config.mutexes,
                   static_cast<std::uint64_t>(config.home), static_cast<std::uint64_t>(config.invalidation),
                   config.check_races ? 1u : 0u, config.lease, config.causal_mutex};
  const auto shapes = job.allgather(mine);
  for (std::uint32_t p = 0; p < processes; ++p)
    if (!(shapes[p] == mine))
      throw Error(Errc::invalid_argument, "dsm: process " + std::to_string(p) + " configured its space differently " +
                                              "from process " + std::to_string(job.rank()) +
                                              " (RDMX_DSM_* settings must match in every process)");
  return config;
}

std::unique_ptr<Home> Engine::make_home() {
  switch (config_.home) {
    case HomePolicy::fixed:
      return make_fixed_home();
    case HomePolicy::floating:
      break;
  }
  return make_floating_home();
}

std::unique_ptr<Invalidator> Engine::make_invalidator() {
  switch (config_.invalidation) {
    case Invalidation::directory:
      return make_directory_invalidation();
    case Invalidation::signature:
      break;
  }
  return make_signature_invalidation();
}

Engine::Engine(Job& job, Layer& layer, const Config& config)
    : job_(job),
      layer_(layer),
      config_(agreed(job, layer, config)),
      rank_(job.rank()),
      processes_(job.size()),
      blocks_(config_.heap_bytes / config_.block_bytes),
      home_(make_home()),
      invalidator_(make_invalidator()),
      heap_(job, config_, processes_ == 1),
      meta_(job, config_, blocks_),
      history_(config_.notices, blocks_) {
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
  holder_thread_ = std::make_unique<std::atomic<std::uintptr_t>[]>(config_.mutexes);
  merged_early_ = std::make_unique<std::atomic<bool>[]>(config_.mutexes);
  listed_ = std::make_unique<std::uint8_t[]>(blocks_);
  for (std::size_t b = 0; b < blocks_; ++b) {
    state_[b].store(BlockState::invalid, std::memory_order_relaxed);
    hint_[b] = WriteNotice{static_cast<std::uint32_t>(b), no_source, 0};
    link_[b] = static_cast<std::uint32_t>(b % processes_);  // every block starts at home there
  }
  dirty_.reserve(blocks_);
  signals_ = std::make_unique<SignalGuard>(*this);
  try {
    if (!local()) {
      meta_.warm();
      if (void** warmed = fabric::acting_word<Engine>()) *warmed = this;
      std::uint32_t native = 1;
      for (std::uint32_t p = 0; p < processes_; ++p)
        if (p != rank_ && rma_emulated(p)) native = 0;
      disseminate_ = true;
      for (std::uint32_t all : job_.allgather(native)) disseminate_ = disseminate_ && all != 0;
    }
    // Before the barrier: once past it, peers send this process their
    // barrier signatures, which find the engine through the layer.
    space_ = layer_.open(*this);
    job_.barrier();
  } catch (...) {
    forget();
    throw;
  }
}

Engine::~Engine() {
  forget();
  signals_.reset();
  // The views go with heap_. The home copies and metadata stay in the arena
  // until the Job ends: a peer may still be reading them.
}

void Engine::forget() noexcept {
  layer_.close(*this);
  if (void** warmed = fabric::acting_word<Engine>(); warmed != nullptr && *warmed == this) *warmed = nullptr;
}

void Engine::lock_block(std::uint32_t block) noexcept {
  unsigned spins = 0;
  while (block_lock_[block].exchange(1, std::memory_order_acquire) != 0)
    if (++spins % 64 == 0) std::this_thread::yield();
}

void Engine::throw_if_reported(std::uint32_t process, const std::string& what) const {
  const std::uint32_t dead = layer_.failed(process == every_peer ? Layer::no_process : process);
  if (dead == Layer::no_process) return;
  throw Error(Errc::peer_failed,
              what + ": process " + std::to_string(dead) + " has failed (" + layer_.why(dead) + ")");
}

void Engine::throw_if_ended_before(std::uint64_t target) const {
  const Layer::Ended e = layer_.ended_before(space_, target);
  if (e.process == Layer::no_process) return;
  // A peer that ended its Space after a failure this process has not
  // heard of yet: the failure is the news.
  if (e.failed != Layer::no_process && e.failed != rank_)
    throw Error(Errc::peer_failed, "dsm barrier: process " + std::to_string(e.failed) + " has failed (as process " +
                                       std::to_string(e.process) + " saw before it ended its dsm::Space)");
  throw Error(Errc::shut_down, "dsm barrier (barrier " + std::to_string(target) + " of the space): process " +
                                   std::to_string(e.process) + " has ended its dsm::Space after " + std::to_string(e.barriers) +
                                   " barriers, without entering this one: every process must call the same barriers");
}

void Engine::tell_ended() noexcept {
  if (local()) return;
  const std::uint32_t me = rank_;
  const std::uint64_t space = space_, barriers = epoch_;
  const std::uint32_t failed = layer_.failed(Layer::no_process);
  for (std::uint32_t p = 0; p < processes_; ++p) {
    if (p == rank_ || job_.process_failed(p)) continue;
    try {
      call(ThreadId{p, service_thread},
           [me, space, barriers, failed] { fabric::layer<Layer>().space_ended(me, space, barriers, failed); });
    } catch (const Error&) {  // it failed just now: nothing waits there
    }
  }
}

void Engine::probe_peers(const std::string& what, std::uint32_t process) {
  for (std::uint32_t p = 0; p < processes_; ++p) {
    if (p == rank_ || (process != every_peer && p != process)) continue;
    try {
      std::uint64_t probe = 0;
      get(&probe, meta_.probe_word(p)).get();
    } catch (const Error& e) {
      throw Error(Errc::peer_failed, what + ": process " + std::to_string(p) + " failed: " + e.what());
    }
  }
}

}  // namespace rdmx::dsm
