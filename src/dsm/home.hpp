// The home protocol (Config::home): where the copy of a block that peers
// fetch lives, and how a release merges a block's writes into it. The
// engine asks it per fault and per merge, never per byte; each protocol is
// one class in its own file, made by the engine's factory for its
// HomePolicy (engine.cpp):
//   floating_home.cpp  MENPS: the home moves to the last releaser, which
//                      merges locally after taking the block over;
//   fixed_home.cpp     the baseline: block b's home is process b mod P,
//                      releasers put their diffs there.
#pragma once
#include <cstdint>
#include <span>

namespace rdmx::dsm {

// A block a release merges: each is locked, dirty and changed since its
// twin; read-only, or, when `writable` (the fast release), left writable
// and dirty, its twin becoming what was merged.
struct Merge {
  std::uint32_t block;
  bool writable;
};

class Home {
 public:
  virtual ~Home() = default;
  // Where a search for the block's home starts.
  virtual std::uint32_t probable_owner(std::uint32_t block) const noexcept = 0;
  // A block fetched from `source`'s home copy: whether this process's own
  // home copy then holds the cached bytes until the block's next release
  // here, and so serves as its twin (a write fault copies nothing).
  virtual bool home_copy_is_twin(std::uint32_t source) const noexcept = 0;
  // Whether a release merges a changed block and leaves it writable (the
  // fast release; Config::keep).
  virtual bool fast_release() const noexcept = 0;
  // Whether this process's copy is the block's newest version after a merge
  // of it (an acquire that names the block then keeps the copy).
  virtual bool merge_leaves_newest() const noexcept = 0;
  // Merges every block into its home: a new version of each, noted in the
  // history (Engine::note). The caller then marks each clean or, writable,
  // keeps it dirty, and tells the invalidation protocol.
  virtual void merge(std::span<const Merge> blocks) = 0;
};

}  // namespace rdmx::dsm
