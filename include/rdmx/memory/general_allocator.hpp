// GeneralAllocator: Seriema 4.2's general allocator: malloc/free over
// registered memory, for buffers whose lifetime does not follow the ring
// order the circular allocators assume. It takes chunks from an Arena
// (chunk_size each, 2 MiB by default as in Seriema; a larger request gets a
// chunk of its own, returned to the arena when freed) and places requests
// best-fit or first-fit, coalescing free neighbours on deallocate. It is
// thread-safe (one mutex): use a circular allocator per thread where
// allocation is on the per-operation path.
#pragma once
#include <cstddef>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "rdmx/memory/block.hpp"

namespace rdmx::memory {

class Arena;

enum class FitPolicy {
  best_fit,   // the smallest hole that fits: least fragmentation
  first_fit,  // the first hole (chunk order, then address) that fits: fastest
};

struct GeneralOptions {
  FitPolicy policy = FitPolicy::best_fit;
  std::size_t chunk_size = 2 * 1024 * 1024;  // capped at the arena's segment size
};

class GeneralAllocator {
 public:
  using Options = GeneralOptions;

  // The arena must outlive the allocator.
  explicit GeneralAllocator(Arena& arena, Options options = {});
  ~GeneralAllocator();
  GeneralAllocator(const GeneralAllocator&) = delete;
  GeneralAllocator& operator=(const GeneralAllocator&) = delete;

  // n > 0 bytes aligned to `align` (a power of two). Throws Errc::out_of_memory
  // when the arena cannot supply a chunk, Errc::invalid_argument for n == 0 or a bad alignment.
  Block allocate(std::size_t n, std::size_t align = 16);
  // Throws Errc::invalid_argument for a double free or a block/pointer this
  // allocator did not hand out.
  void deallocate(const Block& block);
  void deallocate(const void* p);

  FitPolicy policy() const noexcept { return options_.policy; }
  std::size_t chunk_count() const;
  std::size_t used_bytes() const;  // including rounding

 private:
  struct Chunk;
  void deallocate_locked(const void* p, std::size_t size_hint);

  Arena& arena_;
  Options options_;
  mutable std::mutex mutex_;
  std::vector<std::unique_ptr<Chunk>> chunks_;   // in the order they were taken
  std::map<const std::byte*, Chunk*> by_address_;
};

}  // namespace rdmx::memory
