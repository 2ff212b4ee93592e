// The invalidation protocol (Config::invalidation): how a process learns
// that its cached copy of a block is out of date. Every synchronization
// hands the acquirer the releaser's signature (barrier flags and the
// logical clock travel in it under either protocol); what a protocol adds
// happens at four points, asked per fetch, per merge, per write notice and
// per acquire, never per byte. Each protocol is one class in its own file,
// made by the engine's factory for its Invalidation (engine.cpp):
//   acquire.cpp    MENPS: write notices in the signature, logical leases
//                  past an overflow;
//   directory.cpp  the baseline: sharer bits at each block's manager, a
//                  mailbox byte per block that releasers set.
#pragma once
#include <cstdint>

#include "signature.hpp"

namespace rdmx::dsm {

// Directory invalidation keeps a bit per process in a 64-bit word whose top
// bit it needs for itself.
inline constexpr std::uint32_t directory_max_processes = 63;

class Invalidator {
 public:
  virtual ~Invalidator() = default;
  // Before a fetch of `block` (its lock held).
  virtual void fetching(std::uint32_t block) = 0;
  // After a merge published a new version of `block` (its lock held).
  virtual void merged(std::uint32_t block) = 0;
  // The write notice of a merge: whether acquirers learn of it from the
  // history (Engine::history_), which the next synchronization hands over.
  virtual bool keeps_notices() const noexcept = 0;
  // An acquire (barrier, lock): what it learns outside the signatures it
  // is handed.
  virtual void acquired() = 0;
};

}  // namespace rdmx::dsm
