// Rendezvous parcels at the receiving end: pulling a parcel's chunks with
// RDMA gets into landing memory, then running the request or delivering the
// reply once every get has landed (from the worker's poll), or failing it.
// The worker's poll also notices, now and then, entries and pulls that wait
// on a process that has failed.
#include <cstring>
#include <memory>
#include <span>
#include <string>

#include "rdmx/core/error.hpp"
#include "rdmx/core/log.hpp"
#include "rdmx/fabric/rma.hpp"
#include "rdmx/invoke/messenger.hpp"
#include "rdmx/serial/wire.hpp"
#include "parcel_layer.hpp"

namespace rdmx::parcel {

transfer::Transmitter& WorkerParcels::thread_transmitter(ThreadId peer) {
  const std::uint64_t key = (std::uint64_t{peer.process} << 32) | peer.thread;
  auto& tx = thread_transmitters_[key];
  if (!tx) tx = std::make_unique<transfer::Transmitter>(rdmx::endpoint_to(peer));
  return *tx;
}

std::shared_ptr<transfer::RemoteKey> WorkerParcels::rkey(ThreadId owner, transfer::Endpoint& ep, std::span<const std::byte> packed) {
  // Sending from the same buffer again brings the same packed rkey (the
  // sender's registration cache), so unpack each once. Pulls in flight hold
  // their keys, so the cache may be emptied at any time.
  std::string key(sizeof owner, '\0');
  std::memcpy(key.data(), &owner, sizeof owner);
  key.append(reinterpret_cast<const char*>(packed.data()), packed.size());
  if (auto it = rkeys_.find(key); it != rkeys_.end()) return it->second;
  if (rkeys_.size() >= 1024) rkeys_.clear();
  auto unpacked = std::make_shared<transfer::RemoteKey>(ep, packed);
  rkeys_.emplace(std::move(key), unpacked);
  return unpacked;
}

void WorkerParcels::start_pull(const Header& h, std::span<const std::byte> data) {
  auto p = std::make_unique<Pull>();
  p->header = h;
  p->message.assign(data.begin(), data.end());  // the call's buffer is gone once this returns
  const ThreadId source{h.source_process, h.source_thread};
  try {
    const serial::MessageView view(p->message);
    // RMA chunks lie in registered arena memory, which the fabric reaches
    // through the owner's service worker (over shared memory: mapped, the
    // get is a plain copy). Pointer chunks are ordinary memory: no UCX
    // transport here reads it one-sidedly (UCX 1.13 emulates such gets with
    // active messages the owner's worker answers), so they are pulled from
    // the sending thread's own worker, which is progressing while it waits
    // for the answer, instead of waking a sleeping service thread each time.
    transfer::Transmitter& tx = rdmx::transmitter(source.process);
    transfer::Transmitter* pointer_tx = nullptr;
    std::size_t total = 0;
    for (std::size_t i = 0; i < view.chunk_count(); ++i) {
      const serial::ChunkDescriptor d = view.chunk(i);
      total += d.size;
      if (d.size > job.max_message() || total > job.max_message())
        throw Error(Errc::message_too_large, "a parcel of " + std::to_string(total) + "+ bytes exceeds RDMX_MAX_MESSAGE (" +
                                                 std::to_string(job.max_message()) + ")");
      // A pointer chunk larger than an arena segment lands in a mapping of its own (large_landing.hpp).
      const bool large = d.kind == serial::ChunkKind::pointer && d.size > landing_segment;
      serial::RmaBytes landing = large ? serial::RmaBytes{large_landing.allocate(d.size), d.size, {}}
                                       : this->landing.allocate(d.size, 64);
      if (d.kind == serial::ChunkKind::rma) {
        const transfer::RemoteAddress from = rdmx::resolve(d.key.locator(source.process, d.size));  // checks the bounds
        p->rma_done = tx.post_get(landing.data.get(), d.size, from);
      } else {
        if (d.packed_rkey.empty())
          throw Error(Errc::bad_archive, "pointer chunk " + std::to_string(i) + " carries no memory key (not registered by the sender)");
        if (pointer_tx == nullptr) pointer_tx = &thread_transmitter(source);
        p->keys.push_back(rkey(source, pointer_tx->endpoint(), d.packed_rkey));
        p->pointer_done = pointer_tx->post_get(landing.data.get(), d.size, {d.address, p->keys.back()->get()});
      }
      stats.pulled_bytes += d.size;
      p->chunks.push_back({{landing.data.get(), static_cast<std::size_t>(d.size)}, landing.data, landing.key});
    }
    // Complete every get above (and whatever came before on these endpoints).
    if (p->rma_done.epoch != nullptr) tx.start_flush();
    if (pointer_tx != nullptr) pointer_tx->start_flush();
  } catch (const Error& e) {
    fail_pull(*p, e.code(), std::string("pulling the chunks of a parcel from ") + to_string(source) + ": " + e.what());
    return;
  }
  pulls_.push_back(std::move(p));
}

void WorkerParcels::fail_pull(const Pull& p, Errc code, const std::string& text) {
  const Header& h = p.header;
  const ThreadId source{h.source_process, h.source_thread};
  if (h.kind == kind_request) {
    send_release(source, h.token);
    if (h.flags & wants_reply)
      send_failure(source, h, code, text);
    else
      rdmx::log(rdmx::LogLevel::error, "process %u: a posted %s was dropped: %s\n", self.process, action_name(h.action).c_str(),
                   text.c_str());
    markers_.count_ran(source);  // done with, if not run: the sender's quiet() must not wait for it
  } else {
    send_release(source, h.release);
    failed(h.token, code, "the result could not be received: " + text);
  }
}

void WorkerParcels::complete_pull(std::unique_ptr<Pull> p) {
  const Header& h = p->header;
  const ThreadId source{h.source_process, h.source_thread};
  const Received in{p->message, p->chunks, input_options(), source};
  if (h.kind == kind_request) {
    // The sender may reuse its buffers before the action runs (when_sent):
    // publish the release now, the action may run long without progressing.
    send_release(source, h.token);
    if (h.token != 0 && layer.path.one_sided(source.process)) MessengerGlobal().flush();
    run_request(h, in);
  } else {
    send_release(source, h.release);
    deliver(h.token, in);
  }
}

std::size_t WorkerParcels::poll() {
  std::size_t ran = 0;
  // Completing a pull runs an action, which may progress and re-enter here:
  // each pull is taken out of the list before it is completed.
  for (std::size_t i = 0; i < pulls_.size();) {
    if (!pulls_[i]->landed()) {
      ++i;
      continue;
    }
    std::unique_ptr<Pull> p = std::move(pulls_[i]);
    pulls_.erase(pulls_.begin() + static_cast<std::ptrdiff_t>(i));
    complete_pull(std::move(p));
    ++ran;
  }
  if ((entries_.in_use() != 0 || !pulls_.empty() || markers_.waiting()) && (++tick_ & 255) == 0)
    check_failures();
  // Pulls in flight count as work, so that waiting keeps spinning until
  // they have landed.
  return ran + (pulls_.empty() ? 0 : 1);
}

void WorkerParcels::check_failures() {
  if (!layer.failures.load(std::memory_order_acquire)) return;
  for (std::size_t i = 0; i < pulls_.size();) {
    if (job.process_failed(pulls_[i]->header.source_process))
      pulls_.erase(pulls_.begin() + static_cast<std::ptrdiff_t>(i));
    else
      ++i;
  }
  entries_.for_each([&](std::uint64_t token, Entry& e) {
    if (!job.process_failed(e.peer)) return;
    const Error error(Errc::peer_failed, "process " + std::to_string(e.peer) + " failed before it answered " +
                                             action_name(e.action));
    ReplyTarget c = std::move(e.reply);
    SentCallback callback = std::move(e.callback);
    const bool reply = e.awaiting_reply;
    forget(token);
    // User code below may send and add entries: nothing of e is used after.
    if (callback) callback(&error);
    if (reply && c.state) c.state->set_error(error.code(), error.what());
  });
  markers_.fail_waits_on_failed();
}

}  // namespace rdmx::parcel
