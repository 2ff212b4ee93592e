// Arena: Seriema's RDMAAllocator, one per NUMA zone. It takes large segments
// of memory from the system (1 GiB or 2 MiB huge pages when the hugetlb pool
// has them, else UCX-allocated memory), binds them to its NUMA node before
// first touch, registers each segment with UCX exactly once and names it in
// RegionTable::process(). Everything else in rdmx::memory carves its chunks
// out of an Arena, so nothing on the per-operation path ever registers
// memory. Chunk allocation is mutex-protected and thread-safe: it happens
// when an allocator grows, not per operation.
//
// A chunk larger than a segment gets a segment of its own (rounded up to the
// page size), so a program never has to size segments for its largest
// registered buffer. Segments are kept until the Arena is destroyed, their
// room reused; chunks handed out must not be used after that.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "rdmx/memory/block.hpp"

namespace rdmx::transfer {
class Context;
}

namespace rdmx::memory {

// Where an arena's segments come from (RDMX_ARENA_BACKING).
enum class Backing {
  automatic,  // "auto": hugetlb 1 GiB, else hugetlb 2 MiB, else ucx
  ucx,        // ucp_mem_map(ALLOCATE): shared memory peers on the node write with plain stores
  hugetlb,    // our own MAP_HUGETLB mapping (1 GiB pages if the pool has them, else 2 MiB)
  thp,        // our own mapping + madvise(MADV_HUGEPAGE)
};
const char* to_string(Backing backing) noexcept;
Backing parse_backing(const std::string& text, const char* what);

// What the kernel really backs a segment with (read from /proc/self/smaps).
enum class PageKind {
  unknown,      // no segment mapped yet
  regular,      // base pages (4 KiB here)
  transparent,  // at least part of it in transparent huge pages
  huge_2m,      // hugetlb 2 MiB pages
  huge_1g,      // hugetlb 1 GiB pages
};
const char* to_string(PageKind kind) noexcept;

// Defaults come from the environment when the Options object is made, so a
// program that sets no field gets the user's configuration and one that sets
// a field overrides it.
struct ArenaOptions {
  static std::size_t env_segment_size();  // RDMX_ARENA_SEGMENT, default 64 MiB
  static std::size_t env_max_size();      // RDMX_ARENA_MAX, default 1 GiB
  static Backing env_backing();           // RDMX_ARENA_BACKING, default auto

  int numa_node = -1;  // -1: no binding
  std::size_t segment_size = env_segment_size();
  std::size_t max_size = env_max_size();
  Backing backing = env_backing();
};

class Arena {
 public:
  using Options = ArenaOptions;

  // Throws Errc::invalid_argument for a NUMA node the machine does not have
  // or inconsistent sizes. Maps nothing yet.
  Arena(transfer::Context& context, Options options);
  ~Arena();
  Arena(const Arena&) = delete;
  Arena& operator=(const Arena&) = delete;

  // A chunk of `bytes` (rounded up to 64) aligned to `align` (a power of two,
  // at most the segment's page size). Throws Errc::out_of_memory when the
  // arena would exceed max_size (a chunk larger than a segment maps one of
  // its own size).
  Block allocate_chunk(std::size_t bytes, std::size_t align = 64);
  // Give a chunk back; throws Errc::invalid_argument for a block this arena
  // did not hand out (or already took back).
  void release_chunk(const Block& chunk);

  int numa_node() const noexcept { return options_.numa_node; }
  // Actual segment size: the requested one rounded up to the page size in use.
  std::size_t segment_size() const noexcept;
  std::size_t max_size() const noexcept { return options_.max_size; }
  std::size_t segment_count() const;
  std::size_t mapped_bytes() const;
  std::size_t used_bytes() const;
  // The backing segments actually come from (never `automatic` once resolved).
  Backing backing() const;
  // The smallest page kind over all segments; unknown before the first one.
  PageKind page_kind() const;
  // One line for logs and benchmark output, e.g.
  // "arena node 0: 2 segments x 64 MiB (max 1 GiB), ucx-allocated, 4 KiB pages, 1 MiB in use".
  std::string describe() const;

 private:
  struct Segment;
  struct Plan {
    Backing backing;
    std::size_t page_size;  // hugetlb page size, or 0
    std::size_t segment_size;
  };
  Plan plan_segment() const;
  std::size_t granule() const noexcept;
  std::size_t mapped_locked() const noexcept;  // mutex_ held
  std::unique_ptr<Segment> map_segment(std::size_t length);

  transfer::Context& context_;
  Options options_;
  Plan plan_;
  bool bound_ok_ = true;        // every mbind so far succeeded
  std::string bind_failure_;    // why one did not
  mutable std::mutex mutex_;
  std::vector<std::unique_ptr<Segment>> segments_;
};

}  // namespace rdmx::memory
