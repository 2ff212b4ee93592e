#include "rdmx/memory/general_allocator.hpp"

#include <algorithm>
#include <iterator>
#include <string>

#include "free_list.hpp"
#include "rdmx/core/checked_size.hpp"
#include "rdmx/core/error.hpp"
#include "rdmx/memory/arena.hpp"

namespace rdmx::memory {

namespace {
constexpr std::size_t granule = 16;  // every allocation is a multiple: keeps holes usable
std::size_t round_up(std::size_t n, std::size_t to) { return checked_round_up(n, to, "general allocator"); }
}  // namespace

struct GeneralAllocator::Chunk {
  Chunk(Block b, bool own) : block(b), dedicated(own), free(reinterpret_cast<std::uintptr_t>(b.data), b.size) {}
  Block block;
  bool dedicated;  // taken for one oversize request: given back when it empties
  detail::FreeList free;
};

GeneralAllocator::GeneralAllocator(Arena& arena, Options options) : arena_(arena), options_(options) {
  if (options_.chunk_size == 0) throw Error(Errc::invalid_argument, "general allocator: chunk size 0");
  options_.chunk_size = std::min(round_up(options_.chunk_size, 64), arena.segment_size());
}

GeneralAllocator::~GeneralAllocator() {
  for (auto& chunk : chunks_) {
    try {
      arena_.release_chunk(chunk->block);
    } catch (...) {
      // A destructor cannot report; the arena keeps the chunk until it dies.
    }
  }
}

Block GeneralAllocator::allocate(std::size_t n, std::size_t align) {
  if (n == 0) throw Error(Errc::invalid_argument, "general allocator: allocation of 0 bytes");
  if (align == 0 || (align & (align - 1)) != 0)
    throw Error(Errc::invalid_argument, "general allocator: alignment " + std::to_string(align) + " is not a power of two");
  const std::size_t bytes = round_up(n, granule);
  const detail::Fit fit = options_.policy == FitPolicy::best_fit ? detail::Fit::best : detail::Fit::first;

  std::lock_guard lock(mutex_);
  Chunk* best = nullptr;
  detail::FreeList::Candidate where{};
  for (auto& chunk : chunks_) {
    auto c = chunk->free.find(bytes, align, fit);
    if (!c) continue;
    if (best == nullptr || c->hole_size < where.hole_size) {
      best = chunk.get();
      where = *c;
    }
    if (fit == detail::Fit::first || where.hole_size == bytes) break;  // cannot do better
  }
  if (best == nullptr) {
    // Nothing fits: take a new chunk. A request larger than the usual chunk
    // gets a chunk of its own (the arena gives it a segment of its own if it
    // exceeds a segment; RDMX_ARENA_MAX is the ceiling).
    const bool dedicated = bytes > options_.chunk_size || align > options_.chunk_size / 2;
    const std::size_t size = dedicated ? bytes : options_.chunk_size;
    Block block = arena_.allocate_chunk(size, std::max<std::size_t>(align, 64));
    auto chunk = std::make_unique<Chunk>(block, dedicated);
    best = chunk.get();
    by_address_.emplace(block.data, best);
    chunks_.push_back(std::move(chunk));
    auto c = best->free.find(bytes, align, fit);
    if (!c) throw Error(Errc::out_of_memory, "general allocator: a fresh chunk cannot hold the request");
    where = *c;
  }
  const std::uint64_t offset = best->free.take(where, bytes);
  return best->block.slice(offset, n);
}

void GeneralAllocator::deallocate(const Block& block) {
  std::lock_guard lock(mutex_);
  deallocate_locked(block.data, block.size);
}

void GeneralAllocator::deallocate(const void* p) {
  std::lock_guard lock(mutex_);
  deallocate_locked(p, 0);
}

void GeneralAllocator::deallocate_locked(const void* p, std::size_t size_hint) {
  const auto* b = static_cast<const std::byte*>(p);
  auto it = by_address_.upper_bound(b);
  Chunk* chunk = it == by_address_.begin() ? nullptr : std::prev(it)->second;
  if (chunk == nullptr || b >= chunk->block.data + chunk->block.size)
    throw Error(Errc::invalid_argument, "general allocator: deallocate of a pointer it did not hand out");
  const auto offset = static_cast<std::uint64_t>(b - chunk->block.data);
  auto size = chunk->free.allocated_size(offset);
  if (!size || size_hint > *size)
    throw Error(Errc::invalid_argument,
                "general allocator: deallocate of a pointer that is not allocated (double free, or not the start of a block)");
  chunk->free.release(offset);
  if (chunk->dedicated && chunk->free.empty()) {
    arena_.release_chunk(chunk->block);
    by_address_.erase(chunk->block.data);
    std::erase_if(chunks_, [chunk](const std::unique_ptr<Chunk>& c) { return c.get() == chunk; });
  }
}

std::size_t GeneralAllocator::chunk_count() const {
  std::lock_guard lock(mutex_);
  return chunks_.size();
}

std::size_t GeneralAllocator::used_bytes() const {
  std::lock_guard lock(mutex_);
  std::size_t used = 0;
  for (auto& chunk : chunks_) used += chunk->free.used_bytes();
  return used;
}

}  // namespace rdmx::memory
