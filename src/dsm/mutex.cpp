// The global mutexes: a lock word per mutex taken by remote
// compare-and-swap, and beside it the signature an unlock leaves for the
// next holder.
#include "engine.hpp"
#include "layer.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "rdmx/core/backoff.hpp"
#include "rdmx/core/error.hpp"
#include "rdmx/fabric/call.hpp"
#include "rdmx/fabric/job.hpp"
#include "rdmx/fabric/rma.hpp"
#include "rdmx/transfer/transmitter.hpp"

namespace rdmx::dsm {

void Engine::check_mutex(std::uint32_t mutex, const char* what) const {
  if (mutex >= config_.mutexes)
    throw Error(Errc::invalid_argument, std::string("dsm::Mutex::") + what + ": mutex " + std::to_string(mutex) +
                                            " does not exist (the space has " + std::to_string(config_.mutexes) +
                                            "; RDMX_DSM_MUTEXES)");
}

// A mutex word: bits 0-15 the holder + 1 (0: free), bits 16-63 a stamp:
// the epoch + 1 of the last unlock that put a signature beside the word (0:
// none yet). An acquirer whose epoch is past the stamp does not read the
// signature (its barrier delivered what the signature holds). A lock's compare-and-swap expects
// the free word this process last saw, so re-taking a mutex this process
// released is one round trip.
namespace mutex_bits {
inline constexpr std::uint64_t holder_mask = 0xffff;
inline std::uint64_t stamp(std::uint64_t w) { return w >> 16; }
inline std::uint64_t free_word(std::uint64_t stamp) { return stamp << 16; }
}  // namespace mutex_bits

namespace {
// A word that names the calling thread (never 0).
std::uintptr_t this_thread_word() noexcept {
  static thread_local const char tag = 0;
  return reinterpret_cast<std::uintptr_t>(&tag);
}
}  // namespace

bool Engine::try_lock(std::uint32_t mutex) {
  check_mutex(mutex, "try_lock");
  // The caller holds it already: not free, as for any other holder.
  if (holder_thread_[mutex].load(std::memory_order_relaxed) == this_thread_word()) return false;
  const RemoteLocator where = meta_.mutex_word(mutex);
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
  // Its own unlock would never come: the mutexes are not recursive.
  if (holder_thread_[mutex].load(std::memory_order_relaxed) == this_thread_word())
    throw Error(Errc::invalid_argument, "dsm::Mutex::lock: mutex " + std::to_string(mutex) +
                                            " is already held by this thread (DSM mutexes are not recursive: "
                                            "unlock it before locking it again)");
  take(mutex, true);
}

void Engine::take(std::uint32_t mutex, bool run_calls) {
  const RemoteLocator where = meta_.mutex_word(mutex);
  std::uint64_t expected = mutex_free_[mutex].load(std::memory_order_relaxed);
  Backoff backoff;
  auto last_check = std::chrono::steady_clock::now();
  // A holder known to have ended this Space or left the job before the
  // last compare-and-swap was issued (none yet: no_process).
  std::uint32_t gone_before = Layer::no_process;
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
    // A holder that ended this Space or left the job runs none of its
    // program any more, so it never unlocks. Its note that it did so came
    // after every unlock it made had completed: a word that still names it
    // when read after the note is its last.
    const auto holder_process = static_cast<std::uint32_t>(holder - 1);
    if (holder_process == gone_before) throw holder_gone(mutex, holder_process, !run_calls);
    if (holder_process != rank_ &&
        (job_.process_left(holder_process) || (layer_.endings() != 0 && layer_.ended(holder_process, space_)))) {
      gone_before = holder_process;
      continue;  // read it once more, now
    }
    // A holder that died never unlocks: the lock fails as soon as the
    // fabric reports it failed, and touching it every few milliseconds
    // turns a death the fabric has not seen into Errc::peer_failed here.
    const auto what = [mutex] { return "dsm: mutex " + std::to_string(mutex) + "'s holder"; };
    throw_if_failed(static_cast<std::uint32_t>(holder - 1), what);
    const auto now = std::chrono::steady_clock::now();
    if (now - last_check > std::chrono::milliseconds(5)) {
      last_check = now;
      probe_peers(what(), static_cast<std::uint32_t>(holder - 1));
    }
    if (run_calls) progress();
    backoff(false);
  }
  acquire_mutex(mutex, expected);
}

