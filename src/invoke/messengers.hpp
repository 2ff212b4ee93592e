// Private to invoke: the per-process state behind MessengerGlobal. Each
// worker thread has outgoing Messengers, one per destination thread,
// and incoming Channels, one per sender; the process's service thread adds
// chunks to a worker's incoming map when a sender asks for them.
#pragma once
#include <array>
#include <atomic>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "rdmx/fabric/function_registry.hpp"
#include "rdmx/fabric/job.hpp"
#include "rdmx/fabric/layer.hpp"
#include "rdmx/invoke/messenger.hpp"
#include "rdmx/memory/block.hpp"
#include "rdmx/transfer/flush_epoch.hpp"
#include "rdmx/transfer/transmitter.hpp"
#include "rdmx/transfer/worker.hpp"
#include "rdmx/core/future.hpp"
#include "wire.hpp"

namespace rdmx::invoke {

class WorkerState;
class Messengers;

// A broadcast record on its way down the tree: its root, and the root's
// Synchronizer (an address in the root's process; 0: none).
struct Forward {
  ThreadId root;
  std::uint64_t sync = 0;
  std::span<const wire::Target> targets;  // broadcast_buffer into destination buffers: one per thread of the job
};

// Wait until the operation `tag` covers, towards `process`, has completed
// (flushing its epoch if it is still open), progressing only the UCX worker;
// throws Errc::peer_failed once `process` is known to have failed.
void wait_until_free(transfer::Transmitter& tx, std::uint32_t process, const transfer::EpochTag& tag);

// Small words a thread RDMA-writes (Producer words, consumed counts). A put's
// source must stay untouched until the put completes locally, so words
// rotate through a few slots, each reused only once its epoch is flushed.
class WordSlots {
 public:
  std::uint64_t* next(transfer::Transmitter& tx, std::uint32_t process);
  void used(transfer::EpochTag tag) { tags_[last_] = tag; }

 private:
  static constexpr std::size_t count = 8;
  std::uint64_t words_[count] = {};
  transfer::EpochTag tags_[count];
  std::size_t last_ = 0;
};

// Sender side of one channel, s -> d (Seriema's sending RDMAMessenger).
class Messenger {
 public:
  // Its memory lives in the arenas, which outlive the layer.
  Messenger(WorkerState& owner, ThreadId dest);
  ~Messenger();
  Messenger(const Messenger&) = delete;
  Messenger& operator=(const Messenger&) = delete;

  bool append(const fabric::Outgoing& call, const detail::Mode& mode, const detail::BufferTransfer* buffer = nullptr,
              const Forward* forward = nullptr);
  // d's process refused this messenger a ring (RDMX_RING_BUDGET): for its
  // whole life its calls travel as active messages (relayed), in order.
  bool relayed() const noexcept { return relayed_; }
  // Make every appended call visible to d (drains the overflow queue as far
  // as the ring allows).
  void publish();
  // Relayed: send what is queued, waiting for flow control as needed.
  void drain_relayed_all();
  bool has_unpublished() const noexcept { return published_ != written() || !overflow_.empty(); }
  // Take back the records call() wrote into the lane and close it (another
  // messenger of this worker is about to open it).
  void close_lane();
  // The lane's holder: publish what call() wrote into it, if anything.
  void publish_lane();
  // The same without closing the lane: one store over shared memory, for a
  // record whose answer its caller is about to wait for.
  void publish_lane_now();
  ThreadId destination() const noexcept { return dest_; }
  // d ran one of this relayed messenger's markers (send_relay_marker).
  void relay_acked() noexcept { ++relay_acked_; }
  // Its destination's process has failed: nothing more goes out, and calls throw.
  bool dead() const;
  bool listed = false;  // on the owner's list of messengers with unpublished calls

