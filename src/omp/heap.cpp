// The program's heap. rdmxcc and rdmx_omp_executable rename the program's own
// calls of the allocation functions (malloc, calloc, realloc, free,
// posix_memalign, aligned_alloc, memalign, valloc, strdup, strndup and C++'s
// operator new) to the rdmx_omp_* functions here (cmake/rdmx_omp_object), so
// that a block the master allocates outside parallel regions lies in the DSM
// heap, where every thread of every process reads it, as MENPS places a
// program's heap. Inside a region each thread allocates privately, as its
// scratch: libgomp's threads would share that too, but a block allocated
// there is the thread's own by the program's logic, and the bookkeeping of
// the shared heap lives on process 0 alone (only the master allocates from
// it). The runtime's and the system libraries' allocations are never
// renamed and stay private.
//
// free and operator delete tell the two apart by address. operator delete is
// replaced for the whole program, since code outside the program's objects
// (libstdc++'s out-of-line std::string members, for one) frees blocks the
// program allocated; what is not a shared block goes on to the next
// definition (libstdc++'s, or a sanitizer's).
//
// Shared blocks come from a best-fit allocator over the part of the DSM heap
// that the master's stack and the Region leave.
#include <dlfcn.h>
#include <malloc.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <map>
#include <new>

#include "rdmx/core/log.hpp"
#include "runtime.hpp"

