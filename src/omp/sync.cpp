// critical, atomic and the __atomic_* library calls, on the DSM's mutexes.
//
// Mutex 0 guards atomics: GOMP_atomic_start/end (GCC's form for several
// reductions at once) and every __atomic_* call on an address in the shared
// heap (GCC's form for one reduction and for `omp atomic`, which
// -fno-inline-atomics turns into calls). A hardware atomic would update
// only this process's copy of the block; under the mutex, the acquire brings
// the newest value and the release publishes the new one (only the
// variable's block for a relaxed atomic: AtomicSection). Mutex 1 is the
// unnamed critical section; named ones and OpenMP locks (locks.cpp) hash
// onto mutexes 2 and up.
#include <cerrno>
#include <cstdint>
#include <vector>

#include "rdmx/dsm/mutex.hpp"
#include "runtime.hpp"

namespace rdmx::omp {
namespace {
// Atomics this thread is inside: an __atomic_* call within
// GOMP_atomic_start/end already holds the mutex (if it was taken).
thread_local std::uint32_t atomic_depth = 0;
thread_local bool atomic_locked = false;

// Outside job-wide regions only the master runs (every other thread waits
// in the team loop's barrier), so critical sections and atomics need no
// mutex there. A region begun inside one also ends inside it, so the end
// of a construct sees the same answer as its start.
bool concurrent() { return in_job_region; }
// What this thread holds each named mutex for (a named critical section's
// variable, an OpenMP lock): two objects that hash onto one mutex, held
// together, would deadlock, and are reported instead.
thread_local std::vector<const void*> holders;

void lock(std::uint32_t mutex) {
  require("a critical or atomic construct");
  off_heap([mutex] { dsm::Mutex(mutex).lock(); });
}
void unlock(std::uint32_t mutex) {
  off_heap([mutex] { dsm::Mutex(mutex).unlock(); });
}

// Whether an atomic on p must go through mutex 0. In a job of one process
// the heap is plain memory its threads share (docs/dsm.md), so a hardware
// atomic is exact there too, as with libgomp.
bool needs_mutex(const volatile void* p) {
  const Runtime* rt = runtime();
  if (rt == nullptr || rt->processes == 1) return false;
  const auto* b = reinterpret_cast<const std::byte*>(const_cast<const void*>(p));
  return b >= rt->heap.data() && b < rt->heap.data() + rt->heap.size();
}

// One __atomic_* call on p (bytes wide) with memory order `order`. The lock
// is an acquire of everything the previous holder published; the unlock of a
// relaxed (or acquire) atomic, such as GCC's reductions and a plain
// `omp atomic` (OpenMP: a flush of that variable only), releases only the
// variable's block, not every block this process dirtied since its last
// release; one with release semantics (seq_cst, acq_rel, release) releases
// everything, as a flush of all memory must.
struct AtomicSection {
  const volatile void* at;
  std::size_t bytes;
  bool narrow, locked;
  AtomicSection(const volatile void* p, std::size_t n, int order)
      : at(p), bytes(n), narrow(releases_only_itself(order)),
        locked(atomic_depth == 0 && concurrent() && needs_mutex(p)) {
    if (locked) {
      lock(atomic_mutex);
      ++atomic_depth;
    }
  }
  ~AtomicSection() {
    if (!locked) return;
    --atomic_depth;
    if (narrow) {
      const void* p = const_cast<const void*>(at);
      const std::size_t n = bytes;
      off_heap([p, n] { dsm::Mutex(atomic_mutex).unlock_only(p, n); });
    } else {
      unlock(atomic_mutex);
    }
  }
  static bool releases_only_itself(int order) {
    const int model = order & 0xffff;  // above: x86's lock-elision hints
    return model == __ATOMIC_RELAXED || model == __ATOMIC_CONSUME || model == __ATOMIC_ACQUIRE;
  }
};
}  // namespace

static std::uint32_t mutex_named(const void* object) {
  const Runtime& rt = require("a named mutex");
  return first_named + static_cast<std::uint32_t>((reinterpret_cast<std::uintptr_t>(object) >> 3) % (rt.mutexes - first_named));
}

const void* held_for(const void* object) {
  const std::uint32_t mutex = mutex_named(object);
  return mutex < holders.size() ? holders[mutex] : nullptr;
}

// Claims the mutex for `object` in this thread's table, or stops the job
// if this thread holds it for another object.
static std::uint32_t claim(const void* object, const char* what) {
  const Runtime& rt = require(what);
  const std::uint32_t mutex = mutex_named(object);
  if (holders.size() < rt.mutexes) holders.resize(rt.mutexes, nullptr);
  if (holders[mutex] != nullptr)
    fatal("%s %p would wait for DSM mutex %u, which this thread holds for %p; a larger RDMX_DSM_MUTEXES separates them",
          what, object, mutex, holders[mutex]);
  return mutex;
}

void lock_named(const void* object, const char* what) {
  const std::uint32_t mutex = claim(object, what);
  lock(mutex);
  holders[mutex] = object;
}

bool try_lock_named(const void* object, const char* what) {
  const std::uint32_t mutex = claim(object, what);
  bool taken = false;
  off_heap([mutex, &taken] { taken = dsm::Mutex(mutex).try_lock(); });
  if (taken) holders[mutex] = object;
  return taken;
}

void unlock_named(const void* object) {
  const std::uint32_t mutex = mutex_named(object);
  holders[mutex] = nullptr;
  unlock(mutex);
}

}  // namespace rdmx::omp

