// One-sided remote invocation (Seriema 4.4.1): a Messenger on sender thread
// s serializes calls for destination thread d straight into chunks of
// registered memory in d's NUMA zone, with RDMA writes. d is not involved in
// setting the chunks up (a no-setup service call on d's process does it) and
// finds the calls by polling its own memory. The sender manages the buffers:
// it publishes how far a chunk is written, rotates through its chunks as d
// reports them consumed, and grows the ring up to max_chunks when d lags.
//
//   rdmx::MessengerGlobal messenger;           // this thread's messengers
//   messenger.call({1, 0}, [x = 42] { use(x); });
//   messenger.process_calls();                  // run calls that arrived here
//
// Calls become visible to d when the messenger publishes: every
// publish_bytes of calls, when a chunk fills, on flush(), and whenever the
// sending thread progresses (process_calls(), or waiting on anything). Calls
// from one thread to another run in the order they were made, on the
// destination thread, when it progresses. Captures must be trivially
// copyable, as for the send-based calls (fabric/call.hpp); those work from any
// thread, these only from worker threads.
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>

#include "rdmx/core/error.hpp"
#include "rdmx/fabric/call.hpp"
#include "rdmx/fabric/identity.hpp"
#include "rdmx/fabric/synchronizer.hpp"
#include "rdmx/invoke/detail/lane.hpp"
#include "rdmx/invoke/remote_object.hpp"
#include "rdmx/transfer/remote_locator.hpp"

namespace rdmx {

// What a call does when its messenger can neither rotate nor grow (the
// destination has not consumed enough yet).
enum class Policy {
  retry,        // progress (serving incoming calls) until there is room
  retry_async,  // never wait: queue the call in registered memory; it goes out, in order,
                // as the destination frees room (drained whenever this thread calls or progresses)
  fail,         // return false at once; nothing was sent
};

// Per process, from the environment when the job first uses a messenger.
struct MessengerOptions {
  std::size_t chunk_size = 256 * 1024;  // RDMX_CHUNK_SIZE: bytes per chunk, header included
  std::uint32_t chunks = 2;             // RDMX_CHUNKS: chunks set up per destination (c)
  std::uint32_t max_chunks = 16;        // RDMX_MAX_CHUNKS: most chunks per destination (c_max, <= 127)
  std::size_t publish_bytes = 4096;     // RDMX_PUBLISH_BYTES: publish after this many unpublished bytes
  bool mapped_chunks = true;            // RDMX_MAPPED_CHUNKS: write calls straight into chunks UCX maps here (shared memory)
  static MessengerOptions from_env();   // throws Errc::invalid_argument for inconsistent values
};

namespace invoke::detail {
// How one call is handed to its messenger.
struct Mode {
  std::size_t put_bytes = 0;  // issue the RDMA write once this much is pending (0: every call)
  Policy policy = Policy::retry;
  bool overflow = false;              // full messenger: queue locally instead (Aggregation::ovfl)
  std::size_t overflow_limit = 0;     // bytes of queued calls before a call fails
};
// A call_buffer whose buffer is moved by RDMA instead of inside the call.
struct RemoteBuffer {
  enum How { written, read } how;
  RemoteLocator where;  // written: the destination's buffer; read: the caller's
};
bool send(const fabric::Outgoing& call, const Mode& mode, const RemoteBuffer* buffer = nullptr);
bool broadcast(const fabric::Outgoing& call, const Mode& mode, const RemoteBuffer* buffer = nullptr,
               std::span<const RemoteLocator> dest_buffers = {});
std::size_t process_calls();
void flush();
}  // namespace invoke::detail

// The calling worker thread's messengers, one per destination thread,
// created on first use (Seriema's RDMAMessengerGlobal). Holds no state: any
// number of these on one thread share that thread's messengers.
class MessengerGlobal {
 public:
  // Thread dest runs func(). false: Policy::fail and no room.
  template <Policy P = Policy::retry, Notify N = Notify::sent, class F>
  bool call(ThreadId dest, const F& func, Synchronizer* sync = nullptr) const {
    // Most calls: straight into the chunk the messenger left open (shared
    // memory). The Outgoing description is built only for the messenger.
    if (sync == nullptr &&
        invoke::detail::write_in_lane(dest, fabric::FunctionId<fabric::CallWrapper<F>>::value, func)) [[likely]]
      return true;
    return invoke::detail::send(fabric::outgoing<fabric::CallWrapper>(dest, fabric::CallKind::call, func, sync, N), {0, P});
  }
  // Thread dest runs func(std::span<std::byte>) (or func(void*, uint64_t)) on
  // a copy of buffer that travels inside the call, in the same RDMA write.
  template <Policy P = Policy::retry, Notify N = Notify::sent, class F>
  bool call_buffer(ThreadId dest, const F& func, std::span<const std::byte> buffer, Synchronizer* sync = nullptr) const {
    auto o = fabric::outgoing<fabric::BufferWrapper>(dest, fabric::CallKind::buffer, func, sync, N);
    o.data = buffer;
    return invoke::detail::send(o, {0, P});
  }
  // Seriema's second call_buffer: `orig` is RDMA-written into `dest_buffer`
  // (registered memory in dest's process, e.g. from allocate_remote), then
  // dest runs func(span over dest_buffer). `orig` must stay untouched until
  // the call counts `sync` down with Notify::sent (the write has left it).
  template <Policy P = Policy::retry, Notify N = Notify::sent, class F>
  bool call_buffer(ThreadId dest, const F& func, std::span<const std::byte> orig, const RemoteLocator& dest_buffer,
                   Synchronizer* sync = nullptr) const {
    auto o = fabric::outgoing<fabric::BufferWrapper>(dest, fabric::CallKind::buffer, func, sync, N);
    o.data = orig;
    const invoke::detail::RemoteBuffer b{invoke::detail::RemoteBuffer::written, dest_buffer};
    return invoke::detail::send(o, {0, P}, &b);
  }
  // Seriema's third call_buffer: dest RDMA-reads `orig` (registered memory of
  // this process: rdmx::local_locator or the arena) into memory of its own,
  // then runs func(span) on it. Notify::sent counts down once dest has read
  // `orig`; Notify::consumed once func ran.
  template <Policy P = Policy::retry, Notify N = Notify::sent, class F>
  bool call_buffer(ThreadId dest, const F& func, const RemoteLocator& orig, Synchronizer* sync = nullptr) const {
    auto o = fabric::outgoing<fabric::BufferWrapper>(dest, fabric::CallKind::buffer, func, sync, N);
    const invoke::detail::RemoteBuffer b{invoke::detail::RemoteBuffer::read, orig};
    return invoke::detail::send(o, {0, P}, &b);
  }

