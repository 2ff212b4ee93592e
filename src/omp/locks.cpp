// OpenMP locks, simple and nested, on the DSM's named mutexes (sync.cpp).
//
// A lock is named by its address, as a named critical section is: setting
// it takes the DSM mutex its address hashes onto (an acquire: what the
// previous holder wrote before unsetting it is visible), unsetting gives
// the mutex back (a release of everything this thread wrote). OpenMP's
// memory model asks exactly that of a lock. The lock object itself holds
// only a mark that omp_init_lock wrote, so that a lock used uninitialized or
// after omp_destroy_lock stops the job with its name instead of taking a
// mutex some other lock guards; who holds a lock, and how deep a nested
// lock is held, is the holding thread's own bookkeeping.
#include <cstdint>
#include <cstring>
#include <vector>

#include "runtime.hpp"

namespace rdmx::omp {
namespace {

constexpr std::uint32_t simple_mark = 0x6b636f6c, nested_mark = 0x7473656e;  // "lock", "nest"

std::uint32_t mark_of(const void* lock) {
  std::uint32_t mark;
  std::memcpy(&mark, lock, sizeof mark);
  return mark;
}
void set_mark(void* lock, std::uint32_t mark) { std::memcpy(lock, &mark, sizeof mark); }

void check_initialized(const void* lock, std::uint32_t mark, const char* call) {
  require(call);
  if (mark_of(lock) != mark)
    fatal("%s on %p, which omp_init_%slock did not initialize (or omp_destroy_%slock destroyed)", call, lock,
          mark == nested_mark ? "nest_" : "", mark == nested_mark ? "nest_" : "");
}

// The nested locks this thread holds, with their depths.
struct Held {
  const void* lock;
  int depth;
};
thread_local std::vector<Held> nested;

Held* nested_held(const void* lock) {
  for (Held& h : nested)
    if (h.lock == lock) return &h;
  return nullptr;
}

}  // namespace
}  // namespace rdmx::omp

using namespace rdmx::omp;

extern "C" {

void omp_init_lock(void* lock) {
  require("omp_init_lock");
  set_mark(lock, simple_mark);
}
void omp_init_lock_with_hint(void* lock, int) { omp_init_lock(lock); }
void omp_destroy_lock(void* lock) {
  check_initialized(lock, simple_mark, "omp_destroy_lock");
  if (held_for(lock) == lock) fatal("omp_destroy_lock on %p, which this thread holds", lock);
  set_mark(lock, 0);
}
void omp_set_lock(void* lock) {
  check_initialized(lock, simple_mark, "omp_set_lock");
  if (held_for(lock) == lock) fatal("omp_set_lock on %p, which this thread already holds: it would wait for ever", lock);
  lock_named(lock, "OpenMP lock");
}
void omp_unset_lock(void* lock) {
  check_initialized(lock, simple_mark, "omp_unset_lock");
  if (held_for(lock) != lock) fatal("omp_unset_lock on %p, which this thread does not hold", lock);
  unlock_named(lock);
}
int omp_test_lock(void* lock) {
  check_initialized(lock, simple_mark, "omp_test_lock");
  if (held_for(lock) == lock) return 0;
  return try_lock_named(lock, "OpenMP lock") ? 1 : 0;
}

void omp_init_nest_lock(void* lock) {
  require("omp_init_nest_lock");
  set_mark(lock, nested_mark);
}
void omp_init_nest_lock_with_hint(void* lock, int) { omp_init_nest_lock(lock); }
void omp_destroy_nest_lock(void* lock) {
  check_initialized(lock, nested_mark, "omp_destroy_nest_lock");
  if (nested_held(lock) != nullptr) fatal("omp_destroy_nest_lock on %p, which this thread holds", lock);
  set_mark(lock, 0);
}
void omp_set_nest_lock(void* lock) {
  check_initialized(lock, nested_mark, "omp_set_nest_lock");
  if (Held* h = nested_held(lock)) {
    ++h->depth;
    return;
  }
  lock_named(lock, "OpenMP nested lock");
  nested.push_back({lock, 1});
}
void omp_unset_nest_lock(void* lock) {
  check_initialized(lock, nested_mark, "omp_unset_nest_lock");
  Held* h = nested_held(lock);
  if (h == nullptr) fatal("omp_unset_nest_lock on %p, which this thread does not hold", lock);
  if (--h->depth > 0) return;
  *h = nested.back();
  nested.pop_back();
  unlock_named(lock);
}
int omp_test_nest_lock(void* lock) {
  check_initialized(lock, nested_mark, "omp_test_nest_lock");
  if (Held* h = nested_held(lock)) return ++h->depth;
  if (!try_lock_named(lock, "OpenMP nested lock")) return 0;
  nested.push_back({lock, 1});
  return 1;
}

}  // extern "C"
