// RecyclingAllocator: an allocator for objects made and dropped once per
// operation (a future's shared state, a referencing SerializeBuffer's
// count: one each per rdmx::async), which keeps a short per-thread list of
// freed blocks of each size instead of going to malloc and free each time.
// A block freed on another thread joins that thread's list: every block of
// one size and alignment comes from the same ::operator new, so they are
// interchangeable.
//
// Under AddressSanitizer nothing is kept, so a use after free of a
// recycled object is still reported.
#pragma once
#include <cstddef>
#include <memory>
#include <new>

namespace rdmx::detail {

template <std::size_t Size, std::size_t Align>
class RecycledBlocks {
 public:
  static void* take() {
    List& l = list;
    if (l.head == nullptr) return ::operator new(Size, std::align_val_t{Align});
    Node* n = l.head;
    l.head = n->next;
    --l.count;
    return n;
  }
  static void give(void* p) noexcept {
    List& l = list;
    if (l.count >= kept || l.closed) return ::operator delete(p, std::align_val_t{Align});
    if (l.count == 0) reaper.arm();  // first use on this thread: free the list at its exit
    auto* n = static_cast<Node*>(p);
    n->next = l.head;
    l.head = n;
    ++l.count;
  }

 private:
  static_assert(Size >= sizeof(void*) && Align >= alignof(void*));
#if defined(__SANITIZE_ADDRESS__)
  static constexpr std::size_t kept = 0;
#else
  static constexpr std::size_t kept = 64;
#endif
  struct Node {
    Node* next;
  };
  // Trivially destructible, so a block freed late in the thread's exit (by
  // another thread_local's destructor) still finds it, closed.
  struct List {
    Node* head = nullptr;
    std::size_t count = 0;
    bool closed = false;
  };
  struct Reaper {
    void arm() noexcept {}  // odr-uses the thread_local, so it is constructed
    ~Reaper() {
      List& l = list;
      l.closed = true;
      while (l.head != nullptr) {
        Node* n = l.head;
        l.head = n->next;
        ::operator delete(n, std::align_val_t{Align});
      }
      l.count = 0;
    }
  };
  static inline thread_local List list;
  static inline thread_local Reaper reaper;
};

template <class U>
struct RecyclingAllocator {
  using value_type = U;
  RecyclingAllocator() noexcept = default;
  template <class V>
  RecyclingAllocator(const RecyclingAllocator<V>&) noexcept {}
  U* allocate(std::size_t n) {
    if (n != 1) return std::allocator<U>().allocate(n);
    return static_cast<U*>(RecycledBlocks<sizeof(U), alignof(U)>::take());
  }
  void deallocate(U* p, std::size_t n) noexcept {
    if (n != 1) return std::allocator<U>().deallocate(p, n);
    RecycledBlocks<sizeof(U), alignof(U)>::give(p);
  }
  template <class V>
  friend bool operator==(const RecyclingAllocator&, const RecyclingAllocator<V>&) noexcept {
    return true;
  }
};

}  // namespace rdmx::detail
