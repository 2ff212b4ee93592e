#include "metadata.hpp"

#include "rdmx/fabric/job.hpp"
#include "rdmx/fabric/rma.hpp"
#include "signature.hpp"

namespace rdmx::dsm {

Metadata::Metadata(Job& job, const Config& config, std::size_t blocks)
    : processes_(job.size()), blocks_(blocks), block_bytes_(config.block_bytes) {
  const std::uint32_t rank = job.rank();
  const std::size_t words = (blocks_ + processes_ - 1) / processes_;  // directory words managed here
  const std::size_t mutexes_here = (config.mutexes + processes_ - 1) / processes_;
  signature_bytes_ = Signature::encoded_size(config.notices);
  barrier_offset_ = blocks_ * 16 + mutexes_here * (16 + signature_bytes_);
  rounds_offset_ = barrier_offset_ + 2 * std::size_t{processes_} * (8 + signature_bytes_);
  directory_offset_ = rounds_offset_ + 2 * std::size_t{max_rounds} * 16;
  mailbox_offset_ = directory_offset_ + words * 8;
  const std::size_t meta_bytes = mailbox_offset_ + (blocks_ + 7) / 8 * 8;
  struct Mine {
    RemoteLocator home, meta;
  };
  const Mine mine{allocate_remote(rank, config.heap_bytes), allocate_remote(rank, meta_bytes)};
  home_ = reinterpret_cast<std::byte*>(resolve(mine.home).address);
  meta_ = reinterpret_cast<std::byte*>(resolve(mine.meta).address);
  // Block b starts at home in process b mod P, at version 0, unlocked; the
  // other processes' words link there. Written before the allgather below,
  // which every peer passes before it reads a word.
  for (std::size_t b = 0; b < blocks_; ++b) {
    owner_word_here(static_cast<std::uint32_t>(b)) = word::pack(0, static_cast<std::uint32_t>(b % processes_), 0);
    reinterpret_cast<std::uint64_t*>(meta_)[blocks_ + b] = 0;  // the lease word
  }
  for (const Mine& m : job.allgather(mine)) {
    homes_.push_back(m.home);
    metas_.push_back(m.meta);
  }
}

void Metadata::warm() const {
  for (std::uint32_t p = 0; p < processes_; ++p) {
    transmitter(p);
    resolve(metas_[p]);
    resolve(homes_[p]);
  }
}

}  // namespace rdmx::dsm