using namespace rdmx::omp;

extern "C" {

void GOMP_atomic_start() {
  if (atomic_depth++ == 0 && concurrent()) {
    lock(atomic_mutex);
    atomic_locked = true;
  }
}
void GOMP_atomic_end() {
  if (--atomic_depth == 0 && atomic_locked) {
    atomic_locked = false;
    unlock(atomic_mutex);
  }
}

void GOMP_critical_start() {
  if (concurrent()) lock(critical_mutex);
}
void GOMP_critical_end() {
  if (concurrent()) unlock(critical_mutex);
}

// *pptr is GCC's per-name variable: its address names the section.
void GOMP_critical_name_start(void** pptr) {
  require("critical(name)");
  if (concurrent()) lock_named(pptr, "critical section");
}
void GOMP_critical_name_end(void** pptr) {
  require("critical(name)");
  if (concurrent()) unlock_named(pptr);
}

// A full memory fence of the program: `#pragma omp flush` (with or without
// a list), atomic_thread_fence(memory_order_seq_cst), __sync_synchronize.
// GCC compiles each to an instruction, never a call, so rdmx_omp_object
// rewrites the instruction into a call of rdmx_omp_fence (below), which
// keeps every register and comes here. On the DSM the fence is a release of
// everything this process wrote and an acquire of everything published
// before it: an acquire and a release of the atomics' mutex. A thread that
// spins on a flag under `omp flush` thus sees the writer's flag, and the data
// it wrote before its own flush, within a round trip to the mutex's home.
void rdmx_omp_flush() {
  __atomic_thread_fence(__ATOMIC_SEQ_CST);
  const Runtime* rt = runtime();
  if (rt == nullptr || rt->processes == 1 || !concurrent() || atomic_depth > 0) return;
  const int saved = errno;  // a fence leaves errno as it was
  lock(atomic_mutex);
  unlock(atomic_mutex);
  errno = saved;
}

}  // extern "C"

// Defined (a byte, weak) by each program object that calls rdmx_omp_fence.
extern "C" const char rdmx_omp_program_flushes __attribute__((weak));
bool rdmx::omp::program_flushes() noexcept { return &rdmx_omp_program_flushes != nullptr; }

// rdmx_omp_fence: rdmx_omp_flush called where the compiler expected one
// instruction: every register it may hold a value in survives (the general
// ones the ABI lets a call clobber, the flags, and the x87, SSE, AVX and
// AVX-512 state through XSAVE), and the stack is aligned for the call. The
// program is compiled with -mno-red-zone, so the return address this call
// pushes never lands on a leaf function's data below its stack pointer.
asm(R"(
  .text
  .globl rdmx_omp_fence
  .type rdmx_omp_fence, @function
rdmx_omp_fence:
  pushfq
  pushq %rax
  pushq %rcx
  pushq %rdx
  pushq %rsi
  pushq %rdi
  pushq %r8
  pushq %r9
  pushq %r10
  pushq %r11
  pushq %rbp
  movq %rsp, %rbp
  subq $4096, %rsp
  andq $-64, %rsp
  xorl %eax, %eax
  movq %rax, 512(%rsp)
  movq %rax, 520(%rsp)
  movq %rax, 528(%rsp)
  movq %rax, 536(%rsp)
  movq %rax, 544(%rsp)
  movq %rax, 552(%rsp)
  movq %rax, 560(%rsp)
  movq %rax, 568(%rsp)
  movl $0xe7, %eax
  xorl %edx, %edx
  xsave64 (%rsp)
  call rdmx_omp_flush
  movl $0xe7, %eax
  xorl %edx, %edx
  xrstor64 (%rsp)
  movq %rbp, %rsp
  popq %rbp
  popq %r11
  popq %r10
  popq %r9
  popq %r8
  popq %rdi
  popq %rsi
  popq %rdx
  popq %rcx
  popq %rax
  popfq
  ret
  .size rdmx_omp_fence, .-rdmx_omp_fence
)");

