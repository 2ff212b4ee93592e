// Owner words and the search for a block's home (MENPS's probable owner,
// after Li and Hudak): links from the probable owner to the process whose
// word names itself, and, past a failed process, a search of every live
// one.
#include "engine.hpp"

#include <chrono>
#include <string>
#include <thread>

#include "rdmx/core/backoff.hpp"
#include "rdmx/core/error.hpp"
#include "rdmx/fabric/job.hpp"
#include "rdmx/fabric/rma.hpp"

namespace rdmx::dsm {

std::uint32_t Engine::link(std::uint32_t block) const noexcept {
  return std::atomic_ref<std::uint32_t>(link_[block]).load(std::memory_order_relaxed);
}

std::uint64_t Engine::link_version(std::uint32_t block) const noexcept {
  return std::atomic_ref<std::uint64_t>(link_version_[block]).load(std::memory_order_relaxed);
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
  std::uint32_t at = home_->probable_owner(block);
  Backoff backoff;
  for (std::uint32_t hops = 0;; ++hops) {
    std::uint64_t seen;
    try {
      seen = blocking_fetch_add(meta_.owner_word(at, block), 0);
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
        if (word::owner(blocking_fetch_add(meta_.owner_word(p, block), 0)) == p) return p;
      } catch (const Error& e) {
        if (e.code() != Errc::peer_failed) throw;
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));  // a home handing the block over
  }
  throw Error(Errc::peer_failed, "dsm: block " + std::to_string(block) + ": its home was process " +
                                     std::to_string(failed) + " or another that failed; its data is lost");
}

}  // namespace rdmx::dsm
