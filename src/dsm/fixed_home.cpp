// The fixed home (the baseline, ArgoDSM-style): block b's home is process
// b mod P for ever, and a releaser puts each changed run of bytes there
// (remote diff merge), so releasers of different bytes merge in parallel.
#include <cstring>

#include "engine.hpp"
#include "rdmx/fabric/rma.hpp"

namespace rdmx::dsm {

class Engine::FixedHome final : public Home {
 public:
  explicit FixedHome(Engine& engine) : e_(engine) {}

  // The home never moves: only its own owner word is used, never a link.
  std::uint32_t probable_owner(std::uint32_t block) const noexcept override { return block % e_.processes_; }
  // Peers put their diffs into the home copy: it is no twin.
  bool home_copy_is_twin(std::uint32_t) const noexcept override { return false; }
  // Remote diffs are put from the runtime view, which must not change under
  // the puts: every merged block is read-only first.
  bool fast_release() const noexcept override { return false; }
  // Others may have merged runs this process's copy does not hold.
  bool merge_leaves_newest() const noexcept override { return false; }
  void merge(std::span<const Merge> blocks) override {
    for (const Merge& m : blocks) merge_one(m.block);
  }

 private:
  void merge_one(std::uint32_t block);

  Engine& e_;
};

std::unique_ptr<Home> Engine::make_fixed_home() { return std::make_unique<FixedHome>(*this); }

void Engine::FixedHome::merge_one(std::uint32_t block) {
  Engine& e = e_;
  const std::uint32_t home_process = block % e.processes_;
  const std::size_t bytes = e.config_.block_bytes;
  const std::byte* mine = e.heap_.rw(block);
  const std::byte* twin = e.twin(block);
  const RemoteLocator owner = e.meta_.owner_word(home_process, block);
  // Causal misses (Config::causal_mutex): a merge counts itself in the
  // word's low bits before its first byte lands, so that a fetch that may
  // have read some of them finds the word changed after its get.
  const std::uint64_t merging = e.config_.causal_mutex != Config::no_mutex ? 1 : 0;
  if (merging != 0) fetch_add(owner, merging).get();
  // Remote diff merge: each changed run of bytes is its own put.
  std::size_t i = 0;
  bool sent = false;
  while (i < bytes) {
    if (mine[i] == twin[i]) {
      ++i;
      continue;
    }
    std::size_t end = i + 1;
    while (end < bytes && mine[end] != twin[end]) ++end;
    if (home_process == e.rank_) {
      std::memcpy(e.meta_.home_copy(block) + i, mine + i, end - i);
    } else {
      post_put(mine + i, e.meta_.home_block(home_process, block).slice(i, end - i));
      sent = true;
    }
    i = end;
  }
  // The runs must be at the home before the version says so.
  if (sent) flush(home_process);
  e.write_timestamp(home_process, block);
  e.lease_[block] = 0;  // others may have merged runs we do not hold
  const std::uint64_t was = fetch_add(owner, (std::uint64_t{1} << 32) - merging).get();
  // Our copy is current only if nobody else merged since we fetched it.
  if (word::version(was) == e.version_[block]) e.version_[block] = word::version(was) + 1;
  e.note(WriteNotice{block, home_process, word::version(was) + 1});
}

}  // namespace rdmx::dsm
