// What every far pointer offers on top of its state word: the checks on
// the object type, and the dereference family. A pointer class derives
// from Dereference<Itself, T> and provides `std::atomic<std::uint64_t>&
// word() const` (throwing for a null pointer that has no word).
#pragma once
#include <atomic>
#include <cstdint>
#include <span>
#include <type_traits>
#include <vector>

#include "rdmx/far/access.hpp"
#include "rdmx/far/config.hpp"
#include "rdmx/far/detail/runtime.hpp"
#include "rdmx/far/scope.hpp"

namespace rdmx::far {

template <class Pointer, class T>
class Dereference {
  static_assert(std::is_trivially_copyable_v<T>, "rdmx::far: far objects must be trivially copyable (they move byte for byte)");
  static_assert(alignof(T) <= min_object_bytes, "rdmx::far: far objects are aligned to at most 64 bytes");
  static_assert(sizeof(T) <= max_object_bytes, "rdmx::far: the object exceeds the largest size class (16 KiB)");

 public:
  using element_type = T;

  // The object, local and pinned until `scope` ends.
  const T* deref(DerefScope& scope) const { return get(scope, Access::read); }
  T* deref_mut(DerefScope& scope) const { return get(scope, Access::write); }
  // Read without marking the object hot, for data touched once (a scan).
  const T* deref_nt(DerefScope& scope) const { return get(scope, Access::non_temporal); }
  // The same, returning at once with the miss in flight (latency hiding):
  // the future holds the object, pinned in `scope`. Wait for it on the
  // thread that started it, before `scope` ends; waiting for one finishes
  // every transfer the thread has under way (detail::deref_async).
  //
  //   std::vector<rdmx::Future<const T*>> next;
  //   for (auto& p : pointers) next.push_back(p.deref_async(scope));
  //   for (auto& f : rdmx::when_all(std::move(next)).get()) use(*f.get());
  Future<const T*> deref_async(DerefScope& scope) const {
    return start(scope, Access::read).then([](void* p) { return static_cast<const T*>(p); });
  }
  Future<T*> deref_mut_async(DerefScope& scope) const {
    return start(scope, Access::write).then([](void* p) { return static_cast<T*>(p); });
  }
  Future<const T*> deref_nt_async(DerefScope& scope) const {
    return start(scope, Access::non_temporal).then([](void* p) { return static_cast<const T*>(p); });
  }
  // A copy of the object / replace it, each in a scope of its own.
  T read() const {
    DerefScope scope;
    return *deref(scope);
  }
  void write(const T& value) const {
    DerefScope scope;
    *deref_mut(scope) = value;
  }

 private:
  Future<void*> start(DerefScope& scope, Access access) const {
    return detail::deref_async(static_cast<const Pointer&>(*this).word(), sizeof(T), scope, access);
  }
  T* get(DerefScope& scope, Access access) const {
    return static_cast<T*>(detail::deref(static_cast<const Pointer&>(*this).word(), sizeof(T), scope, access));
  }
};

// A batch of dereferences in two halves (latency hiding): constructing it
// starts every miss; get() waits for them and returns the objects, pinned
// in `scope`, result[i] being pointers[i]'s. Work done in between overlaps
// the transfers. Finish it on the thread that started it, before `scope`
// ends (destroying it unfinished finishes it). Meanwhile other threads that
// dereference one of its objects wait for it.
//
//   far::DerefScope scope;
//   far::Prefetch next(scope, std::span<const far::UniquePtr<T>>(v.data() + 16, 16));
//   work_on(current);                          // while the next 16 travel
//   for (T* t : next.get()) ...
template <class Pointer>
class Prefetch {
  using T = typename Pointer::element_type;

 public:
  Prefetch(DerefScope& scope, std::span<const Pointer> pointers, Access access = Access::read)
      : words_(words_of(pointers)), objects_(pointers.size()),
        in_flight_(detail::deref_start(words_, sizeof(T), scope, access, objects_)) {}
  // The same for pointers that are not side by side (a hash table's entries).
  Prefetch(DerefScope& scope, std::span<const Pointer* const> pointers, Access access = Access::read)
      : words_(words_of(pointers)), objects_(pointers.size()),
        in_flight_(detail::deref_start(words_, sizeof(T), scope, access, objects_)) {}

  std::vector<T*> get() {
    in_flight_.finish();
    std::vector<T*> result;
    result.reserve(objects_.size());
    for (void* o : objects_) result.push_back(static_cast<T*>(o));
    return result;
  }

 private:
  static std::vector<std::atomic<std::uint64_t>*> words_of(std::span<const Pointer> pointers) {
    std::vector<std::atomic<std::uint64_t>*> words;
    words.reserve(pointers.size());
    for (const Pointer& p : pointers) words.push_back(&p.word());
    return words;
  }
  static std::vector<std::atomic<std::uint64_t>*> words_of(std::span<const Pointer* const> pointers) {
    std::vector<std::atomic<std::uint64_t>*> words;
    words.reserve(pointers.size());
    for (const Pointer* p : pointers) words.push_back(&p->word());
    return words;
  }

  std::vector<std::atomic<std::uint64_t>*> words_;
  std::vector<void*> objects_;
  detail::InFlight in_flight_;
};

// Dereferences every pointer, their misses in flight together instead of
// one after the other (over TCP a lone get waits for the server to be
// scheduled; many share the wait). result[i] is pointers[i]'s object,
// pinned in `scope`. Access::write marks them all dirty.
template <class Pointer>
std::vector<typename Pointer::element_type*> deref_all(DerefScope& scope, std::span<const Pointer> pointers,
                                                       Access access = Access::read) {
  return Prefetch<Pointer>(scope, pointers, access).get();
}

}  // namespace rdmx::far
