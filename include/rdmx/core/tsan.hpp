// What ThreadSanitizer cannot see for itself, told to it. No-ops in other
// builds.
//
// RDMA writes: when sender and receiver threads share a process, the
// happens-before a published word carries (everything the sender did before
// publishing, then the receiver's reads) is told with tsan_release on the
// sender and tsan_acquire on the receiver, on the same address. Copies UCX
// makes on a thread's behalf (RDMA emulated over TCP) are not checked at all
// (transfer/detail/ucx_opaque.hpp).
//
// Messages between processes: what a thread did before sending may be
// relied on by whatever the message causes, which can run on another thread
// of the sender's own process after a round trip through other processes (a
// helper thread running a call, a reply, a barrier's release). TSan builds
// model that: every send releases one process-wide token and every receipt
// acquires it. The model over-approximates (a receipt counts as caused by
// every earlier send of the process), so it can hide a race but never
// invent one.
#pragma once

#if defined(__SANITIZE_THREAD__)
extern "C" void __tsan_acquire(void* addr);
extern "C" void __tsan_release(void* addr);
#endif

namespace rdmx {

#if defined(__SANITIZE_THREAD__)
inline void tsan_release(const void* sync) noexcept { __tsan_release(const_cast<void*>(sync)); }
inline void tsan_acquire(const void* sync) noexcept { __tsan_acquire(const_cast<void*>(sync)); }
inline char causality_token;
inline void message_sent() noexcept { __tsan_release(&causality_token); }
inline void message_received() noexcept { __tsan_acquire(&causality_token); }
#else
inline void tsan_release(const void*) noexcept {}
inline void tsan_acquire(const void*) noexcept {}
inline void message_sent() noexcept {}
inline void message_received() noexcept {}
#endif

}  // namespace rdmx
