// Send-based (no-setup) remote invocation: Seriema Table 1 over UCX active
// messages. The callee is a lambda; its captures travel with the call, so they
// must be trivially copyable (plain values, not owning containers): pass bulk
// data as the call_buffer buffer. Calls from one thread to another run in the
// order they were issued, on the destination thread, when it calls
// rdmx::progress() (or waits on anything).
//
//   rdmx::Synchronizer sync;
//   rdmx::call({1, 0}, [x = 42] { use(x); }, rdmx::when_run(sync));
//   sync.wait();  // ran on process 1, thread 0
//   int n = rdmx::call_return({1, 0}, [] { return count(); }).get();
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>

#include "rdmx/core/future.hpp"
#include "rdmx/fabric/call_family.hpp"

namespace rdmx {
namespace fabric {

// A call whose payload (call_buffer's buffer) is at most this many bytes,
// and whose captures at most 64, is received without a heap allocation, as
// long as its thread has fewer than 16 calls queued (once it has held more,
// as many as it held). A larger payload is received into a buffer that
// grows, once per queue slot, unless UCX lends its own.
inline constexpr std::size_t receive_reserved_bytes = 1024;

void send_call(const Outgoing& call);
void broadcast_call(const Outgoing& call);
// The most bytes of captures a send-based call carries in this job: UCX's
// largest active-message header on any worker, less rdmx's call header.
std::size_t max_captures();
// Whether the calling thread's next send_call would wait (progressing) for
// earlier sends to leave first: it has as many queued inside UCX as flow
// control allows. For paths that must not wait, to queue the call instead.
bool send_would_wait();
// Wait, progressing, until the sends the calling thread has queued inside UCX
// have left it: a queued send leaves only while its thread progresses, so a
// thread about to stop progressing (busy with its own work) calls this first.
// Sends to a process known failed are not waited for.
void flush_sends();

namespace detail {
// The send-based path: every call one UCX active message.
struct SendPath final : CallFamily<SendPath> {
  void submit(const Outgoing& call) { send_call(call); }
  void submit_broadcast(const Outgoing& call) { broadcast_call(call); }
};
}  // namespace detail
}  // namespace fabric

// The family of fabric/call_family.hpp over the send-based path. Calls work
// from any thread. call_buffer with nothing to learn returns once `buffer`
// may be reused; with a completion, once that counted down.
template <class F>
void call(ThreadId dest, const F& func, const Completion& done = {}) {
  fabric::detail::SendPath{}.call(dest, func, done);
}
template <class F>
void call_buffer(ThreadId dest, const F& func, std::span<const std::byte> buffer, const Completion& done = {}) {
  fabric::detail::SendPath{}.call_buffer(dest, func, buffer, done);
}
template <class F>
auto call_return(ThreadId dest, const F& func) {
  return fabric::detail::SendPath{}.call_return(dest, func);
}
template <class F, class R>
void call_return(ThreadId dest, const F& func, const Into<R>& result) {
  fabric::detail::SendPath{}.call_return(dest, func, result);
}
// Messages fan out over a binomial tree of processes.
template <class F>
void broadcast(const F& func, const Completion& done = {}) {
  fabric::detail::SendPath{}.broadcast(func, done);
}
template <class F>
void broadcast_buffer(const F& func, std::span<const std::byte> buffer, const Completion& done = {}) {
  fabric::detail::SendPath{}.broadcast_buffer(func, buffer, done);
}

}  // namespace rdmx