namespace rdmx::omp {
namespace {
constexpr std::size_t alignment = 64;
constexpr std::size_t most = std::size_t{1} << 62;  // larger requests fail as libc's do

// The bookkeeping's own allocator, plain malloc: its type makes the maps'
// template code rdmx_omp's alone. Code the program also instantiates may be
// the program's copy (the linker keeps one), whose operator new is renamed
// to rdmx_omp_new: the bookkeeping would allocate from itself.
template <class T>
struct Private {
  using value_type = T;
  Private() = default;
  template <class U>
  Private(const Private<U>&) noexcept {}
  T* allocate(std::size_t n) {
    if (void* p = std::malloc(n * sizeof(T))) return static_cast<T*>(p);
    throw std::bad_alloc();
  }
  void deallocate(T* p, std::size_t) noexcept { std::free(p); }
  friend bool operator==(const Private&, const Private&) { return true; }
};
template <class K, class V>
using Map = std::map<K, V, std::less<K>, Private<std::pair<const K, V>>>;
template <class K, class V>
using MultiMap = std::multimap<K, V, std::less<K>, Private<std::pair<const K, V>>>;

struct SharedHeap {
  std::byte* base = nullptr;
  std::size_t bytes = 0;
  Map<std::size_t, std::size_t> free;             // offset -> bytes, coalesced
  MultiMap<std::size_t, std::size_t> free_sizes;  // bytes -> offset: best fit
  Map<std::size_t, std::size_t> used;             // offset -> bytes
  std::size_t fresh = 0;  // bytes from here on were never handed out: still zero
  std::size_t in_use = 0;
};
SharedHeap heap;
// The pool's range, kept after the job so that a late free of a shared
// block (a destructor after main) is recognized and dropped.
std::atomic<std::byte*> pool_begin{nullptr}, pool_end{nullptr};
std::atomic<bool> warned_foreign_free{false};

// The program's private blocks allocated before main (by constructors of
// its globals) and not freed since: a shared global that points to one
// would point into a different block on every process, so start-up refuses
// that (globals.cpp). Before main the program has one thread; a fixed
// table, since allocating here would come back here.
struct Premain {
  std::array<void*, 4096> blocks{};
  std::size_t count = 0;
  bool overflow = false;  // more than the table holds
  std::atomic<bool> over{false};  // main has started: nothing more is counted
};
Premain premain;

bool in_pool(const void* p) {
  const auto* b = static_cast<const std::byte*>(p);
  return b >= pool_begin.load(std::memory_order_relaxed) && b < pool_end.load(std::memory_order_relaxed);
}

void insert_free(std::size_t at, std::size_t bytes) {
  heap.free.emplace(at, bytes);
  heap.free_sizes.emplace(bytes, at);
}
void erase_free(Map<std::size_t, std::size_t>::iterator it) {
  auto [first, last] = heap.free_sizes.equal_range(it->second);
  for (; first != last; ++first)
    if (first->second == it->first) {
      heap.free_sizes.erase(first);
      break;
    }
  heap.free.erase(it);
}

// A block of the pool of at least `bytes`, its start aligned to `align` (a
// power of two, at least 64); nullptr when none is free.
std::byte* take(std::size_t bytes, std::size_t align, bool zero) {
  bytes = (bytes + alignment - 1) / alignment * alignment;
  const std::size_t slack = align - alignment;
  if (bytes > most - slack) return nullptr;
  auto fit = heap.free_sizes.lower_bound(bytes + slack);
  if (fit == heap.free_sizes.end()) return nullptr;
  const auto it = heap.free.find(fit->second);
  const std::size_t at = it->first, size = it->second;
  erase_free(it);
  const auto address = reinterpret_cast<std::uintptr_t>(heap.base + at);
  const std::size_t start = at + ((align - address % align) % align);
  if (start > at) insert_free(at, start - at);
  if (at + size > start + bytes) insert_free(start + bytes, at + size - start - bytes);
  heap.used.emplace(start, bytes);
  heap.in_use += bytes;
  if (zero && start < heap.fresh) std::memset(heap.base + start, 0, std::min(bytes, heap.fresh - start));
  heap.fresh = std::max(heap.fresh, start + bytes);
  return heap.base + start;
}

// Returns a shared block to the pool; its size, or 0 when `p` is not one.
std::size_t give_back(void* p) {
  const std::size_t at = static_cast<std::size_t>(static_cast<std::byte*>(p) - heap.base);
  const auto it = heap.used.find(at);
  if (it == heap.used.end()) return 0;
  std::size_t start = at, bytes = it->second;
  const std::size_t size = bytes;
  heap.used.erase(it);
  heap.in_use -= size;
  auto next = heap.free.lower_bound(start);
  if (next != heap.free.end() && next->first == start + bytes) {
    bytes += next->second;
    erase_free(next);
  }
  next = heap.free.lower_bound(start);
  if (next != heap.free.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second == start) {
      start = prev->first;
      bytes += prev->second;
      erase_free(prev);
    }
  }
  insert_free(start, bytes);
  return size;
}

std::size_t block_size(const void* p) {
  const auto it = heap.used.find(static_cast<std::size_t>(static_cast<const std::byte*>(p) - heap.base));
  return it == heap.used.end() ? 0 : it->second;
}

// Where a new block of the program goes.
enum class Place { shared, own, before_job };
Place place() {
  if (runtime() == nullptr) return premain.over.load(std::memory_order_relaxed) ? Place::own : Place::before_job;
  return on_master_stack_now() && !in_job_region ? Place::shared : Place::own;
}

[[noreturn]] void exhausted(const char* what, std::size_t bytes) {
  fatal("%s(%zu): the shared heap is exhausted (%zu of %zu bytes in use; RDMX_DSM_HEAP sets its size)", what, bytes,
        heap.in_use, heap.bytes);
}

void* count_premain(void* p) {
  if (p == nullptr) return p;
  if (premain.count < premain.blocks.size())
    premain.blocks[premain.count++] = p;
  else
    premain.overflow = true;
  return p;
}
void forget_premain(void* p) {
  if (p == nullptr || place() != Place::before_job) return;
  for (std::size_t i = 0; i < premain.count; ++i)
    if (premain.blocks[i] == p) {
      premain.blocks[i] = premain.blocks[--premain.count];
      return;
    }
}

void* allocate(const char* what, std::size_t bytes, std::size_t align, bool zero) {
  switch (place()) {
    case Place::shared: {
      if (bytes > most) return nullptr;
      std::byte* p = take(bytes == 0 ? 1 : bytes, std::max(align, alignment), zero);
      if (p == nullptr) exhausted(what, bytes);
      return p;
    }
    case Place::before_job:
    case Place::own: {
      void* p = nullptr;
      if (align <= alignof(std::max_align_t))
        p = zero ? std::calloc(1, bytes) : std::malloc(bytes);
      else if (::posix_memalign(&p, align, bytes) != 0)
        p = nullptr;
      else if (zero && p != nullptr)
        std::memset(p, 0, bytes);
      return place() == Place::before_job ? count_premain(p) : p;
    }
  }
  return nullptr;
}

// Frees a block of either kind. A shared block is given back by the master;
// any other thread cannot reach process 0's bookkeeping, so the block stays
// allocated (said once); after the job the pool is gone and it is dropped.
void release(void* p) {
  if (p == nullptr) return;
  if (!in_pool(p)) {
    forget_premain(p);
    std::free(p);
    return;
  }
  if (runtime() == nullptr) return;
  if (!on_master_stack_now()) {
    if (!warned_foreign_free.exchange(true))
      rdmx::log(rdmx::LogLevel::warn,
                "omp: a block of the shared heap was freed by a thread other than the master: it stays allocated "
                "(the master allocates and frees shared blocks)\n");
    return;
  }
  if (give_back(p) == 0) fatal("free(%p): not a block of the shared heap, or freed twice", p);
}

void* reallocate(void* p, std::size_t bytes) {
  if (p == nullptr) return allocate("realloc", bytes, alignment, false);
  if (!in_pool(p)) {
    if (place() != Place::before_job) return std::realloc(p, bytes);
    forget_premain(p);
    return count_premain(std::realloc(p, bytes));
  }
  if (runtime() == nullptr) return nullptr;
  const std::size_t old = on_master_stack_now() ? block_size(p) : 0;
  if (on_master_stack_now() && old == 0) fatal("realloc(%p): not a block of the shared heap, or freed", p);
  if (old >= bytes && bytes > 0 && place() == Place::shared) return p;
  void* q = allocate("realloc", bytes, alignment, false);
  if (q == nullptr) return nullptr;
  // Another thread does not know the block's size: it copies what it asked
  // for, as far as the pool reaches.
  const std::size_t known = old != 0 ? old : static_cast<std::size_t>(pool_end.load() - static_cast<std::byte*>(p));
  std::memcpy(q, p, std::min(known, bytes));
  release(p);
  return q;
}

// operator new for the program's objects: a shared block, or the next
// definition's (libstdc++'s, or a sanitizer's, which pairs it with its delete).
template <class Own>
void* allocate_new(std::size_t bytes, std::size_t align, Own own) {
  const Place at = place();
  if (at == Place::shared) return allocate("operator new", bytes, align, false);
  void* p = own();
  return at == Place::before_job ? count_premain(p) : p;
}

// operator delete's next definition (libstdc++'s, or a sanitizer's); free
// where none follows (a program linked with a static libstdc++).
void* next_definition(const char* symbol) {
  void* f = ::dlsym(RTLD_NEXT, symbol);
  return f != nullptr ? f : reinterpret_cast<void*>(&std::free);
}

}  // namespace

