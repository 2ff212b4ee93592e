// ThreadSanitizer and RDMA writes. TSan cannot see an RDMA write as such:
// when sender and receiver threads share a process, the happens-before a
// Producer word carries (everything the sender did before publishing, then
// the receiver's reads) must be told to it (release / acquire). Copies UCX
// makes on a thread's behalf (RDMA emulated over TCP) are not checked at all
// (transfer/detail/ucx_opaque.hpp).
// Everything here is a no-op in other builds.
#pragma once

#if defined(__SANITIZE_THREAD__)
extern "C" void __tsan_acquire(void* addr);
extern "C" void __tsan_release(void* addr);
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

}  // namespace rdmx::invoke
