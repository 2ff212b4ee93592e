// The path of a parcel message (parcel_path.hpp): the choice between a
// one-sided and a send-based call, transmit() at the sending end and
// on_message() at the receiving end, which hands the message to its
// worker's protocol (parcel_send.cpp, parcel_pull.cpp).
#include "parcel_path.hpp"

#include <cstring>
#include <string>

#include "rdmx/core/error.hpp"
#include "rdmx/core/log.hpp"
#include "rdmx/fabric/call.hpp"
#include "rdmx/fabric/rma.hpp"
#include "rdmx/invoke/messenger.hpp"
#include "parcel_layer.hpp"
#include "settings.hpp"

namespace rdmx::parcel {

ParcelPath::ParcelPath(Job& job)
    : one_sided_limit_(MessengerOptions::from_env().chunk_size / 4), helpers_(job.helpers_per_process() != 0) {
  const std::string calls = rdmx_action_settings.word("RDMX_PARCEL_CALLS");
  if (calls == "send") forced_ = no;
  if (calls == "one-sided") forced_ = yes;
  // Helper threads run one-sided calls on a thread other than their
  // destination, but a parcel's state (its caller's entry, its pulls) lives
  // with its thread: with helpers, parcels go as send-based calls, which
  // their destination thread runs itself.
  if (helpers_) forced_ = no;
}

std::uint8_t ParcelPath::flags_for(Path path) const {
  switch (path) {
    case Path::automatic:
      return 0;
    case Path::send:
      return by_send;
    case Path::one_sided:
      if (helpers_)
        throw Error(Errc::invalid_argument, "rdmx::parcel::Path::one_sided cannot be taken in a job with helper threads "
                                            "(RDMX_HELPERS): a parcel's state lives with its destination thread, which "
                                            "runs only send-based calls itself");
      return by_one_sided;
  }
  throw Error(Errc::invalid_argument, "rdmx::parcel::Path " + std::to_string(static_cast<int>(path)) + " is not a path");
}

bool ParcelPath::one_sided(std::uint32_t process) const {
  if (forced_ != unknown) return forced_ == yes;
  // The own process too: without shared memory its rings are reached by
  // emulated RDMA as well (docs/results/action.md). Asked each time, not
  // kept here: the first answer may come before UCX has reported the
  // endpoint's lanes, and the fabric keeps only a known one.
  return !rdmx::rma_emulated(process);
}

namespace {

// A parcel message arrived on this worker thread: hand it to its protocol.
void on_message(const Header& h, std::span<const std::byte> data) {
  WorkerParcels& worker = current_worker();
  const ThreadId source{h.source_process, h.source_thread};
  const Received in{data, {}, worker.input_options(), source};
  if (h.kind == kind_request) {
    if (h.flags & rendezvous)
      worker.start_pull(h, data);
    else
      worker.run_request(h, in);
  } else if (h.kind == kind_reply) {
    if (h.flags & is_failure)
      worker.failed(h.token, static_cast<Errc>(h.errc),
                    std::string(reinterpret_cast<const char*>(data.data()), data.size()));
    else if (h.flags & rendezvous)
      worker.start_pull(h, data);
    else
      worker.deliver(h.token, in);
  } else {
    rdmx::log(rdmx::LogLevel::error, "process %u: a parcel of unknown kind %u from %s was dropped\n", worker.self.process,
              unsigned{h.kind}, to_string(source).c_str());
  }
}

// Up to this many bytes of header and message a parcel message is one
// record of its own (fused): a plain call whose captures are the header and
// the message, which the destination reads in place. On the one-sided path
// a larger one goes as a call_buffer, whose record carries the message as
// its buffer; on the send-based path as a call_buffer too, the message as
// the active message's payload. The bound keeps the copy on this thread's
// stack that a closed lane, or an active message's header, needs.
constexpr std::size_t fused_limit = 2048;

// A fused record built on the stack, as the captures of one call.
struct StackRecord {
  alignas(Header) std::byte bytes[fused_limit];
  fabric::Outgoing call(ThreadId to, const Header& h, std::span<const std::byte> message) {
    std::memcpy(bytes, &h, sizeof h);
    if (!message.empty()) std::memcpy(bytes + sizeof h, message.data(), message.size());
    fabric::Outgoing o;
    o.destination = to;
    o.function = fabric::FunctionId<FusedRecord>::value;
    o.closure = bytes;
    o.closure_size = sizeof h + message.size();
    return o;
  }
};

// Sends a fused record one-sided: straight into the open lane (shared
// memory: stores into the destination's chunk, no library call), else
// through the messenger, which writes it into its ring (RDMA: one write).
void send_fused(ThreadId to, const Header& h, std::span<const std::byte> message, bool awaited) {
  const std::uint64_t function = fabric::FunctionId<FusedRecord>::value;
  if (std::byte* at = invoke::detail::open_record(to, function, sizeof h + message.size())) [[likely]] {
    std::memcpy(at, &h, sizeof h);
    if (!message.empty()) std::memcpy(at + sizeof h, message.data(), message.size());
    if (awaited) invoke::detail::publish_lane();
    return;
  }
  StackRecord record;
  invoke::detail::Mode mode;
  mode.publish = awaited ? Publish::at_once : Publish::batched;
  invoke::detail::send(record.call(to, h, message), mode);
}

}  // namespace

void FusedRecord::invoke(fabric::Incoming& in) {
  Header h;
  if (in.closure_size < sizeof h) throw Error(Errc::protocol, "a parcel record of " + std::to_string(in.closure_size) + " bytes has no header");
  std::memcpy(&h, in.closure, sizeof h);
  on_message(h, {in.closure + sizeof h, in.closure_size - sizeof h});
}

// A one-sided call (one RDMA write) when the message fits the destination's
// chunks comfortably and the caller's Path (or, automatic, the process-wide
// choice) is one-sided, else a send-based call (one active message). Small
// messages go fused on either path. A reply, and a request whose future the
// caller will wait on, is published at once: batched, a window of requests
// reached the destination only when the caller began to wait, and their
// replies came back only after the last had run (docs/results/kv.md).
bool transmit(ParcelPath& path, ThreadId to, const Header& h, std::span<const std::byte> message) {
  const bool awaited = h.kind == kind_reply || (h.flags & wants_reply) != 0;
  const std::size_t limit = path.eager_limit(to.process, h.flags);  // 0: send-based calls only
  const std::size_t record = sizeof h + message.size();
  if (limit != 0 && message.size() <= limit && record <= fused_limit) {
    send_fused(to, h, message, awaited);
    return true;
  }
  if (limit == 0 && record <= fused_limit && record <= fabric::max_captures()) {
    StackRecord stack;
    fabric::send_call(stack.call(to, h, message));
    return false;
  }
  auto call = [h](std::span<std::byte> data) { on_message(h, data); };
  if (message.size() <= limit)
    MessengerGlobal(Policy::retry, awaited ? Publish::at_once : Publish::batched).call_buffer(to, call, message);
  else
    rdmx::call_buffer(to, call, message);  // returns once `message` may be reused
  return false;
}

}  // namespace rdmx::parcel