  // Thread dest runs func(); its trivially copyable result lands in *orig
  // (written by the destination through its messenger back to this thread),
  // then sync counts down.
  template <Policy P = Policy::retry, class F, class R>
  bool call_return(ThreadId dest, const F& func, R* orig, Synchronizer& sync) const {
    fabric::check_result_type<F, R>();
    auto o = fabric::outgoing<fabric::ReturnWrapper>(dest, fabric::CallKind::returning, func, &sync, Notify::consumed);
    o.result = orig;
    o.result_size = sizeof(R);
    return invoke::detail::send(o, {0, P});
  }

  // With the Synchronizer in registered memory, the destination reports the
  // call consumed with one RDMA atomic instead of a message back.
  template <Policy P = Policy::retry, class F>
  bool call(ThreadId dest, const F& func, RemoteObject<Synchronizer>& sync) const {
    auto o = fabric::outgoing<fabric::CallWrapper>(dest, fabric::CallKind::call, func, sync.get(), Notify::consumed);
    const RemoteLocator counter = sync.locator_of(sync->counter(), 8);
    o.remote_counter = &counter;
    return invoke::detail::send(o, {0, P});
  }
  // call_return answered by RDMA: the destination writes the result into
  // `result` (registered memory), then counts `sync` down with one atomic.
  template <Policy P = Policy::retry, class F, class R>
  bool call_return(ThreadId dest, const F& func, RemoteObject<R>& result, RemoteObject<Synchronizer>& sync) const {
    fabric::check_result_type<F, R>();
    auto o = fabric::outgoing<fabric::ReturnWrapper>(dest, fabric::CallKind::returning, func, sync.get(), Notify::consumed);
    o.result = result.get();
    o.result_size = sizeof(R);
    const RemoteLocator counter = sync.locator_of(sync->counter(), 8), where = result.locator();
    o.remote_counter = &counter;
    o.remote_result = &where;
    return invoke::detail::send(o, {0, P});
  }