 private:
  friend struct Inspect;
  struct Chunk {
    transfer::RemoteAddress remote;  // the chunk in d's process
    memory::Block mirror;            // where calls are serialized before the write
    std::byte* mapped = nullptr;     // d's chunk mapped here (shared memory): calls are serialized straight into it
    std::uint64_t seq = 0;           // activation number; 0: never used
    transfer::EpochTag tag;          // the last write from `mirror`
    std::byte* base() const noexcept { return mapped != nullptr ? mapped : mirror.data; }
  };
  struct Segment {  // overflow memory: registered, so queued calls are written from it directly
    memory::Block block;
    std::size_t used = 0, sent = 0;
    transfer::EpochTag tag;
  };
  void setup();
  // Asks d's process for `count` chunks; returns how many were added (fewer,
  // or none, once a process's RDMX_RING_BUDGET is reached).
  std::uint32_t add_chunks(std::uint32_t count, bool first);
  // The relayed path: each record, serialized as for a chunk, is the payload
  // of a send-based call that runs it on d (WorkerState::run_relayed).
  bool relay(const fabric::Outgoing& call, const detail::Mode& mode, const detail::BufferTransfer* buffer,
             const Forward* forward, std::size_t size);
  void send_relayed(std::span<std::byte> record);
  void send_record(std::span<std::byte> record);
  // Back-pressure without a ring: after every publish_bytes of records a
  // marker follows, and at most max_chunks markers are not yet acknowledged.
  // A d that stops consuming so stops s instead of piling s's records up at
  // d. Smaller than a ring's c_max: records that arrive cost d work at once
  // (the fabric runs them all, a call_buffer's read synchronously), where
  // a chunk's wait for d's next poll.
  bool relay_window_full() const noexcept;
  void send_relay_marker();
  // Sends what is queued, in order; without `may_wait`, only as long as
  // sending does not wait (fabric::send_would_wait).
  void drain_relayed(bool may_wait);
  // Whether the call's caller hears back through the record (and so is owed an answer).
  static bool answered(const fabric::Outgoing& call, const detail::BufferTransfer* buffer) noexcept;
  void owe(const fabric::Outgoing& call);
  bool reserve(std::size_t bytes);
  bool rotate();
  void activate(std::size_t index);
  void put_pending();
  void write_buffer(const fabric::Outgoing& call, const detail::BufferTransfer* buffer);
  void write_word(bool closed, std::uint8_t grow);
  std::size_t record_size(const fabric::Outgoing& call, const detail::BufferTransfer* buffer, const Forward* forward) const;
  void serialize(const fabric::Outgoing& call, const detail::BufferTransfer* buffer, const Forward* forward, std::byte* at,
                 std::size_t size) const;
  void enqueue_overflow(const fabric::Outgoing& call, const detail::BufferTransfer* buffer, const Forward* forward,
                        std::size_t size, const detail::Mode& mode);
  void drain_overflow();      // unless an outer frame of this thread already is
  void drain_overflow_now();
  // Progress while d has no room; throws Errc::peer_failed once d's process has failed.
  void wait_for_room();
  void mark_unpublished();
  void throw_if_dead() const;
  // The lane (rdmx/invoke/detail/lane.hpp): every entry first takes over
  // what call() wrote into it and closes it; every exit leaves the room up to
  // the next publish open to call() when calls may go straight in (open_lane).
  struct LaneClosed {  // for a scope: the lane's records taken over, reopened after
    explicit LaneClosed(Messenger& m) : m(m) { m.close_lane(); }
    ~LaneClosed() { m.open_lane(); }
    Messenger& m;
  };
  bool holds_lane() const noexcept;
  std::uintptr_t lane_limit() const noexcept;  // where the open lane ends: the next publish
  std::size_t written() const noexcept;  // write_, or how far call() has written into the lane
  void open_lane();

