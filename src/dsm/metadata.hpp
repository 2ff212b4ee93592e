// The DSM's registered memory in every process, and where each part of it
// lies: peers reach all of it with one-sided operations.
//
// The home area: this process's home copies (the heap's size), each block
// as of its last release here, for the blocks this process is (or was)
// home of. The metadata, in this order:
//   an owner word per block, then a lease word per block;
//   per mutex managed here (mutex m lives in process m mod P): its lock
//     word, a word left free, then the signature its last unlock left;
//   the barrier's flags, one per parity and sender (the last barrier the
//     sender reached), then its signatures, one per parity and sender;
//   the dissemination records, per parity and round: the sender's logical
//     clock, then the barrier it reached;
//   the directory words of the blocks managed here (block b: process
//     b mod P), then a mailbox byte per block (directory.cpp).
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "rdmx/dsm/config.hpp"
#include "rdmx/transfer/remote_locator.hpp"

namespace rdmx {
class Job;
}

namespace rdmx::dsm {

// A block's owner word, one per block in every process (MENPS's probable
// owner): bits 0-15 lock holder + 1 (0: unlocked), 16-31 owner, 32-63
// version. In the block's home the owner field names that process itself;
// elsewhere it is a link to a process that was home later than this one,
// which a search follows until it reaches a word that names its own process.
// A releaser locks the home's word, takes the block, names itself in its own
// word and leaves a link to itself in the previous home's. The fixed home
// uses only its own word (block mod P), which never moves.
// Beside it, the block's lease word: the largest lease end any reader took
// on the block's current version (Tardis's rts); a releaser's write
// timestamp is past it.
namespace word {
inline constexpr std::uint64_t lock_mask = 0xffff;
inline std::uint64_t pack(std::uint64_t version, std::uint32_t owner, std::uint32_t holder_plus_one) {
  return version << 32 | std::uint64_t{owner} << 16 | holder_plus_one;
}
inline std::uint32_t owner(std::uint64_t w) { return static_cast<std::uint32_t>(w >> 16 & 0xffff); }
inline std::uint64_t version(std::uint64_t w) { return w >> 32; }
inline std::uint32_t holder_plus_one(std::uint64_t w) { return static_cast<std::uint32_t>(w & lock_mask); }
}  // namespace word

class Metadata {
 public:
  // The dissemination barrier's rounds: log2 of the processes, at most.
  static constexpr std::uint32_t max_rounds = 32;

  // Collective: allocates this process's home area and metadata, starts
  // every block at home in process b mod P, and learns every process's.
  Metadata(Job& job, const Config& config, std::size_t blocks);

  RemoteLocator owner_word(std::uint32_t process, std::uint32_t block) const {
    return metas_[process].slice(std::uint64_t{block} * 8, 8);
  }
  RemoteLocator lease_word(std::uint32_t process, std::uint32_t block) const {
    return metas_[process].slice((blocks_ + std::uint64_t{block}) * 8, 8);
  }
  RemoteLocator home_block(std::uint32_t process, std::uint32_t block) const {
    return homes_[process].slice(std::uint64_t{block} * block_bytes_, block_bytes_);
  }
  RemoteLocator mutex_word(std::uint32_t mutex) const {
    return metas_[mutex % processes_].slice(mutex_offset(mutex), 8);
  }
  RemoteLocator mutex_signature(std::uint32_t mutex, std::size_t bytes) const {
    return metas_[mutex % processes_].slice(mutex_offset(mutex) + 16, bytes);
  }
  RemoteLocator barrier_signature(std::uint32_t process, std::uint64_t parity, std::uint32_t sender,
                                  std::size_t bytes) const {
    return metas_[process].slice(barrier_signature_offset(parity, sender), bytes);
  }
  // Word 0 of a record is the clock, word 1 the barrier.
  RemoteLocator round_word(std::uint32_t process, std::uint64_t parity, std::uint32_t round,
                           std::uint32_t word) const {
    return metas_[process].slice(round_offset(parity, round) + word * 8, 8);
  }
  RemoteLocator directory_word(std::uint32_t block) const {
    return metas_[block % processes_].slice(directory_offset_ + std::uint64_t{block / processes_} * 8, 8);
  }
  RemoteLocator mailbox(std::uint32_t process, std::uint32_t block) const {
    return metas_[process].slice(mailbox_offset_ + block, 1);
  }
  // A word of `process`'s metadata to read when asking whether it is alive.
  RemoteLocator probe_word(std::uint32_t process) const { return metas_[process].slice(0, 8); }

  // This process's own parts.
  std::byte* home_copy(std::uint32_t block) const noexcept { return home_ + std::size_t{block} * block_bytes_; }
  std::uint64_t& owner_word_here(std::uint32_t block) const noexcept {
    return reinterpret_cast<std::uint64_t*>(meta_)[block];
  }
  std::uint64_t& barrier_flag_here(std::uint64_t parity, std::uint32_t sender) const noexcept {
    return *reinterpret_cast<std::uint64_t*>(meta_ + barrier_offset_ +
                                             (static_cast<std::size_t>(parity) * processes_ + sender) * 8);
  }
  std::byte* barrier_signature_here(std::uint64_t parity, std::uint32_t sender) const noexcept {
    return meta_ + barrier_signature_offset(parity, sender);
  }
  std::uint64_t* round_record_here(std::uint64_t parity, std::uint32_t round) const noexcept {
    return reinterpret_cast<std::uint64_t*>(meta_ + round_offset(parity, round));
  }
  std::uint8_t* mailboxes_here() const noexcept { return reinterpret_cast<std::uint8_t*>(meta_ + mailbox_offset_); }

  // The most bytes of a signature (Config::notices of them): what a mutex's
  // and each barrier signature hold.
  std::size_t signature_bytes() const noexcept { return signature_bytes_; }

  // Sets up the calling thread's endpoints and remote keys towards every
  // process's home area and metadata (setting one up allocates and waits
  // for the owner's answer).
  void warm() const;

 private:
  std::size_t mutex_offset(std::uint32_t mutex) const {
    return blocks_ * 16 + std::size_t{mutex / processes_} * (16 + signature_bytes_);
  }
  std::size_t barrier_signature_offset(std::uint64_t parity, std::uint32_t sender) const {
    return barrier_offset_ + 2 * std::size_t{processes_} * 8 +
           (static_cast<std::size_t>(parity) * processes_ + sender) * signature_bytes_;
  }
  std::size_t round_offset(std::uint64_t parity, std::uint32_t round) const {
    return rounds_offset_ + (parity * max_rounds + round) * 16;
  }

  std::uint32_t processes_;
  std::size_t blocks_, block_bytes_;
  std::size_t signature_bytes_ = 0;
  std::size_t barrier_offset_ = 0, rounds_offset_ = 0, directory_offset_ = 0, mailbox_offset_ = 0;
  std::byte* home_ = nullptr;
  std::byte* meta_ = nullptr;
  std::vector<RemoteLocator> homes_, metas_;
};

}  // namespace rdmx::dsm
