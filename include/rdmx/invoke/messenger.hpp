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
// call, call_buffer, call_return, broadcast, broadcast_buffer and their try_
// forms are the family of fabric/call_family.hpp; below are the calls only
// this path has (buffers moved by RDMA). Its answers are written by RDMA
// when the completion lives in registered memory (invoke/remote_object.hpp).
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
// destination has not consumed enough yet). The try_ calls instead refuse
// (false, nothing sent).
enum class Policy {
  retry,        // progress (serving incoming calls) until there is room
  retry_async,  // never wait: queue the call in registered memory; it goes out, in order,
                // as the destination frees room (drained whenever this thread calls or progresses)
};

// Per process, from the environment when the job first uses a messenger.
struct MessengerOptions {
  std::size_t chunk_size = 256 * 1024;  // RDMX_CHUNK_SIZE: bytes per chunk, header included
  std::uint32_t chunks = 2;             // RDMX_CHUNKS: chunks set up per destination (c)
  std::uint32_t max_chunks = 16;        // RDMX_MAX_CHUNKS: most chunks per destination (c_max, <= 127)
  std::size_t publish_bytes = 4096;     // RDMX_PUBLISH_BYTES: publish after this many unpublished bytes
  bool mapped_chunks = true;            // RDMX_MAPPED_CHUNKS: write calls straight into chunks UCX maps here (shared memory)
  // RDMX_RING_BUDGET: most bytes of chunks this process holds for rings,
  // its receivers' chunks and its senders' mirrors together. Past it a new
  // ring is refused (its messenger sends as active messages instead) and a
  // ring stops growing. 0: no rings at all.
  std::size_t ring_budget = std::size_t{512} << 20;
  static MessengerOptions from_env();   // throws Errc::invalid_argument for inconsistent values
};

// When a call becomes visible to its destination.
enum class Publish {
  batched,  // every publish_bytes of calls, or when this thread progresses: the most calls per poll
  at_once,  // as soon as it is written: for calls whose answers the caller is about to wait for
};

namespace invoke::detail {
// How one call is handed to its messenger.
struct Mode {
  std::size_t put_bytes = 0;  // issue the RDMA write once this much is pending (0: every call)
  Policy policy = Policy::retry;
  bool overflow = false;              // full messenger: queue locally instead (Aggregation::ovfl)
  std::size_t overflow_limit = 0;     // bytes of queued calls before a call fails
  bool refuse = false;                // no room: return false at once (the try_ calls)
  Publish publish = Publish::batched;
};
// A call_buffer whose buffer is moved by RDMA instead of inside the call.
struct BufferTransfer {
  enum How { written, read } how;
  RemoteLocator where;  // written: the destination's buffer; read: the caller's
};
bool send(const fabric::Outgoing& call, const Mode& mode, const BufferTransfer* buffer = nullptr);
bool broadcast(const fabric::Outgoing& call, const Mode& mode, const BufferTransfer* buffer = nullptr,
               std::span<const RemoteLocator> dest_buffers = {});
std::size_t process_calls();
void flush();
// Make what this thread wrote into its lane (open_record) visible to the
// lane's destination now, rather than at the next publish.
void publish_lane();
}  // namespace invoke::detail

// The calling worker thread's messengers, one per destination thread,
// created on first use (Seriema's RDMAMessengerGlobal). Holds only its
// Policy and Publish: any number of these on one thread share that thread's
// messengers.
//
// Publish::batched (the default) lets a stream of calls reach the
// destination in batches, which it runs many per poll. A caller that waits
// for answers right after its calls (request/response, a window of
// requests) wants Publish::at_once: the destination starts on the first
// while the next ones are written, instead of receiving the window whole when
// the caller starts waiting (calls with when_run are published at once
// anyway). Over shared memory publishing is one store; over RDMA it is one
// more 8-byte write per call.
class MessengerGlobal : public fabric::CallFamily<MessengerGlobal> {
 public:
  explicit MessengerGlobal(Policy policy = Policy::retry, Publish publish = Publish::batched) noexcept
      : policy_(policy), publish_(publish) {}