void reset_shared_heap(std::span<std::byte> pool) {
  heap = SharedHeap{};
  heap.base = pool.data();
  heap.bytes = pool.size();
  if (!pool.empty()) insert_free(0, pool.size());
  pool_begin.store(pool.data());
  pool_end.store(pool.data() + pool.size());
}

void* shared_block(std::size_t bytes) {
  return bytes > most ? nullptr : take(bytes == 0 ? 1 : bytes, alignment, true);
}

PremainBlocks end_premain() {
  premain.over.store(true);
  PremainBlocks live;
  live.overflow = premain.overflow;
  for (std::size_t i = 0; i < premain.count; ++i)
    live.blocks.emplace_back(reinterpret_cast<std::uintptr_t>(premain.blocks[i]),
                             ::malloc_usable_size(premain.blocks[i]));
  return live;
}

}  // namespace rdmx::omp

using namespace rdmx::omp;

extern "C" {

void* rdmx_shared_malloc(std::size_t bytes) {
  require("rdmx_shared_malloc");
  if (in_job_region || team.level > 0)
    fatal("rdmx_shared_malloc inside a parallel region: allocate and free shared memory outside regions");
  void* p = shared_block(bytes);
  if (p == nullptr)
    rdmx::log(rdmx::LogLevel::warn,
              "omp: rdmx_shared_malloc(%zu): the shared heap is exhausted (RDMX_DSM_HEAP sets its size)\n", bytes);
  return p;
}

void rdmx_shared_free(void* p) {
  if (p == nullptr) return;
  require("rdmx_shared_free");
  if (in_job_region || team.level > 0)
    fatal("rdmx_shared_free inside a parallel region: allocate and free shared memory outside regions");
  if (!in_pool(p) || give_back(p) == 0)
    fatal("rdmx_shared_free(%p): not a block rdmx_shared_malloc returned, or freed twice", p);
}

void* rdmx_omp_malloc(std::size_t bytes) { return allocate("malloc", bytes, alignment, false); }
void* rdmx_omp_calloc(std::size_t count, std::size_t size) {
  std::size_t bytes = 0;
  if (__builtin_mul_overflow(count, size, &bytes)) {
    errno = ENOMEM;
    return nullptr;
  }
  return allocate("calloc", bytes, alignment, true);
}
void* rdmx_omp_realloc(void* p, std::size_t bytes) { return reallocate(p, bytes); }
void* rdmx_omp_reallocarray(void* p, std::size_t count, std::size_t size) {
  std::size_t bytes = 0;
  if (__builtin_mul_overflow(count, size, &bytes)) {
    errno = ENOMEM;
    return nullptr;
  }
  return reallocate(p, bytes);
}
void rdmx_omp_free(void* p) { release(p); }

int rdmx_omp_posix_memalign(void** out, std::size_t align, std::size_t bytes) {
  if (align < sizeof(void*) || (align & (align - 1)) != 0) return EINVAL;
  void* p = allocate("posix_memalign", bytes, align, false);
  if (p == nullptr) return ENOMEM;
  *out = p;
  return 0;
}
void* rdmx_omp_aligned_alloc(std::size_t align, std::size_t bytes) {
  if (align == 0 || (align & (align - 1)) != 0) {
    errno = EINVAL;
    return nullptr;
  }
  return allocate("aligned_alloc", bytes, align, false);
}
void* rdmx_omp_memalign(std::size_t align, std::size_t bytes) { return rdmx_omp_aligned_alloc(align, bytes); }
void* rdmx_omp_valloc(std::size_t bytes) { return allocate("valloc", bytes, 4096, false); }

char* rdmx_omp_strdup(const char* s) {
  const std::size_t n = std::strlen(s);
  auto* p = static_cast<char*>(allocate("strdup", n + 1, alignment, false));
  if (p != nullptr) std::memcpy(p, s, n + 1);
  return p;
}
char* rdmx_omp_strndup(const char* s, std::size_t most_bytes) {
  const std::size_t n = ::strnlen(s, most_bytes);
  auto* p = static_cast<char*>(allocate("strndup", n + 1, alignment, false));
  if (p != nullptr) {
    std::memcpy(p, s, n);
    p[n] = '\0';
  }
  return p;
}

// operator new, as the program's objects call it (renamed). A shared block
// that does not fit stops the job (exhausted), so none returns nullptr.
void* rdmx_omp_new(std::size_t bytes) {
  return allocate_new(bytes, alignment, [&] { return ::operator new(bytes); });
}
void* rdmx_omp_new_array(std::size_t bytes) {
  return allocate_new(bytes, alignment, [&] { return ::operator new[](bytes); });
}
void* rdmx_omp_new_nothrow(std::size_t bytes, const std::nothrow_t& tag) noexcept {
  return allocate_new(bytes, alignment, [&] { return ::operator new(bytes, tag); });
}
void* rdmx_omp_new_array_nothrow(std::size_t bytes, const std::nothrow_t& tag) noexcept {
  return allocate_new(bytes, alignment, [&] { return ::operator new[](bytes, tag); });
}
void* rdmx_omp_new_aligned(std::size_t bytes, std::align_val_t align) {
  return allocate_new(bytes, static_cast<std::size_t>(align), [&] { return ::operator new(bytes, align); });
}
void* rdmx_omp_new_array_aligned(std::size_t bytes, std::align_val_t align) {
  return allocate_new(bytes, static_cast<std::size_t>(align), [&] { return ::operator new[](bytes, align); });
}
void* rdmx_omp_new_aligned_nothrow(std::size_t bytes, std::align_val_t align, const std::nothrow_t& tag) noexcept {
  return allocate_new(bytes, static_cast<std::size_t>(align), [&] { return ::operator new(bytes, align, tag); });
}
void* rdmx_omp_new_array_aligned_nothrow(std::size_t bytes, std::align_val_t align, const std::nothrow_t& tag) noexcept {
  return allocate_new(bytes, static_cast<std::size_t>(align), [&] { return ::operator new[](bytes, align, tag); });
}

}  // extern "C"