void Engine::acquire_mutex(std::uint32_t mutex, std::uint64_t free_word) {
  counters_.locks.fetch_add(1, std::memory_order_relaxed);
  held_[mutex].store(free_word | (rank_ + 1), std::memory_order_relaxed);
  holder_thread_[mutex].store(this_thread_word(), std::memory_order_relaxed);
  // The lock word changed hands through UCX, not a C++ atomic: order this
  // thread's later accesses after it (all a one-process job needs).
  std::atomic_thread_fence(std::memory_order_seq_cst);
  // Another thread's merge meanwhile counts too: a release too many at the
  // unlock, never one too few.
  const std::uint64_t merges = counters_.merges.load(std::memory_order_relaxed);
  merged_early_[mutex].store(false, std::memory_order_relaxed);
  acquire_through(mutex, free_word);
  if (counters_.merges.load(std::memory_order_relaxed) != merges)
    merged_early_[mutex].store(true, std::memory_order_relaxed);
}

// What the mutex's last holder released, acquired: the directory's
// mailboxes, then the signature beside the word unless its stamp says our
// last barrier delivered it already.
void Engine::acquire_through(std::uint32_t mutex, std::uint64_t free_word) {
  if (local()) return;
  invalidator_->acquired();
  // A signature from before our last barrier names nothing we have not
  // acquired there; the stamp says so without reading it.
  const std::uint64_t stamp = mutex_bits::stamp(free_word);
  if (stamp == 0 || stamp - 1 < epoch_) return;
  // One get reads the header and, for a short list, the notices with it.
  std::vector<std::byte> bytes(std::min<std::size_t>(meta_.signature_bytes(), 1024));
  blocking_get(bytes.data(), meta_.mutex_signature(mutex, bytes.size()));
  SignatureHeader header{};
  std::memcpy(&header, bytes.data(), sizeof header);
  if (header.count > config_.notices)
    throw Error(Errc::protocol, "dsm: mutex " + std::to_string(mutex) + " holds a malformed signature");
  if (header.epoch < epoch_) return;
  if (Signature::encoded_size(header.count) > bytes.size()) {
    bytes.resize(Signature::encoded_size(header.count));
    blocking_get(bytes.data(), meta_.mutex_signature(mutex, bytes.size()));
  }
  const DecodedSignature sig = decode(bytes, blocks_, processes_);
  acquire({&sig, 1}, job_.threads_per_process() <= 1);
}

// A causal miss found a version of a block released since our last
// acquire. Its releaser held the causal mutex from before that release
// until after its signature (or, with a directory, its invalidations)
// was in place, so taking the mutex now acquires every write it released
// (and, through its signature, what it had acquired), as a lock and unlock
// of the mutex by the program would. A thread that holds the mutex
// acquired through it when it locked it.
//
// An acquire that merged a block early ends as an unlock does, releasing
// everything (see unlock). Otherwise nothing is released: the mutex frees
// as it was, its signature still the last releaser's.
void Engine::acquire_causal() {
  const std::uint32_t mutex = config_.causal_mutex;
  if (holder_thread_[mutex].load(std::memory_order_relaxed) == this_thread_word()) return;
  counters_.causal_misses.fetch_add(1, std::memory_order_relaxed);
  take(mutex, false);  // in the fault path: no call runs (see fault())
  if (merged_early_[mutex].load(std::memory_order_relaxed)) {
    unlock(mutex);
    return;
  }
  const std::uint64_t held = held_[mutex].load(std::memory_order_relaxed);
  free_mutex(mutex, held, held & ~mutex_bits::holder_mask);
}