  WorkerState& owner_;
  ThreadId dest_;
  transfer::Transmitter* tx_ = nullptr;
  std::uint64_t salt_ = 0;
  std::vector<Chunk> ring_;
  std::size_t cur_ = 0;
  std::uint64_t activations_ = 0;
  std::size_t write_ = 0, put_from_ = 0, published_ = 0;
  memory::Block feedback_;  // d writes its count of fully consumed chunks here
  WordSlots words_;
  bool busy_ = false;  // rotating or growing: calls made meanwhile (from nested progress) queue
  bool relayed_ = false;   // refused a ring: calls go as active messages
  ThreadId relay_to_;      // relayed: the thread that consumes d's calls (consumer_of)
  // Relayed: markers sent and acknowledged, and bytes of records sent since the last one.
  std::uint64_t relay_markers_ = 0, relay_acked_ = 0;
  std::size_t relay_unmarked_ = 0;
  bool can_grow_ = true;   // false once a growth was refused (or cut short) by a budget
  // The last RDMA write of this channel since its last publish (the
  // transmitter's epochs complete in order, so it covers the earlier ones):
  // a store into a mapped chunk must not overtake it.
  transfer::EpochTag unlanded_;
  std::deque<Segment> overflow_;
  std::vector<Segment> spare_;
  std::size_t overflow_bytes_ = 0;
};

// For tests that play a broken sender: the chunk d reads now, how far it is
// written, and a well-formed Producer word for it.
struct Inspect {
  static transfer::RemoteAddress chunk(const Messenger& m) { return m.ring_[m.cur_].remote; }
  static std::size_t written(const Messenger& m) { return m.written(); }
  static std::uint64_t word(const Messenger& m, std::size_t end) {
    return wire::encode({end, static_cast<std::uint16_t>(m.ring_[m.cur_].seq), false, 0}, m.salt_);
  }
  static transfer::Transmitter& transmitter(const Messenger& m) { return *m.tx_; }
  static std::size_t ring_size(const Messenger& m) { return m.ring_.size(); }
};

// Which thread consumes the one-sided calls addressed to `thread` of a
// process: the thread itself, or with helper threads (RDMX_HELPERS) the
// helper that serves it, always the same one (worker w: helper w mod H).
std::uint32_t consumer_of(const Job& job, std::uint32_t thread);

// The send-based call that carries a relayed messenger's record to the
// thread that consumes d's calls (consumer_of): an Addressed word naming d,
// then the record, in the message's header up to inline_bytes, else as its
// payload.
struct RelayedRecord {
  static constexpr std::size_t inline_bytes = 256;
  struct Addressed {
    std::uint32_t thread = 0;  // d, in the receiving process
    std::uint32_t reserved = 0;
  };
  static void invoke(fabric::Incoming& in);
  static void run(WorkerState& runner, fabric::Incoming& in);
};

// Receiver side of one channel, s -> d (Seriema's receiving RDMAMessenger).
class Channel {
 public:
  struct Chunk {
    std::byte* base = nullptr;
    std::size_t capacity = 0;
  };
  // `owner`: the worker thread the calls are addressed to.
  Channel(WorkerState& owner, ThreadId source, RemoteLocator feedback, std::vector<Chunk> chunks);
  // Run one record relayed as an active message (the sender was refused a
  // ring), on the destination thread, as if read from a chunk.
  void run_relayed(WorkerState& runner, std::span<std::byte> record);
  // Run up to `budget` calls on the calling thread, whose state is `runner`
  // (the owner's, or a helper's that answers as itself); throws
  // Errc::protocol for a corrupted chunk.
  std::size_t poll(WorkerState& runner, std::size_t budget);
  ThreadId source() const noexcept { return source_; }
  // A call's buffer is being read from its caller: the call has arrived but not run.
  bool reading() const noexcept { return read_.active; }
  void add_pending(const std::vector<Chunk>& chunks) { pending_.insert(pending_.end(), chunks.begin(), chunks.end()); }

