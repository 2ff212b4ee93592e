// The fixed home (the baseline): block b's home is process b mod P for
// ever, and a releaser puts each changed run of bytes there.
#include "engine.hpp"

#include <cstring>

#include "rdmx/fabric/rma.hpp"

namespace rdmx::dsm {

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

}  // namespace rdmx::dsm