void Engine::unlock(std::uint32_t mutex) { unlock(mutex, nullptr, 0); }

void Engine::unlock(std::uint32_t mutex, const void* only, std::size_t bytes) {
  check_mutex(mutex, "unlock");
  std::atomic_thread_fence(std::memory_order_seq_cst);  // the critical section's accesses before the word frees
  const RemoteLocator where = meta_.mutex_word(mutex);
  const std::uint64_t held = held_[mutex].load(std::memory_order_relaxed);
  if ((held & mutex_bits::holder_mask) != rank_ + 1) throw not_held(mutex, blocking_fetch_add(where, 0));
  std::uint64_t free_word = held & ~mutex_bits::holder_mask;
  if (!local()) {
    // An acquire may have to merge a dirty copy before it drops it (an early
    // release), publishing that block's writes ahead of the ones this
    // process made before them: a flag's block merged while the rows written
    // before the flag stay dirty. A reader that finds the flag's new version
    // and takes the causal mutex (Config::causal_mutex) must find the rows
    // released too: after such an acquire the causal mutex releases
    // everything, even for a release of one range (an atomic's).
    const bool whole = only == nullptr || (mutex == config_.causal_mutex &&
                                           merged_early_[mutex].load(std::memory_order_relaxed));
    if (whole)
      release_all();
    else
      release_range(only, bytes);
    std::vector<std::byte> sig;
    {
      std::lock_guard<std::mutex> hold(history_mutex_);
      // An empty history (nothing released or acquired since the last
      // barrier) tells the next holder nothing its barrier did not: the
      // signature and its stamp stay as they are, and the unlock is one
      // round trip.
      if (!history_.notices().empty() || history_.overflowed()) {
        sig = history_.encode(epoch_, now());
        free_word = mutex_bits::free_word(epoch_ + 1);
      }
    }
    if (!sig.empty()) {
      put(sig.data(), meta_.mutex_signature(mutex, sig.size())).get();
      transmitter(where.process).fence();  // the signature lands before the lock word frees
    }
  }
  free_mutex(mutex, held, free_word);
}

// Frees a mutex this thread holds (`held`, its word) as `free_word`.
void Engine::free_mutex(std::uint32_t mutex, std::uint64_t held, std::uint64_t free_word) {
  // Cleared before the word frees: another thread of ours may take it next.
  holder_thread_[mutex].store(0, std::memory_order_relaxed);
  held_[mutex].store(0, std::memory_order_relaxed);
  const std::uint64_t was = blocking_compare_swap(meta_.mutex_word(mutex), held, free_word);
  if (was != held) throw not_held(mutex, was);
  mutex_free_[mutex].store(free_word, std::memory_order_relaxed);
}

Error Engine::holder_gone(std::uint32_t mutex, std::uint32_t holder, bool causal) const {
  const std::string how = job_.process_left(holder) && !layer_.ended(holder, space_)
                              ? "has left the job (its rdmx::Job was destroyed)"
                              : "has ended its dsm::Space";
  const std::string who = causal ? "dsm: a read of the shared heap waits for the causal mutex (Config::causal_mutex), mutex "
                                 : "dsm::Mutex::lock: mutex ";
  return Error(Errc::shut_down, who + std::to_string(mutex) + " is held by process " +
                                    std::to_string(holder) + ", which " + how +
                                    " without unlocking it: nobody will unlock it (unlock every mutex before ending "
                                    "the Space)");
}

Error Engine::not_held(std::uint32_t mutex, std::uint64_t word) {
  const std::uint64_t holder = word & mutex_bits::holder_mask;
  return Error(Errc::invalid_argument, "dsm::Mutex::unlock: mutex " + std::to_string(mutex) +
                                           " is not held by this process" +
                                           (holder == 0 ? std::string(" (it is free)")
                                                        : " (process " + std::to_string(holder - 1) + " holds it)"));
}

}  // namespace rdmx::dsm