// The __atomic_* calls GCC emits under -fno-inline-atomics, for 1, 2, 4 and
// 8 bytes. The C++ names differ from the symbols (asm labels) because the
// symbols are GCC builtins; in here the builtins expand inline.
#define RDMX_OMP_ATOMICS(N, T)                                                                        \
  extern "C" T rdmx_omp_load_##N(const volatile void*, int) __asm__("__atomic_load_" #N);            \
  T rdmx_omp_load_##N(const volatile void* p, int order) {                                           \
    AtomicSection section(p, N, order);                                                                         \
    return __atomic_load_n(static_cast<const volatile T*>(p), order);                                 \
  }                                                                                                   \
  extern "C" void rdmx_omp_store_##N(volatile void*, T, int) __asm__("__atomic_store_" #N);          \
  void rdmx_omp_store_##N(volatile void* p, T v, int order) {                                         \
    AtomicSection section(p, N, order);                                                                         \
    __atomic_store_n(static_cast<volatile T*>(p), v, order);                                          \
  }                                                                                                   \
  extern "C" T rdmx_omp_exchange_##N(volatile void*, T, int) __asm__("__atomic_exchange_" #N);       \
  T rdmx_omp_exchange_##N(volatile void* p, T v, int order) {                                         \
    AtomicSection section(p, N, order);                                                                         \
    return __atomic_exchange_n(static_cast<volatile T*>(p), v, order);                                \
  }                                                                                                   \
  extern "C" bool rdmx_omp_compare_exchange_##N(volatile void*, void*, T, bool, int, int) __asm__(    \
      "__atomic_compare_exchange_" #N);                                                               \
  bool rdmx_omp_compare_exchange_##N(volatile void* p, void* expected, T desired, bool, int order, int) { \
    AtomicSection section(p, N, order);                                                                         \
    return __atomic_compare_exchange_n(static_cast<volatile T*>(p), static_cast<T*>(expected), desired, \
                                       false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);                    \
  }                                                                                                   \
  RDMX_OMP_RMW(N, T, fetch_add, __atomic_fetch_add)                                                   \
  RDMX_OMP_RMW(N, T, fetch_sub, __atomic_fetch_sub)                                                   \
  RDMX_OMP_RMW(N, T, fetch_and, __atomic_fetch_and)                                                   \
  RDMX_OMP_RMW(N, T, fetch_or, __atomic_fetch_or)                                                     \
  RDMX_OMP_RMW(N, T, fetch_xor, __atomic_fetch_xor)                                                   \
  RDMX_OMP_RMW(N, T, fetch_nand, __atomic_fetch_nand)                                                 \
  RDMX_OMP_RMW(N, T, add_fetch, __atomic_add_fetch)                                                   \
  RDMX_OMP_RMW(N, T, sub_fetch, __atomic_sub_fetch)                                                   \
  RDMX_OMP_RMW(N, T, and_fetch, __atomic_and_fetch)                                                   \
  RDMX_OMP_RMW(N, T, or_fetch, __atomic_or_fetch)                                                     \
  RDMX_OMP_RMW(N, T, xor_fetch, __atomic_xor_fetch)                                                   \
  RDMX_OMP_RMW(N, T, nand_fetch, __atomic_nand_fetch)

#define RDMX_OMP_RMW(N, T, op, builtin)                                                               \
  extern "C" T rdmx_omp_##op##_##N(volatile void*, T, int) __asm__("__atomic_" #op "_" #N);          \
  T rdmx_omp_##op##_##N(volatile void* p, T v, int order) {                                           \
    AtomicSection section(p, N, order);                                                                         \
    return builtin(static_cast<volatile T*>(p), v, __ATOMIC_SEQ_CST);                                 \
  }

RDMX_OMP_ATOMICS(1, std::uint8_t)
RDMX_OMP_ATOMICS(2, std::uint16_t)
RDMX_OMP_ATOMICS(4, std::uint32_t)
RDMX_OMP_ATOMICS(8, std::uint64_t)
#undef RDMX_OMP_RMW
#undef RDMX_OMP_ATOMICS
