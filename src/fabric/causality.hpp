// ThreadSanitizer and messages between processes. A message carries
// causality: what a thread did before sending it may be relied on by
// whatever the message causes, which can run on another thread of the
// sender's own process after a round trip through other processes (a helper
// thread running a call, a reply, a barrier's release). TSan cannot follow
// that path, so TSan builds model it: every send releases one process-wide
// token and every receipt acquires it. The model over-approximates (a
// receipt counts as caused by every earlier send of the process), so it can
// hide a race but never invent one. No-ops in other builds.
#pragma once

#if defined(__SANITIZE_THREAD__)
extern "C" void __tsan_acquire(void* addr);
extern "C" void __tsan_release(void* addr);
#endif

namespace rdmx::fabric {

#if defined(__SANITIZE_THREAD__)
inline char causality_token;
inline void message_sent() noexcept { __tsan_release(&causality_token); }
inline void message_received() noexcept { __tsan_acquire(&causality_token); }
#else
inline void message_sent() noexcept {}
inline void message_received() noexcept {}
#endif

}  // namespace rdmx::fabric
