// One-sided access to registered memory anywhere in the job, by RemoteLocator.
// Memory in another process comes from allocate_remote: a no-setup service
// call that the destination's service thread answers from its arena, without
// involving any of its worker threads. Operations go from the calling
// thread's worker to the owner's service worker, so over transports that
// emulate RDMA in software (TCP) the target keeps progressing by itself.
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>

#include "rdmx/core/future.hpp"
#include "rdmx/fabric/completion.hpp"
#include "rdmx/fabric/identity.hpp"
#include "rdmx/transfer/flush_epoch.hpp"
#include "rdmx/transfer/memory_region.hpp"
#include "rdmx/transfer/remote_locator.hpp"

namespace rdmx {
namespace transfer {
class Endpoint;
class Transmitter;
}

// Zero-filled registered memory of `bytes` in `process`, in the NUMA zone of thread
// `near` when given (else the process's default zone). Blocks (progressing)
// until the owner's service thread has answered.
RemoteLocator allocate_remote(std::uint32_t process, std::size_t bytes, std::optional<ThreadId> near = std::nullopt);
void free_remote(const RemoteLocator& memory);

// Register `length` bytes of this process's memory for remote access (the
// arena is the usual source; this is for memory the program already has).
RemoteLocator local_locator(const void* address, std::size_t length);

// The raw address and key for a locator; checks it lies inside its region.
transfer::RemoteAddress resolve(const RemoteLocator& where);
// The calling thread's transmitter towards `process` (automatic batching).
transfer::Transmitter& transmitter(std::uint32_t process);
// Whether one-sided operations towards `process` are emulated in software
// (UCX over TCP): each then needs the target's progress to complete.
bool rma_emulated(std::uint32_t process);
// The calling thread's endpoint to worker `peer`'s own UCX worker, not its
// process's service worker: for memory registered on that worker alone (a
// sender's buffer it exposes for one call), which only it can serve.
transfer::Endpoint& endpoint_to(ThreadId peer);
// Count `sync` up now and down once `tag` is free: the flush of `tx` that
// covers a one-sided operation towards `process` has completed. Fails it
// instead if `process` fails first. Settled by the calling thread's polls,
// which close `tag`'s epoch when it is still open. put and get with a
// completion use it, and so do layers that write a caller's buffer.
void notify_when_flushed(transfer::Transmitter& tx, std::uint32_t process, transfer::EpochTag tag, Synchronizer& sync);

// put's future: `source` may be reused (remote completion: flush(process)).
Future<void> put(const void* source, const RemoteLocator& target);
Future<void> get(void* destination, const RemoteLocator& source);
// The same with a completion (fabric/completion.hpp) instead of a future,
// allocating nothing: when_sent(sync) and when_run(sync) alike count down
// once the flush that covers the operation has completed (the data is at
// the target, or in `destination`, and the buffer may be reused); a flush
// is issued for it when the calling thread waits. They fail with
// peer_failed when the other process fails first. A completion without a
// Synchronizer is refused (invalid_argument): post_put is fire-and-forget.
void put(const void* source, const RemoteLocator& target, const Completion& done);
void get(void* destination, const RemoteLocator& source, const Completion& done);
// get that returns once the bytes are in `destination`, allocating nothing:
// for the latency-bound path that would wait on the future at once anyway.
// While it waits it drives only the calling thread's UCX worker: calls that
// arrive for the thread are queued, not run (the DSM's fault handler must
// not run a call that touches the block it is fetching). It throws
// Errc::peer_failed once the owner is known to have failed, also while it
// waits. The first operation of a thread towards a process sets up its
// endpoint and remote key (it allocates and waits for an answer then).
void blocking_get(void* destination, const RemoteLocator& source);
// Fire-and-forget: `source`/`destination` may be reused (hold data) once the tag is free.
transfer::EpochTag post_put(const void* source, const RemoteLocator& target);
transfer::EpochTag post_get(void* destination, const RemoteLocator& source);
// 64-bit atomics on an 8-byte, 8-aligned locator.
Future<std::uint64_t> fetch_add(const RemoteLocator& word, std::uint64_t value);
Future<std::uint64_t> compare_swap(const RemoteLocator& word, std::uint64_t expected, std::uint64_t desired);
// The same without a future, waiting as blocking_get does: the old value.
std::uint64_t blocking_fetch_add(const RemoteLocator& word, std::uint64_t value);
std::uint64_t blocking_compare_swap(const RemoteLocator& word, std::uint64_t expected, std::uint64_t desired);
// Every operation this thread issued towards `process` has completed remotely.
void flush(std::uint32_t process);

}  // namespace rdmx
