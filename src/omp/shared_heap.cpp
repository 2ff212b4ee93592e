// rdmx_shared_malloc / rdmx_shared_free: first fit over the part of the DSM
// heap that the master's stack, the Region and section rdmx_shared leave.
// Only the master allocates (outside regions), so the bookkeeping lives in
// process 0 alone; the memory itself is the same range in every process.
#include <cstring>
#include <map>

#include "rdmx/core/log.hpp"
#include "runtime.hpp"

namespace rdmx::omp {
namespace {
constexpr std::size_t alignment = 64;

struct SharedHeap {
  std::byte* base = nullptr;
  std::map<std::size_t, std::size_t> free;  // offset -> bytes, coalesced
  std::map<std::size_t, std::size_t> used;  // offset -> bytes
  std::size_t fresh = 0;                    // bytes from here on were never handed out: still zero
};
SharedHeap heap;

void check_caller(const char* what) {
  if (in_job_region || team.level > 0)
    fatal("%s inside a parallel region: allocate and free shared memory outside regions", what);
}
}  // namespace

void reset_shared_heap(std::span<std::byte> pool) {
  heap = SharedHeap{};
  heap.base = pool.data();
  if (!pool.empty()) heap.free.emplace(0, pool.size());
}

}  // namespace rdmx::omp

using namespace rdmx::omp;

extern "C" void* rdmx_shared_malloc(std::size_t bytes) {
  require("rdmx_shared_malloc");
  check_caller("rdmx_shared_malloc");
  if (bytes == 0) bytes = 1;
  if (bytes > (std::size_t{1} << 62)) return nullptr;
  bytes = (bytes + alignment - 1) / alignment * alignment;
  for (auto it = heap.free.begin(); it != heap.free.end(); ++it) {
    if (it->second < bytes) continue;
    const std::size_t at = it->first, left = it->second - bytes;
    heap.free.erase(it);
    if (left > 0) heap.free.emplace(at + bytes, left);
    heap.used.emplace(at, bytes);
    if (at < heap.fresh) std::memset(heap.base + at, 0, std::min(bytes, heap.fresh - at));
    heap.fresh = std::max(heap.fresh, at + bytes);
    return heap.base + at;
  }
  rdmx::log(rdmx::LogLevel::warn, "omp: rdmx_shared_malloc(%zu): the shared heap is exhausted (RDMX_DSM_HEAP sets its size)",
            bytes);
  return nullptr;
}

extern "C" void rdmx_shared_free(void* p) {
  if (p == nullptr) return;
  require("rdmx_shared_free");
  check_caller("rdmx_shared_free");
  const std::size_t at = static_cast<std::size_t>(static_cast<std::byte*>(p) - heap.base);
  const auto it = heap.used.find(at);
  if (static_cast<std::byte*>(p) < heap.base || it == heap.used.end())
    fatal("rdmx_shared_free(%p): not a block rdmx_shared_malloc returned, or freed twice", p);
  std::size_t start = at, bytes = it->second;
  heap.used.erase(it);
  auto next = heap.free.lower_bound(start);
  if (next != heap.free.end() && next->first == start + bytes) {
    bytes += next->second;
    next = heap.free.erase(next);
  }
  if (next != heap.free.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second == start) {
      start = prev->first;
      bytes += prev->second;
      heap.free.erase(prev);
    }
  }
  heap.free.emplace(start, bytes);
}
