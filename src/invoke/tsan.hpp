// ThreadSanitizer and RDMA writes. TSan cannot see an RDMA write as such:
// - when sender and receiver threads share a process, the happens-before a
//   Producer word carries (everything the sender did before publishing,
//   then the receiver's reads) must be told to it (release / acquire);
// - over TCP, UCX's active-message handler copies the data in on the
//   service thread, which TSan sees as plain writes racing with the
//   receiver's polling. The receiver's reads of chunk memory are what RDMA
//   semantics make safe (it reads only what a later Producer word
//   published), so they are hidden from TSan (IgnoreReads) and nothing else.
// Everything here is a no-op in other builds.
#pragma once

#if defined(__SANITIZE_THREAD__)
extern "C" void __tsan_acquire(void* addr);
extern "C" void __tsan_release(void* addr);
extern "C" void AnnotateIgnoreReadsBegin(const char* file, int line);
extern "C" void AnnotateIgnoreReadsEnd(const char* file, int line);
#endif

namespace rdmx::invoke {

inline void tsan_release(const void* sync) {
#if defined(__SANITIZE_THREAD__)
  __tsan_release(const_cast<void*>(sync));
#else
  (void)sync;
#endif
}

inline void tsan_acquire(const void* sync) {
#if defined(__SANITIZE_THREAD__)
  __tsan_acquire(const_cast<void*>(sync));
#else
  (void)sync;
#endif
}

// Reads of chunk memory in this scope are not checked by TSan.
struct IgnoreReads {
  IgnoreReads() {
#if defined(__SANITIZE_THREAD__)
    AnnotateIgnoreReadsBegin(__FILE__, __LINE__);
#endif
  }
  ~IgnoreReads() {
#if defined(__SANITIZE_THREAD__)
    AnnotateIgnoreReadsEnd(__FILE__, __LINE__);
#endif
  }
  IgnoreReads(const IgnoreReads&) = delete;
  IgnoreReads& operator=(const IgnoreReads&) = delete;
};

// TSan builds run each call from a private copy of its record (and of a
// call_buffer's RDMA-written buffer), taken under IgnoreReads: the user's
// function must stay fully checked. Other builds run in place.
inline constexpr bool copy_records = []{
#if defined(__SANITIZE_THREAD__)
  return true;
#else
  return false;
#endif
}();

}  // namespace rdmx::invoke
