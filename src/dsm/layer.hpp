// The DSM's registration with the fabric (rdmx/fabric/layer.hpp): one per
// process and job, made by the first Space. Through it the API and the
// barrier's messages find the process's open Space, the fabric's reports
// of failed processes reach the DSM's waits, and so do peers' notes that
// they ended their Space.
//
// Of the fabric's hooks the DSM has work for one, process_failed: a wait
// on a peer (a barrier's flags, a held mutex or owner word, another
// releaser's invalidation) fails as soon as the fabric knows that peer has
// failed, where otherwise only its own probe, every few milliseconds, would
// tell. The others keep their defaults, each for a reason given below.
#pragma once
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "rdmx/fabric/layer.hpp"

namespace rdmx::dsm {

class Engine;

class Layer final : public fabric::Layer {
 public:
  static constexpr std::uint32_t no_process = ~0u;

  explicit Layer(Job& job);

  // The engine of the Space open in the calling thread's job; throws
  // Errc::invalid_argument naming `what` when there is none (or no Job).
  static Engine& require(const char* what);
  // The open Space's engine, or nullptr.
  Engine* engine() const noexcept { return engine_.load(std::memory_order_acquire); }
  // A Space starts (throws if one is open already) or ends. open returns
  // its number: 1, 2, ... in the order this process opened them, which every
  // process shares since opening one is collective.
  std::uint64_t open(Engine& engine);
  void close(Engine& engine) noexcept;

  // `process` ended its Space number `space` having passed `barriers`
  // barriers (its note, run by this process's service thread): it will
  // enter none of that Space's barriers after those. `failed`: a process it
  // knew had failed by then (no_process: none), the likelier reason.
  void space_ended(std::uint32_t process, std::uint64_t space, std::uint64_t barriers, std::uint32_t failed) noexcept;
  // How many such notes have come: while none has, one load tells a wait it
  // has nothing to check.
  std::uint32_t endings() const noexcept { return endings_.load(std::memory_order_acquire); }
  struct Ended {
    std::uint32_t process = no_process;
    std::uint64_t space = 0;  // 0: none
    std::uint64_t barriers = 0;
    std::uint32_t failed = no_process;
    std::uint64_t order = 0;  // 1 for the first note that came, 2 ...
  };
  // The note of the first peer to say it ended Space `space` before
  // entering its barrier `target` (1 for the first); process no_process
  // when none.
  Ended ended_before(std::uint64_t space, std::uint64_t target) const;
  // Whether `process` has said it ended Space `space`.
  bool ended(std::uint32_t process, std::uint64_t space) const;

  // How many processes have been reported failed: while none has, one load
  // tells a wait it has nothing to check.
  std::uint32_t failures() const noexcept { return failures_.load(std::memory_order_acquire); }
  // `process` if it has been reported failed; with no_process, the lowest
  // failed process other than this one. no_process when none.
  std::uint32_t failed(std::uint32_t process) const noexcept;
  // What the fabric said of a failed process.
  std::string why(std::uint32_t process) const;

  // The DSM receives nothing outside the fabric's calls (the barrier's
  // signatures over TCP are send-based calls the fabric runs) and one-sided
  // operations on its registered memory, which need no handling: poll
  // keeps its default.
  //
  // Every DSM operation has completed at its destinations when it returns,
  // or a peer waits for it before it goes on (the last record of a
  // dissemination barrier): flush and settled keep their defaults.
  //
  // quiet keeps its default too: writes to the heap reach other processes
  // through releases and acquires (dsm::release, barriers, mutexes), which
  // rdmx::quiet() does not stand in for, and nothing else is in flight.

  void process_failed(std::uint32_t process, const std::string& why) override;

 private:
  const std::uint32_t rank_, processes_;
  std::atomic<Engine*> engine_{nullptr};
  std::uint64_t spaces_ = 0;  // opened, on the thread constructing Spaces
  std::atomic<std::uint32_t> endings_{0};
  mutable std::mutex ended_mutex_;
  std::vector<Ended> ended_;  // [process]: its last Space ended, under ended_mutex_
  std::atomic<std::uint32_t> failures_{0};
  std::unique_ptr<std::atomic<bool>[]> failed_;
  mutable std::mutex why_mutex_;
  std::vector<std::string> why_;
};

}  // namespace rdmx::dsm
