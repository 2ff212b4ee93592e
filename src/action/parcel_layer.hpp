// Private to the action layer: its state. Parcels is the layer the fabric
// knows (fabric::Layer: polled, quieted, told of failures); WorkerParcels is
// one worker thread's share. A parcel's entry lives on the thread that sent
// it, and every answer (reply, release) is addressed to that thread, so
// nothing per worker is shared between threads and nothing is locked. The
// process-wide pieces are the registration cache for pointer chunks (its
// own lock, taken only for parcels with pointer chunks), the path choice,
// and the registry of actions (read once per action and thread).
//
// The methods live with their jobs: parcel_send.cpp (requests, replies and
// the caller's entries), parcel_pull.cpp (rendezvous chunks, the worker's
// poll), parcel_quiet.cpp (quiet()'s markers), parcel_layer.cpp (making
// the layer, finding the calling thread's share).
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "rdmx/action/parcel.hpp"
#include "rdmx/core/error.hpp"
#include "rdmx/core/token_table.hpp"
#include "rdmx/fabric/identity.hpp"
#include "rdmx/fabric/job.hpp"
#include "rdmx/fabric/layer.hpp"
#include "rdmx/serial/input_archive.hpp"
#include "rdmx/serial/output_archive.hpp"
#include "rdmx/serial/registration_cache.hpp"
#include "rdmx/serial/rma_memory.hpp"
#include "rdmx/transfer/endpoint.hpp"
#include "rdmx/transfer/memory_region.hpp"
#include "rdmx/transfer/transmitter.hpp"
#include "large_landing.hpp"
#include "parcel_path.hpp"
#include "parcel_quiet.hpp"
#include "parcel_wire.hpp"

namespace rdmx::parcel {

class Parcels;

// A parcel this thread sent that still waits for something: the peer to
// pull its chunks (the archive is held until then), a reply, or both.
struct Entry {
  bool awaiting_release = false;
  bool awaiting_reply = false;
  std::uint32_t peer = 0;  // the process it waits on
  std::uint64_t action = 0;
  std::unique_ptr<serial::OutputArchive> archive;
  ReplyTarget reply;
  SentCallback callback;
};

// A rendezvous parcel whose chunks this thread is pulling.
struct Pull {
  Header header;
  std::vector<std::byte> message;
  std::vector<serial::ReceivedChunk> chunks;
  std::vector<std::shared_ptr<transfer::RemoteKey>> keys;  // pointer chunks' rkeys, alive until the gets are done
  transfer::EpochTag rma_done, pointer_done;               // both free: every get has landed
  bool landed() const noexcept { return rma_done.is_free() && pointer_done.is_free(); }
};

class WorkerParcels {
 public:
  WorkerParcels(Job& job, Parcels& layer, std::uint32_t thread);

  Job& job;
  Parcels& layer;
  ThreadId self;
  serial::RmaMemory landing;  // where pulled chunks land (registered: RmaVector keeps it)
  // Where pointer chunks larger than an arena segment land instead (never
  // in the arena: they would not fit a segment), bounded like the arena.
  LargeLanding large_landing;
  std::size_t landing_segment;

  std::unique_ptr<serial::OutputArchive> take_archive() {
    if (archives_.empty()) return std::make_unique<serial::OutputArchive>();
    auto a = std::move(archives_.back());
    archives_.pop_back();
    return a;
  }
  void give_archive(std::unique_ptr<serial::OutputArchive> a) {
    a->clear();
    if (archives_.size() < 16) archives_.push_back(std::move(a));
  }

  // The caller's entries. A late or repeated answer for a reused entry
  // finds nothing (TokenTable) instead of completing someone else's parcel.
  std::uint64_t add_entry(std::uint32_t peer, std::uint64_t action) {
    auto added = entries_.add();
    added.value.peer = peer;
    added.value.action = action;
    return added.token;
  }
  Entry* find(std::uint64_t token) { return entries_.find(token); }
  void free_if_done(std::uint64_t token) {
    Entry* e = find(token);
    if (e == nullptr || e->awaiting_release || e->awaiting_reply) return;
    if (e->archive) give_archive(std::move(e->archive));
    entries_.erase(token);
  }
  void forget(std::uint64_t token) {
    if (Entry* e = find(token)) {
      e->awaiting_release = e->awaiting_reply = false;
      free_if_done(token);
    }
  }

