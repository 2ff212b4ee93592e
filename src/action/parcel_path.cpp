// The path of a parcel message (parcel_path.hpp): the choice between a
// one-sided and a send-based call, transmit() at the sending end and
// on_message() at the receiving end, which hands the message to its
// worker's protocol (parcel_send.cpp, parcel_pull.cpp).
#include "parcel_path.hpp"

#include <string>

#include "rdmx/core/error.hpp"
#include "rdmx/core/log.hpp"
#include "rdmx/fabric/call.hpp"
#include "rdmx/fabric/rma.hpp"
#include "rdmx/invoke/messenger.hpp"
#include "parcel_layer.hpp"
#include "settings.hpp"

namespace rdmx::parcel {

ParcelPath::ParcelPath(Job& job) : chosen_(job.size()), one_sided_limit_(MessengerOptions::from_env().chunk_size / 4) {
  const std::string calls = rdmx_action_settings.word("RDMX_PARCEL_CALLS");
  if (calls == "send") forced_ = no;
  if (calls == "one-sided") forced_ = yes;
  // Helper threads run one-sided calls on a thread other than their
  // destination, but a parcel's state (its caller's entry, its pulls) lives
  // with its thread: with helpers, parcels go as send-based calls, which
  // their destination thread runs itself.
  if (job.helpers_per_process() != 0) forced_ = no;
}

bool ParcelPath::one_sided(std::uint32_t process) {
  if (forced_ != unknown) return forced_ == yes;
  // The own process too: without shared memory its rings are reached by
  // emulated RDMA as well (docs/results/action.md).
  std::int8_t c = chosen_[process].load(std::memory_order_relaxed);
  if (c == unknown) {
    // Any of the process's workers is reached over the same transports.
    c = rdmx::rma_emulated(process) ? no : yes;
    chosen_[process].store(c, std::memory_order_relaxed);
  }
  return c == yes;
}

namespace {

// A parcel message arrived on this worker thread: hand it to its protocol.
void on_message(const Header& h, std::span<std::byte> data) {
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

}  // namespace

// A one-sided call (one RDMA write) when the message fits the destination's
// chunks comfortably and one-sided writes to its process are not emulated,
// else a send-based call. A reply, and a request whose future the caller
// will wait on, is published at once: batched, a window of requests reached
// the destination only when the caller began to wait, and their replies
// came back only after the last had run (docs/results/kv.md).
void transmit(ParcelPath& path, ThreadId to, const Header& h, std::span<const std::byte> message) {
  auto call = [h](std::span<std::byte> data) { on_message(h, data); };
  const bool awaited = h.kind == kind_reply || (h.flags & wants_reply) != 0;
  if (message.size() <= path.eager_limit(to.process))
    MessengerGlobal(Policy::retry, awaited ? Publish::at_once : Publish::batched).call_buffer(to, call, message);
  else
    rdmx::call_buffer(to, call, message);  // returns once `message` may be reused
}

}  // namespace rdmx::parcel
