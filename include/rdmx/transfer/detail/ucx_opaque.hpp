// ThreadSanitizer builds treat UCX as opaque. UCX is not built with TSan, so
// the only accesses TSan sees it make are the libc calls it intercepts (the
// memcpy of an emulated put or get over TCP, run by whichever thread
// progresses the target worker). Those copies are RDMA's job, ordered by the
// transport, not by anything TSan can follow: checked, every 8-byte word of
// them reads as a race, and TSan's bookkeeping of reported addresses,
// quadratic in their number, stalled multi-megabyte pulls for minutes.
// So a thread ignores memory accesses while it is inside UCX (InsideUcx,
// around progress, and around a put, which UCX's self transport copies to
// the target inside the call), and becomes visible again in rdmx's own
// callbacks that UCX calls from there (OutOfUcx), which stay fully checked.
// No-ops in other builds.
#pragma once

#if defined(__SANITIZE_THREAD__)
extern "C" void __tsan_ignore_thread_begin();
extern "C" void __tsan_ignore_thread_end();
#endif

namespace rdmx::transfer::detail {

#if defined(__SANITIZE_THREAD__)
inline thread_local int inside_ucx = 0;

struct InsideUcx {
  InsideUcx() {
    if (inside_ucx++ == 0) __tsan_ignore_thread_begin();
  }
  ~InsideUcx() {
    if (--inside_ucx == 0) __tsan_ignore_thread_end();
  }
  InsideUcx(const InsideUcx&) = delete;
  InsideUcx& operator=(const InsideUcx&) = delete;
};

// At the top of every callback rdmx gives UCX. Also called outside progress
// (UCX's async thread, an error callback): then it changes nothing.
struct OutOfUcx {
  OutOfUcx() : saved_(inside_ucx) {
    if (saved_ == 0) return;
    inside_ucx = 0;
    __tsan_ignore_thread_end();
  }
  ~OutOfUcx() {
    if (saved_ == 0) return;
    __tsan_ignore_thread_begin();
    inside_ucx = saved_;
  }
  OutOfUcx(const OutOfUcx&) = delete;
  OutOfUcx& operator=(const OutOfUcx&) = delete;

 private:
  int saved_;
};
#else
// User-provided (empty) members: a scope object is not an "unused variable".
struct InsideUcx {
  InsideUcx() noexcept {}
  ~InsideUcx() {}
};
struct OutOfUcx {
  OutOfUcx() noexcept {}
  ~OutOfUcx() {}
};
#endif

}  // namespace rdmx::transfer::detail