  // The answers a thread receives (parcel_send.cpp).
  void released(std::uint64_t token) {
    Entry* e = find(token);
    if (e == nullptr || !e->awaiting_release) return;  // e.g. already failed with its peer
    e->awaiting_release = false;
    SentCallback callback = std::move(e->callback);
    e->callback = nullptr;
    free_if_done(token);
    if (callback) callback(nullptr);
  }
  void deliver(std::uint64_t token, const Received& in);
  void failed(std::uint64_t token, Errc code, const std::string& text) {
    Entry* e = find(token);
    if (e == nullptr || !e->awaiting_reply) return;
    ReplyTarget c = std::move(e->reply);
    e->awaiting_reply = false;
    free_if_done(token);
    c.state->set_error(code, text);
  }

  // The destination's side (parcel_send.cpp, parcel_pull.cpp).
  void run_request(const Header& h, const Received& in);
  void start_pull(const Header& h, std::span<const std::byte> data);
  // The failure of `request` (its token, its path), answered to `to`.
  void send_failure(ThreadId to, const Header& request, Errc code, const std::string& text);
  void send_release(ThreadId to, std::uint64_t token);

  std::size_t poll();
  bool settled() const noexcept { return pulls_.empty(); }  // no arrived parcel waits for its chunks

  QuietMarkers& markers() noexcept { return markers_; }
  serial::InputOptions input_options() noexcept { return serial::InputOptions{&landing}; }
  void count_sent(const serial::OutputArchive& ar, std::size_t message_bytes) {
    const std::size_t chunk_bytes = ar.out_of_line_bytes();
    ++(chunk_bytes != 0 ? stats.rendezvous : stats.eager);
    stats.message_bytes += message_bytes;
    stats.chunk_bytes += chunk_bytes;
  }
  Stats stats;

 private:
  // Declared inline: defined and used in parcel_pull.cpp only, where poll
  // and start_pull take them in (as when all of this was one file).
  inline void complete_pull(std::unique_ptr<Pull> p);
  inline void fail_pull(const Pull& p, Errc code, const std::string& text);
  inline void check_failures();
  inline std::shared_ptr<transfer::RemoteKey> rkey(ThreadId owner, transfer::Endpoint& ep,
                                                   std::span<const std::byte> packed);
  inline transfer::Transmitter& thread_transmitter(ThreadId peer);

  TokenTable<Entry> entries_;  // parcels waiting for a release or a reply, by token
  std::uint32_t tick_ = 0;
  std::vector<std::unique_ptr<Pull>> pulls_;
  std::vector<std::unique_ptr<serial::OutputArchive>> archives_;
  std::unordered_map<std::string, std::shared_ptr<transfer::RemoteKey>> rkeys_;  // by thread + packed bytes
  std::unordered_map<std::uint64_t, std::unique_ptr<transfer::Transmitter>> thread_transmitters_;
  QuietMarkers markers_;
};

class Parcels final : public fabric::Layer {
 public:
  explicit Parcels(Job& job);
  std::size_t poll(std::uint32_t worker) override { return workers_[worker]->poll(); }
  void flush(std::uint32_t) override {}  // parcels travel as one-sided calls: invoke's flush publishes them
  bool settled(std::uint32_t worker) const override { return workers_[worker]->settled(); }
  void quiet(std::uint32_t worker) override { workers_[worker]->markers().quiet(); }
  // Each worker fails its own entries when it next polls (WorkerParcels::check_failures).
  void process_failed(std::uint32_t, const std::string&) override { failures.store(true, std::memory_order_release); }
  WorkerParcels& worker(std::uint32_t thread) { return *workers_.at(thread); }

  serial::RegistrationCache registrations;
  std::atomic<bool> failures{false};  // some process has failed: slots look for what waits on it
  ParcelPath path;

 private:
  std::vector<std::unique_ptr<WorkerParcels>> workers_;
};

// The calling worker thread's share (throws for threads that are no worker).
WorkerParcels& current_worker();

}  // namespace rdmx::parcel