  // Seriema's second call_buffer: `orig` is RDMA-written into `dest_buffer`
  // (registered memory in dest's process, e.g. from allocate_remote), then
  // dest runs func(span over dest_buffer). `orig` must stay untouched until
  // when_sent counts down (the write has left it).
  template <class F>
  void call_buffer(ThreadId dest, const F& func, std::span<const std::byte> orig, const RemoteLocator& dest_buffer,
                   const Completion& done = {}) {
    const invoke::detail::BufferTransfer b{invoke::detail::BufferTransfer::written, dest_buffer};
    invoke::detail::send(with_data(fabric::outgoing<fabric::BufferWrapper>(dest, fabric::CallKind::buffer, func, done), orig),
                         mode(), &b);
  }
  // Seriema's third call_buffer: dest RDMA-reads `orig` (registered memory of
  // this process: rdmx::local_locator or the arena) into memory of its own,
  // then runs func(span) on it. when_sent counts down once dest has read
  // `orig`; when_run once func ran.
  template <class F>
  void call_buffer(ThreadId dest, const F& func, const RemoteLocator& orig, const Completion& done = {}) {
    const invoke::detail::BufferTransfer b{invoke::detail::BufferTransfer::read, orig};
    invoke::detail::send(fabric::outgoing<fabric::BufferWrapper>(dest, fabric::CallKind::buffer, func, done), mode(), &b);
  }
  using CallFamily::call_buffer;

  // broadcast travels down a binomial tree of threads rooted here; each
  // thread forwards it with its own messengers, then runs it.
  //
  // broadcast_buffer with the buffer read by RDMA (Table 1's broadcast_buffer
  // after call_buffer's read variation): only the record travels down the
  // tree, and every thread RDMA-reads `orig` (registered memory of this
  // process: rdmx::local_locator or the arena) into memory of its own, then
  // runs func(span) on it. `orig` must stay untouched until `done` counts
  // down, which it does once every thread has run func (when_sent and
  // when_run alike); it needs a Synchronizer.
  template <class F>
  void broadcast_buffer(const F& func, const RemoteLocator& orig, const Completion& done) {
    if (done.synchronizer() == nullptr)
      throw Error(Errc::invalid_argument, "broadcast_buffer: reading the buffer by RDMA needs a Synchronizer to say when it may change");
    const invoke::detail::BufferTransfer b{invoke::detail::BufferTransfer::read, orig};
    invoke::detail::broadcast(fabric::outgoing<fabric::BufferWrapper>(ThreadId{}, fabric::CallKind::broadcast, func,
                                                                      when_run(*done.synchronizer())),
                              mode(), &b);
  }
  // broadcast_buffer into destination buffers (Table 1's broadcast_buffer
  // after call_buffer's write variation): `orig` is RDMA-written into this
  // thread's destination buffer, and each thread of the tree RDMA-writes its
  // own buffer into its children's before they run func(span over their
  // buffer). dest_buffers[i] is registered memory (e.g. from
  // rdmx::allocate_remote or local_locator) of thread i % T of process i / T,
  // T = threads per process, and at least orig.size() bytes long.
  // when_sent: orig may be reused (this thread's buffer is written);
  // when_run: every thread has run func. A thread's buffer must not be
  // written again before its func ran.
  template <class F>
  void broadcast_buffer(const F& func, std::span<const std::byte> orig, std::span<const RemoteLocator> dest_buffers,
                        const Completion& done = {}) {
    if (dest_buffers.empty()) throw Error(Errc::invalid_argument, "broadcast_buffer: no destination buffers given");
    auto o = fabric::outgoing<fabric::BufferWrapper>(ThreadId{}, fabric::CallKind::broadcast, func, done);
    invoke::detail::broadcast(with_data(o, orig), mode(), nullptr, dest_buffers);
  }
  using CallFamily::broadcast_buffer;

  // Run the calls that arrived for this thread (and publish what it sent);
  // returns how many ran. rdmx::progress() does the same.
  std::size_t process_calls() const { return invoke::detail::process_calls(); }
  // Make every call this thread made visible to its destination now.
  void flush() const { invoke::detail::flush(); }

  // The path (fabric/call_family.hpp).
  void submit(const fabric::Outgoing& call) { invoke::detail::send(call, mode()); }
  void submit_broadcast(const fabric::Outgoing& call) { invoke::detail::broadcast(call, mode()); }
  bool try_submit(const fabric::Outgoing& call) {
    invoke::detail::Mode refusing = mode();
    refusing.refuse = true;
    return invoke::detail::send(call, refusing);
  }
  // Most calls: straight into the chunk the messenger left open (shared
  // memory). The Outgoing description is built only for the messenger.
  // Published with the lane, so only for batched calls.
  template <class F>
  bool write_inline(ThreadId dest, std::uint64_t function, const F& func) const noexcept {
    return publish_ == Publish::batched && invoke::detail::write_in_lane(dest, function, func);
  }

 private:
  invoke::detail::Mode mode() const noexcept {
    invoke::detail::Mode m;
    m.policy = policy_;
    m.publish = publish_;
    return m;
  }
  Policy policy_;
  Publish publish_;
};

// Inside a one-sided call: the worker thread it was addressed to. That is
// this_thread(), unless a helper thread (RDMX_HELPERS) runs it on that
// worker's behalf. Throws Errc::invalid_argument outside a one-sided call.
ThreadId call_destination();

}  // namespace rdmx