 private:
  std::size_t poll_now(WorkerState& runner, std::size_t budget);
  [[noreturn]] void corrupted(const std::string& what);
  void finish_chunk();
  void push_consumed();
  void execute(WorkerState& runner, const std::byte* record, const wire::RecordHeader& h);
  void execute_plain(WorkerState& runner, const std::byte* record, const wire::RecordHeader& h);
  // The buffer of a call: RDMA-written here, or read from `holder` (the caller's process, a broadcast's root's).
  std::span<std::byte> remote_buffer(const wire::RemoteBuffer& rb, std::uint32_t holder, std::vector<std::byte>& fetched);
  bool read_ready(const std::byte* record, const wire::RecordHeader& h);
  // Count a Synchronizer of thread `owner` down (or fail it) through this
  // thread's messenger to it; `counted`: the owner counts what it is owed
  // (WorkerState::owe), as for every notification but an RDMA answer's fallback.
  void notify_caller(ThreadId owner, std::uint64_t sync, const std::string* failure, Errc code, bool counted = true);
  void answer_by_rdma(const wire::RemoteReply& reply, bool returning, std::span<const std::byte> result);
  // Send a broadcast record on to this thread's children in the tree, with
  // its buffer inline (rb == nullptr: in.data), as a reference to read it by
  // (buffer_read), or RDMA-written from in.data into each child's
  // destination buffer (buffer_written; returns once those writes are
  // done). A child that cannot be reached, or every child when `failure` is
  // given, is reported to the root for each thread of its subtree.
  void forward_broadcast(WorkerState& runner, const wire::RecordHeader& h, const Forward& forward,
                         const fabric::Incoming& in, const wire::RemoteBuffer* rb = nullptr,
                         const std::string* failure = nullptr);

  WorkerState& owner_;
  ThreadId source_;
  ThreadId self_;
  RemoteLocator feedback_;
  transfer::RemoteAddress feedback_address_{};
  std::uint64_t salt_;
  std::vector<Chunk> ring_;
  std::deque<Chunk> pending_;  // announced by the service thread, not yet in the ring
  std::size_t cur_ = 0;
  std::uint64_t activation_ = 1;
  std::size_t offset_ = wire::header_bytes, end_ = wire::header_bytes;
  bool closed_ = false;            // the current chunk's last word said closed
  std::uint8_t grow_ = 0;
  std::uint64_t finished_ = 0, pushed_ = 0;  // chunks fully read / reported to the sender
  int executing_ = 0;              // calls of this channel running (nested progress may re-enter)
  bool broken_ = false;
  bool pushing_ = false;
  // Relayed records (run_relayed) not run yet, in order, and whether one's
  // buffer is being read (the rest wait for it).
  std::deque<std::vector<std::uint64_t>> relay_backlog_;
  bool relay_reading_ = false;
  struct Read {  // the buffer of the call at offset_, being read from its caller
    bool active = false;
    // Starting the read may wait (the caller's rkey is looked up by a
    // service call), and that wait polls this channel again: the nested
    // poll must see the read as not ready rather than an empty `done`.
    bool starting = false;
    std::size_t length = 0;
    std::vector<std::byte> data;
    Future<void> done;
  } read_;
  WordSlots words_;
};

// What the service thread hands a worker: chunks a sender set up.
struct Announcement {
  ThreadId source;
  bool first = false;  // a new channel (feedback is valid)
  RemoteLocator feedback;
  std::vector<Channel::Chunk> chunks;
};

class WorkerState {
 public:
  WorkerState(Messengers& layer, Job& job, std::uint32_t worker, const MessengerOptions& options);
  ~WorkerState();

  Messenger& messenger(ThreadId dest);
  // The destinations of the messengers this thread has made (Messengers::quiet).
  std::vector<ThreadId> messenger_destinations() const;
  std::size_t poll();
  // Helper threads (RDMX_HELPERS): this helper runs `worker`'s calls, which
  // then never runs them itself.
  void serve(WorkerState& worker) {
    worker.served_ = true;
    serves_.push_back(&worker);
  }
  void publish_all();
  // An explicit flush (MessengerGlobal::flush, an Aggregator's flush and
  // shutdown): publish_all, and the records of relayed messengers, queued
  // ones included, leave this thread, which may then stop progressing (a
  // record left in UCX's queue goes out only while its thread progresses).
  void flush();
  void relaying(Messenger& m) { relaying_.push_back(&m); }
  // Nothing that arrived waits on the network to run, no written buffer waits to be reported.
  bool settled() const;
  void announce(Announcement a);  // any thread (the service thread)
  // A record from `source`'s relayed messenger (Messenger::relayed) to this
  // worker, run on the calling thread, whose state is `runner` (this
  // worker's, or its helper's: consumer_of).
  void run_relayed(WorkerState& runner, ThreadId source, std::span<std::byte> record);
  // Whether the calling thread, whose state this is, runs calls addressed to `thread`.
  bool consumes_for(std::uint32_t thread) const noexcept;
  // A malformed relayed record, found while the fabric ran its message: the
  // next poll throws it, as a corrupted chunk's channel throws from poll.
  void report_later(const Error& e) {
    if (!deferred_error_) deferred_error_ = e;
  }
  Messengers& layer() noexcept { return layer_; }
  void take_announcements();      // this worker's thread
  void unpublished(Messenger& m) { pending_publish_.push_back(&m); }

