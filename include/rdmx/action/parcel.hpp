// Parcels (HPX section 3.3): the serialized form of a remote action, as the
// network layer moves it. A parcel is a 32-byte header (action id, tokens,
// kind) plus a flattened archive (serial/wire.hpp):
//
//  - eager: the archive has no pointer/RMA chunks (every value was below the
//    zero-copy threshold). Header and archive travel in one one-sided call
//    (MessengerGlobal::call_buffer: one RDMA write into the destination's
//    chunk ring), and the destination runs the action straight from there.
//  - rendezvous: the archive carries its chunk list with memory keys (RMA
//    chunks: the sender's region and offset; pointer chunks: registered on
//    the fly through a RegistrationCache, packed rkey in the message). The
//    destination copies the (small) message, pulls every chunk with an RDMA
//    get into landing memory (registered; a pointer chunk above an arena
//    segment: a mapping of its own), tells the sender it may release
//    the buffers, runs the action, and replies.
//
// Replies are parcels too (a large result is pulled back the same way).
// This header is the untyped interface that rdmx/action/action.hpp builds
// async and post on; programs use action.hpp.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "rdmx/core/error.hpp"
#include "rdmx/core/future.hpp"
#include "rdmx/core/registry.hpp"
#include "rdmx/fabric/identity.hpp"
#include "rdmx/serial/input_archive.hpp"
#include "rdmx/serial/output_archive.hpp"

namespace rdmx::parcel {

// Which path a call's parcel messages take (docs/action.md, "Which path").
// The reply of a request takes the path its request took.
enum class Path : std::uint8_t {
  automatic,  // as RDMX_PARCEL_CALLS says: by default one-sided unless the
              // destination's process is reached over TCP only
  one_sided,  // a record written into the destination's chunk ring (RDMA
              // write; over TCP emulated by the destination's service thread)
  send,       // a UCX active message, handled by the destination's worker
};

// A received parcel's archive, its chunks already pulled.
struct Received {
  std::span<const std::byte> message;               // the flattened archive
  std::span<const serial::ReceivedChunk> chunks;    // one per chunk, in order
  serial::InputOptions options;                     // landing memory for RmaVector / RmaValue
  ThreadId source;                                  // who sent it
};

// The destination's side of one request: where the typed handler puts the
// result (or the failure). Replies only if the caller waits for one.
class Responder {
 public:
  virtual bool wants_result() const noexcept = 0;
  // An empty archive to serialize the result into (signature first).
  virtual serial::OutputArchive& archive() = 0;
  // Send archive() back as the result.
  virtual void reply() = 0;
  // Report a failure instead (also to stderr when nobody waits).
  virtual void fail(Errc code, const std::string& text) = 0;
  // fail() with the exception being handled, thrown by the action itself.
  void fail_with_current_exception(std::uint64_t action);

 protected:
  ~Responder() = default;
};

// An action's receiving half: decode the arguments, run, answer.
using Handler = void (*)(const Received& in, Responder& out);

// The process's actions, by their wrapper's id (core/registry.hpp).
using ActionRegistry = Registry<Handler>;
// The action's readable name (demangled) if this process knows it, else its id in hex.
std::string action_name(std::uint64_t id);

// How a reply completes the caller's future (typed, from action.hpp).
struct ReplyTarget {
  std::shared_ptr<detail::FutureStateBase> state;
  // Decodes the result into *state and sets it, or sets the decoding error.
  void (*deliver)(detail::FutureStateBase& state, const Received& reply) = nullptr;
};
// The sent callback: nullptr once the argument buffers may be reused, or
// the error that ended the parcel before that.
using SentCallback = std::function<void(const Error*)>;

// A reusable output archive of the calling worker thread (no allocation in
// steady state; nested use from re-entrant progress takes another one).
class ArchiveLease {
 public:
  ArchiveLease();
  ~ArchiveLease();
  ArchiveLease(const ArchiveLease&) = delete;
  ArchiveLease& operator=(const ArchiveLease&) = delete;
  serial::OutputArchive& operator*() noexcept { return *archive_; }
  serial::OutputArchive* operator->() noexcept { return archive_.get(); }
  std::unique_ptr<serial::OutputArchive>& owned() noexcept { return archive_; }

 private:
  void* worker_;  // the thread's parcel state
  std::unique_ptr<serial::OutputArchive> archive_;
};

// Send a request for `action` to worker thread `dest` with the arguments in
// `archive` (signed, not flattened). A rendezvous parcel takes the archive
// over (the lease is left empty) and keeps it until dest has pulled it.
// `reply` null: nobody waits for a result (post). `callback` (may be
// null) is run, or taken over to be run later. Throws rdmx::Error when
// nothing could be sent (a bad destination, a dead peer, a full
// registration budget, Path::one_sided with helper threads); then
// *callback has not run and is left to the caller.
void send_request(Path path, ThreadId dest, std::uint64_t action, ArchiveLease& archive, ReplyTarget* reply,
                  SentCallback* callback);

// What a future of a remote action does when waited on: the calling thread progresses.
ProgressHook progress_hook() noexcept;

// The calling worker thread's parcel counters (requests and replies), for
// tests and benchmarks.
struct Stats {
  std::uint64_t eager = 0;          // parcels sent whole, in one message
  std::uint64_t fused = 0;          // eager ones sent as one-sided records of their own (action.md)
  std::uint64_t rendezvous = 0;     // parcels sent as a message plus chunks to pull
  std::uint64_t message_bytes = 0;  // bytes of the messages sent (header, inline bytes, chunk table)
  std::uint64_t chunk_bytes = 0;    // bytes left in chunks for the destinations to pull
  std::uint64_t pulled_bytes = 0;   // bytes this thread pulled with RDMA gets
};
Stats stats();

}  // namespace rdmx::parcel