// The replaceable operator delete, for the whole program.
void operator delete(void* p) noexcept {
  if (!in_pool(p)) {
    forget_premain(p);
    static const auto next = reinterpret_cast<void (*)(void*)>(next_definition("_ZdlPv"));
    return next(p);
  }
  release(p);
}
void operator delete[](void* p) noexcept {
  if (!in_pool(p)) {
    forget_premain(p);
    static const auto next = reinterpret_cast<void (*)(void*)>(next_definition("_ZdaPv"));
    return next(p);
  }
  release(p);
}
void operator delete(void* p, std::size_t bytes) noexcept {
  if (!in_pool(p)) {
    forget_premain(p);
    static const auto next = reinterpret_cast<void (*)(void*, std::size_t)>(next_definition("_ZdlPvm"));
    return next(p, bytes);
  }
  release(p);
}
void operator delete[](void* p, std::size_t bytes) noexcept {
  if (!in_pool(p)) {
    forget_premain(p);
    static const auto next = reinterpret_cast<void (*)(void*, std::size_t)>(next_definition("_ZdaPvm"));
    return next(p, bytes);
  }
  release(p);
}
void operator delete(void* p, std::align_val_t align) noexcept {
  if (!in_pool(p)) {
    forget_premain(p);
    static const auto next = reinterpret_cast<void (*)(void*, std::align_val_t)>(next_definition("_ZdlPvSt11align_val_t"));
    return next(p, align);
  }
  release(p);
}
void operator delete[](void* p, std::align_val_t align) noexcept {
  if (!in_pool(p)) {
    forget_premain(p);
    static const auto next = reinterpret_cast<void (*)(void*, std::align_val_t)>(next_definition("_ZdaPvSt11align_val_t"));
    return next(p, align);
  }
  release(p);
}
void operator delete(void* p, std::size_t bytes, std::align_val_t align) noexcept {
  if (!in_pool(p)) {
    forget_premain(p);
    static const auto next = reinterpret_cast<void (*)(void*, std::size_t, std::align_val_t)>(next_definition("_ZdlPvmSt11align_val_t"));
    return next(p, bytes, align);
  }
  release(p);
}
void operator delete[](void* p, std::size_t bytes, std::align_val_t align) noexcept {
  if (!in_pool(p)) {
    forget_premain(p);
    static const auto next = reinterpret_cast<void (*)(void*, std::size_t, std::align_val_t)>(next_definition("_ZdaPvmSt11align_val_t"));
    return next(p, bytes, align);
  }
  release(p);
}
void operator delete(void* p, const std::nothrow_t&) noexcept { operator delete(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { operator delete[](p); }