  // One-sided notifications this thread's Synchronizers wait for (consumed,
  // returned, buffer read), by the process that owes them; any_process: a
  // broadcast's, owed by the whole tree. When a process fails, what it owes
  // fails (check_failures). Notifications by RDMA atomic (RemoteObject
  // Synchronizers) bypass this thread and are not counted.
  static constexpr std::uint32_t any_process = ~0u;
  void owe(std::uint32_t process, Synchronizer* sync, std::int64_t n = 1);
  // A notification for `sync` arrived from `process`: whether to count it
  // down (false: `sync` was already failed for a process it waited on).
  bool settle(std::uint32_t process, Synchronizer* sync);
  // Why `process` failed, for errors about waits on it.
  std::string failure_of(std::uint32_t process) const;

  Job& job;
  ThreadId self;
  detail::Lane lane;  // this worker's inlined call path (acting_word<Lane>)
  const MessengerOptions& options;
  // Aggregator shutdowns counted for this thread, by phase (a helper may count).
  void count_shutdown(std::uint64_t phase) {
    std::lock_guard lock(shutdowns_mutex_);
    ++shutdowns_[phase];
  }
  std::uint64_t shutdowns(std::uint64_t phase) {
    std::lock_guard lock(shutdowns_mutex_);
    auto it = shutdowns_.find(phase);
    return it == shutdowns_.end() ? 0 : it->second;
  }
  // A phase's aggregator is gone here: drop its counts and any older ones.
  void forget_shutdowns(std::uint64_t up_to_phase) {
    std::lock_guard lock(shutdowns_mutex_);
    shutdowns_.erase(shutdowns_.begin(), shutdowns_.upper_bound(up_to_phase));
  }
  std::uint64_t aggregator_phase = 0;  // of the last Aggregator made on this thread

 private:
  // Run the calls that arrived for this worker, on the calling thread (`runner`).
  std::size_t consume(WorkerState& runner);
  // This worker's thread: fail what newly failed processes owe, and close a
  // lane into a dead process's chunk.
  void check_failures();

  Messengers& layer_;
  // A helper thread settles the notifications its worker waits for; without
  // helpers only the worker itself touches owed_, which is then not locked
  // (an uncontended lock and unlock were 7 % of a one-sided call_return).
  std::mutex owed_mutex_;
  const bool owed_shared_;
  std::unique_lock<std::mutex> lock_owed() {
    return owed_shared_ ? std::unique_lock<std::mutex>(owed_mutex_) : std::unique_lock<std::mutex>();
  }
  std::map<std::pair<std::uint32_t, Synchronizer*>, std::int64_t> owed_;
  // Nodes of settled entries, reused by owe(): an entry is made and settled
  // per call_return, and allocating its node was one of the two heap
  // allocations of a one-sided round trip.
  std::vector<decltype(owed_)::node_type> spare_owed_;
  std::uint64_t failures_seen_ = 0;
  std::vector<bool> failures_handled_;  // by process