  // Every worker thread of the job, this one included, runs func(). The call
  // travels down a binomial tree of threads rooted here; each thread forwards
  // it with its own messengers, then runs it. With Notify::consumed, sync
  // counts down when every thread has run it.
  template <Policy P = Policy::retry, Notify N = Notify::sent, class F>
  bool broadcast(const F& func, Synchronizer* sync = nullptr) const {
    return invoke::detail::broadcast(
        fabric::outgoing<fabric::CallWrapper>(ThreadId{}, fabric::CallKind::broadcast, func, sync, N), {0, P});
  }
  // broadcast with a buffer that travels with the call (func(std::span<std::byte>)).
  template <Policy P = Policy::retry, Notify N = Notify::sent, class F>
  bool broadcast_buffer(const F& func, std::span<const std::byte> buffer, Synchronizer* sync = nullptr) const {
    auto o = fabric::outgoing<fabric::BufferWrapper>(ThreadId{}, fabric::CallKind::broadcast, func, sync, N);
    o.data = buffer;
    return invoke::detail::broadcast(o, {0, P});
  }
  // broadcast_buffer with the buffer read by RDMA (Table 1's broadcast_buffer
  // after call_buffer's read variation): only the record travels down the
  // tree, and every thread RDMA-reads `orig` (registered memory of this
  // process: rdmx::local_locator or the arena) into memory of its own, then
  // runs func(span) on it. `orig` must stay untouched until `sync` counts
  // down, which it does once every thread has run func.
  template <Policy P = Policy::retry, class F>
  bool broadcast_buffer(const F& func, const RemoteLocator& orig, Synchronizer& sync) const {
    auto o = fabric::outgoing<fabric::BufferWrapper>(ThreadId{}, fabric::CallKind::broadcast, func, &sync, Notify::consumed);
    const invoke::detail::RemoteBuffer b{invoke::detail::RemoteBuffer::read, orig};
    return invoke::detail::broadcast(o, {0, P}, &b);
  }
  // broadcast_buffer into destination buffers (Table 1's broadcast_buffer
  // after call_buffer's write variation): `orig` is RDMA-written into this
  // thread's destination buffer, and each thread of the tree RDMA-writes its
  // own buffer into its children's before they run func(span over their
  // buffer). dest_buffers[i] is registered memory (e.g. from
  // rdmx::allocate_remote or local_locator) of thread i % T of process i / T,
  // T = threads per process, and at least orig.size() bytes long.
  // Notify::sent: orig may be reused (this thread's buffer is written);
  // Notify::consumed: every thread has run func. A thread's buffer must not
  // be written again before its func ran.
  template <Policy P = Policy::retry, Notify N = Notify::sent, class F>
  bool broadcast_buffer(const F& func, std::span<const std::byte> orig, std::span<const RemoteLocator> dest_buffers,
                        Synchronizer* sync = nullptr) const {
    auto o = fabric::outgoing<fabric::BufferWrapper>(ThreadId{}, fabric::CallKind::broadcast, func, sync, N);
    o.data = orig;
    if (dest_buffers.empty()) throw Error(Errc::invalid_argument, "broadcast_buffer: no destination buffers given");
    return invoke::detail::broadcast(o, {0, P}, nullptr, dest_buffers);
  }

  // Run the calls that arrived for this thread (and publish what it sent);
  // returns how many ran. rdmx::progress() does the same.
  std::size_t process_calls() const { return invoke::detail::process_calls(); }
  // Make every call this thread made visible to its destination now.
  void flush() const { invoke::detail::flush(); }
};

// Inside a one-sided call: the worker thread it was addressed to. That is
// this_thread(), unless a helper thread (RDMX_HELPERS) runs it on that
// worker's behalf. Throws Errc::invalid_argument outside a one-sided call.
ThreadId call_destination();

}  // namespace rdmx