  std::uint32_t workers_;  // threads calls can address, per process
  std::vector<std::unique_ptr<Messenger>> messengers_;  // by destination process * workers_ + thread
  std::vector<Messenger*> pending_publish_;
  std::vector<Messenger*> relaying_;  // this thread's messengers that relay (no ring)
  std::vector<std::unique_ptr<Channel>> channels_;
  // Senders whose messengers relay (no ring): their records run through a
  // Channel without chunks, by source (process << 32 | thread).
  std::map<std::uint64_t, std::unique_ptr<Channel>> relays_;
  std::mutex announce_mutex_;
  std::deque<Announcement> announcements_;
  std::atomic<bool> announced_{false};
  std::mutex shutdowns_mutex_;
  std::map<std::uint64_t, std::uint64_t> shutdowns_;  // phase -> shutdowns received
  std::optional<Error> deferred_error_;  // report_later
  bool polling_ = false;
  bool served_ = false;             // a helper consumes this worker's channels
  std::vector<WorkerState*> serves_;  // a helper: the workers it consumes for
};

class Messengers final : public fabric::Layer {
 public:
  explicit Messengers(Job& job);
  std::size_t poll(std::uint32_t worker) override;
  void flush(std::uint32_t worker) override;
  void quiet(std::uint32_t worker) override;
  bool settled(std::uint32_t worker) const override { return workers_[worker]->settled(); }
  // Any thread: recorded here; each worker fails its waits on `process` when
  // its thread next progresses (WorkerState::check_failures).
  void process_failed(std::uint32_t process, const std::string& why) override;
  std::uint64_t failures() const noexcept { return failures_.load(std::memory_order_acquire); }
  std::string failure_of(std::uint32_t process) const;
  WorkerState& worker(std::uint32_t index) { return *workers_.at(index); }
  const MessengerOptions& options() const noexcept { return options_; }

  // The ring budget (MessengerOptions::ring_budget), for every thread of the
  // process: the service thread charges the chunks it hands out, senders
  // their mirrors. Charges up to `wanted` chunks of `bytes` each, all or as
  // many as fit but at least `at_least`; returns how many (0: refused).
  std::uint32_t charge_chunks(std::uint32_t wanted, std::uint32_t at_least, std::size_t bytes);
  void charge_anyway(std::size_t bytes) { ring_bytes_.fetch_add(bytes, std::memory_order_relaxed); }
  void refund_chunks(std::uint32_t count, std::size_t bytes) {
    ring_bytes_.fetch_sub(count * bytes, std::memory_order_relaxed);
  }
  // Bytes of chunks charged so far (never returned: rings live as long as the job).
  std::size_t ring_bytes() const noexcept { return ring_bytes_.load(std::memory_order_relaxed); }
  // Messengers of this process that were refused a ring and relay.
  std::uint64_t relayed_messengers() const noexcept { return relayed_.load(std::memory_order_relaxed); }
  void count_relayed() noexcept { relayed_.fetch_add(1, std::memory_order_relaxed); }
  // Whether chunks of `process` need a mirror here (UCX does not map them):
  // unknown (true) until this process's first ring to it says.
  bool mirrors_to(std::uint32_t process) const noexcept {
    return mapped_[process].load(std::memory_order_relaxed) != mapped_yes;
  }
  void learned_mapping(std::uint32_t process, bool mapped) noexcept {
    mapped_[process].store(mapped ? mapped_yes : mapped_no, std::memory_order_relaxed);
  }
  // The calling worker thread's state; throws for other threads.
  static WorkerState& current();
  // The state of the worker thread the one-sided call running on this
  // thread was addressed to (a helper runs calls for others); throws
  // outside a one-sided call.
  static WorkerState& destination();

 private:
  MessengerOptions options_;
  std::atomic<std::size_t> ring_bytes_{0};
  std::atomic<std::uint64_t> relayed_{0};
  static constexpr std::uint8_t mapped_unknown = 0, mapped_yes = 1, mapped_no = 2;
  std::unique_ptr<std::atomic<std::uint8_t>[]> mapped_;  // by process
  std::vector<std::unique_ptr<WorkerState>> workers_;
  mutable std::mutex failures_mutex_;
  std::map<std::uint32_t, std::string> why_;
  // Starts above the slots' count: their first poll also sees processes
  // that failed before this layer existed.
  std::atomic<std::uint64_t> failures_{1};
};

}  // namespace rdmx::invoke
