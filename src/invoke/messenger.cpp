// The sending Messenger: sender-controlled buffer management (Seriema 4.4.1).
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>

#include "messengers.hpp"
#include "rdmx/core/tsan.hpp"

#include "rdmx/core/log.hpp"
#include "rdmx/core/checked_size.hpp"
#include "rdmx/fabric/rma.hpp"
#include "rdmx/memory/arena.hpp"

namespace rdmx::invoke {
namespace {

constexpr std::uint32_t chunks_per_setup = 16;
constexpr std::size_t overflow_segment = 64 * 1024;

// The reply of the no-setup service call that allocates chunks.
struct SetupReply {
  std::uint32_t count = 0;
  RemoteLocator chunks[chunks_per_setup];
};

// Restores a flag on every exit path.
struct Scoped {
  bool& flag;
  bool saved;
  Scoped(bool& f, bool value) : flag(f), saved(f) { flag = value; }
  ~Scoped() { flag = saved; }
};

memory::Arena& arena_of(WorkerState& state) { return state.job.arena_near(state.self.thread); }

}  // namespace

Messenger::Messenger(WorkerState& owner, ThreadId dest)
    : owner_(owner),
      dest_(dest),
      salt_(wire::channel_salt(owner.self.process, owner.self.thread, dest.process, dest.thread)) {}

Messenger::~Messenger() {
  if (holds_lane()) owner_.lane = {};
}

// ---- the lane ----

bool Messenger::holds_lane() const noexcept { return owner_.lane.holder == this; }

std::size_t Messenger::written() const noexcept {
  return holds_lane() ? owner_.lane.at - reinterpret_cast<std::uintptr_t>(ring_[cur_].mapped) : write_;
}

void Messenger::close_lane() {
  if (!holds_lane()) return;
  write_ = written();
  owner_.lane = {};
  if (write_ != published_) mark_unpublished();  // no longer found as the lane's holder
}

void Messenger::open_lane() {
  detail::Lane& lane = owner_.lane;
  if (ring_.empty() || ring_[cur_].mapped == nullptr || !overflow_.empty() || busy_ || dead()) return;
  if (lane.holder != nullptr && lane.holder != this) static_cast<Messenger*>(lane.holder)->close_lane();
  lane = {detail::lane_key(dest_), reinterpret_cast<std::uintptr_t>(ring_[cur_].mapped) + write_, lane_limit(), this};
}

std::uintptr_t Messenger::lane_limit() const noexcept {
  const std::size_t limit = std::min(owner_.options.chunk_size, std::max(write_, published_ + owner_.options.publish_bytes));
  return reinterpret_cast<std::uintptr_t>(ring_[cur_].mapped) + limit;
}

void Messenger::publish_lane() {
  if (written() != published_) publish();
}

void Messenger::publish_lane_now() {
  if (!holds_lane() || written() == published_) return;
  // As publish() does for an open lane, minus closing and reopening it: the
  // lane is open only to a live destination without queued calls (open_lane).
  write_ = written();
  write_word(false, 0);  // waits for nothing that could run a call into the lane
  owner_.lane.limit = lane_limit();
}

bool Messenger::dead() const { return owner_.job.process_failed(dest_.process); }

void Messenger::throw_if_dead() const {
  if (dead())
    throw Error(Errc::peer_failed, "one-sided call to thread " + std::to_string(dest_.process) + "/" +
                                       std::to_string(dest_.thread) + ": " + owner_.failure_of(dest_.process));
}

void Messenger::setup() {
  tx_ = &rdmx::transmitter(dest_.process);
  feedback_ = arena_of(owner_).allocate_chunk(64);
  std::memset(feedback_.data, 0, 64);
  if (add_chunks(owner_.options.chunks, true) == 0) {
    // A budget (d's or this process's) is spent: no ring, ever, for this
    // pair. The calls still go, as active messages, which need no setup.
    relayed_ = true;
    relay_to_ = ThreadId{dest_.process, consumer_of(owner_.job, dest_.thread)};
    owner_.relaying(*this);
    owner_.layer().count_relayed();
    static std::atomic<bool> told{false};
    if (!told.exchange(true))
      rdmx::log(rdmx::LogLevel::info,
                "messenger %u/%u -> %u/%u: no ring (RDMX_RING_BUDGET=%zu spent); its calls, and those of other "
                "messengers refused later, go as active messages\n",
                owner_.self.process, owner_.self.thread, dest_.process, dest_.thread, owner_.options.ring_budget);
    return;
  }
  // Say once per process that the ring is slow where RDMA is emulated, and
  // what to do about it: nothing else would tell the program why.
  static std::atomic<bool> told{false};
  if (tx_->endpoint().rma_emulated() && !told.exchange(true))
    rdmx::log(rdmx::LogLevel::warn,
                 "one-sided calls to process %u go over RDMA that UCX emulates (TCP): each waits for that "
                 "process's progress; send-based calls (rdmx::call) and async are much faster there\n",
                 dest_.process);
  activate(0);
}

std::uint32_t Messenger::add_chunks(std::uint32_t count, bool first) {
  const std::size_t chunk_size = owner_.options.chunk_size;
  Messengers& layer = owner_.layer();
  // This process's mirrors count against its own budget: charged before
  // asking d (a first ring is all or nothing), refunded for chunks UCX maps.
  const bool mirrors = !owner_.options.mapped_chunks || layer.mirrors_to(dest_.process);
  if (mirrors) {
    const std::uint32_t charged = layer.charge_chunks(count, first ? count : 1, chunk_size);
    if (charged == 0) return 0;
    count = charged;
  }
  std::uint32_t mirrors_charged = mirrors ? count : 0;
  std::vector<Chunk> added;
  for (std::uint32_t done = 0; done < count;) {
    const std::uint32_t n = std::min(count - done, chunks_per_setup);
    // The first ring is all or nothing; after that, as many as fit.
    const std::uint32_t at_least = first && done == 0 ? n : 1;
    const std::uint32_t dest_thread = dest_.thread;
    const ThreadId source = owner_.self;
    const RemoteLocator feedback = feedback_.locator(owner_.self.process).slice(0, 8);
    const bool announce_channel = first && done == 0;
    SetupReply reply;
    Synchronizer sync;
    // A no-setup service call: d's service thread allocates in d's NUMA
    // zone and tells d's incoming map; d itself is not involved.
    // What the service thread throws comes back through sync.
    call_return(ThreadId{dest_.process, service_thread}, [=] {
      SetupReply r;
      Job& job = Job::current();
      Messengers& layer = fabric::layer<Messengers>();
      const std::uint32_t granted = layer.charge_chunks(n, at_least, chunk_size);
      if (granted == 0) return r;  // over RDMX_RING_BUDGET: refused
      memory::Arena& arena = job.arena_near(dest_thread);
      Announcement a{source, announce_channel, feedback, {}};
      for (std::uint32_t i = 0; i < granted; ++i) {
        memory::Block b = arena.allocate_chunk(chunk_size, 64);
        // Zero it all, not only the Producer word: recycled arena memory
        // then holds nothing that looks like a record, and the last write
        // to it that ThreadSanitizer sees (it cannot see RDMA writes) is
        // this one, ordered before d learns of the chunk.
        std::memset(b.data, 0, chunk_size);
        a.chunks.push_back({b.data, chunk_size});
        r.chunks[i] = b.locator(job.rank());
        r.chunks[i].length = chunk_size;
      }
      layer.worker(dest_thread).announce(std::move(a));
      r.count = granted;
      return r;
    }, into(reply, sync));
    try {
      sync.wait();
    } catch (const Error& e) {
      layer.refund_chunks(mirrors_charged, chunk_size);
      throw Error(e.code(), "messenger to " + to_string(dest_) +
                                ": no chunk memory: " + e.what());
    }
    for (std::uint32_t i = 0; i < reply.count; ++i) {
      Chunk c;
      c.remote = rdmx::resolve(reply.chunks[i]);
      // Over shared memory UCX can map d's chunk into this process: then a
      // call is serialized straight into d's memory, the one copy a raw put
      // would make, and publishing is a store (Seriema: "serialized by s
      // straight into the remote chunk"). Elsewhere: a mirror and RDMA writes.
      void* mapped = nullptr;
      if (owner_.options.mapped_chunks && ucp_rkey_ptr(c.remote.rkey, c.remote.address, &mapped) == UCS_OK) {
        c.mapped = static_cast<std::byte*>(mapped);
        if (mirrors_charged != 0) {
          layer.refund_chunks(1, chunk_size);
          --mirrors_charged;
        }
      } else {
        // Charged above, unless the first ring to d said UCX maps its
        // chunks and this one is not (never seen): then it is over budget.
        if (mirrors_charged != 0)
          --mirrors_charged;
        else
          layer.charge_anyway(chunk_size);
        c.mirror = arena_of(owner_).allocate_chunk(chunk_size, 64);
      }
      if (owner_.options.mapped_chunks) layer.learned_mapping(dest_.process, c.mapped != nullptr);
      added.push_back(c);
    }
    done += reply.count;
    if (reply.count < n) break;  // d's budget is spent
  }
  layer.refund_chunks(mirrors_charged, chunk_size);  // mirrors of chunks d did not grant
  const auto count_added = static_cast<std::uint32_t>(added.size());
  if (first)
    ring_ = std::move(added);
  else
    ring_.insert(ring_.begin() + static_cast<std::ptrdiff_t>(cur_ + 1), added.begin(), added.end());
  return count_added;
}

void Messenger::activate(std::size_t index) {
  cur_ = index;
  Chunk& c = ring_[cur_];
  wait_until_free(*tx_, dest_.process, c.tag);  // the mirror's last write must be done before we overwrite it
  c.seq = ++activations_;
  write_ = put_from_ = published_ = wire::header_bytes;
}

std::size_t Messenger::record_size(const fabric::Outgoing& call, const detail::BufferTransfer* buffer,
                                   const Forward* forward) const {
  if (call.closure_size > 0xffff)
    throw Error(Errc::message_too_large, "a one-sided call's captures are limited to 64 KiB (got " +
                                             std::to_string(call.closure_size) + " bytes); pass bulk data as a buffer");
  if (call.remote_counter != nullptr && call.remote_counter->process != owner_.self.process)
    throw Error(Errc::invalid_argument, "a one-sided call's RemoteObject<Synchronizer> must live in the calling process");
  if (buffer != nullptr && buffer->how == detail::BufferTransfer::written && call.data.size() > buffer->where.length)
    throw Error(Errc::invalid_argument, "call_buffer: " + std::to_string(call.data.size()) +
                                            " bytes do not fit the destination buffer of " +
                                            std::to_string(buffer->where.length));
  // (A broadcast's buffer to read is in its root's process: checked there.)
  if (buffer != nullptr && call.kind != fabric::CallKind::broadcast &&
      buffer->where.process != (buffer->how == detail::BufferTransfer::written ? dest_.process : owner_.self.process))
    throw Error(Errc::invalid_argument, buffer->how == detail::BufferTransfer::written
                                            ? "call_buffer: the destination buffer must be in the destination's process"
                                            : "call_buffer: the buffer to read must be in the caller's process");
  const bool ext = call.kind != fabric::CallKind::call || (call.sync != nullptr && call.notify == fabric::Notify::consumed);
  const std::size_t fixed = sizeof(wire::RecordHeader) + (ext ? sizeof(wire::Extension) : 0) +
                            (buffer != nullptr ? sizeof(wire::RemoteBuffer) : 0) +
                            (call.kind == fabric::CallKind::broadcast ? sizeof(wire::BroadcastRoot) : 0) +
                            (forward != nullptr ? forward->targets.size_bytes() : 0) +
                            (call.remote_counter != nullptr ? sizeof(wire::RemoteReply) : 0) +
                            wire::align_up(call.closure_size);
  // The data's length is the caller's: summed unchecked, a length near
  // SIZE_MAX would wrap to a small record and pass the room check.
  const std::size_t data_bytes =
      buffer != nullptr ? 0 : checked_round_up(call.data.size(), wire::record_align, "a one-sided call's data", Errc::message_too_large);
  const std::size_t size = checked_add(fixed, data_bytes, "a one-sided call", Errc::message_too_large);
  const std::size_t room = owner_.options.chunk_size - wire::header_bytes;
  if (size > room)
    throw Error(Errc::message_too_large,
                "a one-sided call of " + std::to_string(size) + " bytes does not fit a messenger chunk (" +
                    std::to_string(room) + " bytes of records, RDMX_CHUNK_SIZE=" + std::to_string(owner_.options.chunk_size) +
                    "); send it with the send-based rdmx::call_buffer, or raise RDMX_CHUNK_SIZE");
  return size;
}

void Messenger::serialize(const fabric::Outgoing& call, const detail::BufferTransfer* buffer, const Forward* forward,
                          std::byte* at, std::size_t size) const {
  wire::RecordHeader h;
  h.function = call.function;
  h.size = static_cast<std::uint32_t>(size);
  h.closure_size = static_cast<std::uint16_t>(call.closure_size);
  const bool consumed = call.sync != nullptr && call.notify == fabric::Notify::consumed;
  // A buffer the destination reads tells the caller when it has read it.
  const bool read = buffer != nullptr && buffer->how == detail::BufferTransfer::read;
  std::uint8_t flags = call.kind == fabric::CallKind::buffer      ? wire::kind_buffer
                       : call.kind == fabric::CallKind::returning ? wire::kind_returning
                       : call.kind == fabric::CallKind::broadcast ? wire::kind_broadcast
                                                                  : wire::kind_call;
  const bool ext = flags != wire::kind_call || consumed;
  if (ext) flags |= wire::has_extension;
  if (buffer != nullptr) flags |= wire::has_remote_buffer;
  if (call.remote_counter != nullptr) flags |= wire::has_remote_reply;
  if (forward != nullptr && !forward->targets.empty()) flags |= wire::has_targets;
  h.flags = flags;
  h.check = wire::record_check(h);
  std::memcpy(at, &h, sizeof h);
  std::byte* p = at + sizeof h;
  if (ext) {
    wire::Extension e;
    e.sync = forward != nullptr                               ? forward->sync
             : consumed || (read && call.sync != nullptr) ? reinterpret_cast<std::uint64_t>(call.sync)
                                                          : 0;
    if (call.kind == fabric::CallKind::returning)
      e.result_address = reinterpret_cast<std::uint64_t>(call.result);
    else
      e.buffer_length = read ? buffer->where.length : call.data.size();
    std::memcpy(p, &e, sizeof e);
    p += sizeof e;
  }
  if ((flags & wire::kind_mask) == wire::kind_broadcast) {
    const wire::BroadcastRoot root{forward->root.process, forward->root.thread};
    std::memcpy(p, &root, sizeof root);
    p += sizeof root;
  }
  if (buffer != nullptr) {
    wire::RemoteBuffer b;
    b.region = buffer->where.region;
    // A broadcast's caller hears back only when all have run it (forward->sync).
    b.how = read ? (consumed || forward != nullptr ? wire::buffer_read : wire::buffer_read_sent) : wire::buffer_written;
    b.offset = buffer->where.offset;
    b.length = read ? buffer->where.length : call.data.size();
    std::memcpy(p, &b, sizeof b);
    p += sizeof b;
  }
  if (flags & wire::has_targets) {
    std::memcpy(p, forward->targets.data(), forward->targets.size_bytes());
    p += forward->targets.size_bytes();
  }
  if (call.remote_counter != nullptr) {
    wire::RemoteReply r{};
    r.counter_region = call.remote_counter->region;
    r.counter_offset = call.remote_counter->offset;
    if (call.remote_result != nullptr) {
      r.result_region = call.remote_result->region;
      r.result_offset = call.remote_result->offset;
    }
    std::memcpy(p, &r, sizeof r);
    p += sizeof r;
  }
  std::memcpy(p, call.closure, call.closure_size);
  p += wire::align_up(call.closure_size);
  if (buffer == nullptr && !call.data.empty()) std::memcpy(p, call.data.data(), call.data.size());
}

// call_buffer by RDMA write: the buffer goes first, so the Producer word that
// publishes the call (after a fence) also publishes the buffer.
void Messenger::write_buffer(const fabric::Outgoing& call, const detail::BufferTransfer* buffer) {
  if (buffer == nullptr || buffer->how != detail::BufferTransfer::written || call.data.empty()) return;
  const transfer::EpochTag tag =
      tx_->post_put(call.data.data(), call.data.size(), rdmx::resolve(buffer->where.slice(0, call.data.size())));
  unlanded_ = tag;
  if (call.sync != nullptr && call.notify == fabric::Notify::sent) {
    rdmx::notify_when_flushed(*tx_, dest_.process, tag, *call.sync);
  }
}

bool Messenger::answered(const fabric::Outgoing& call, const detail::BufferTransfer* buffer) noexcept {
  // The caller hears back through the record: when consumed, or when a
  // buffer the destination reads has been read.
  return call.sync != nullptr &&
         (call.notify == fabric::Notify::consumed || (buffer != nullptr && buffer->how == detail::BufferTransfer::read));
}

void Messenger::owe(const fabric::Outgoing& call) {
  // Counted down by d's answer, or failed with d's process. An answer by
  // RDMA atomic is not seen here: the Synchronizer itself watches d's process.
  call.sync->add();
  if (call.remote_counter == nullptr)
    owner_.owe(dest_.process, call.sync);
  else
    call.sync->expect_rdma_answer_from(dest_.process);
}

bool Messenger::append(const fabric::Outgoing& call, const detail::Mode& mode, const detail::BufferTransfer* buffer,
                       const Forward* forward) {
  const std::size_t size = record_size(call, buffer, forward);
  throw_if_dead();
  if (relayed_) [[unlikely]]
    return relay(call, mode, buffer, forward, size);
  const LaneClosed closed(*this);  // calls run by a wait below must not write into it
  if (ring_.empty() && !busy_) {
    // Setting up waits for d's service thread, and waiting runs calls; one
    // that calls d again meanwhile finds busy_ set and queues (below).
    {
      Scoped guard(busy_, true);
      setup();
    }
    // Refused: never a ring, so the lane (LaneClosed) never opens either.
    if (relayed_) return relay(call, mode, buffer, forward, size);
  }
  const bool consumed = answered(call, buffer);
  // Calls queued earlier go first (FIFO per sender).
  if (!overflow_.empty() && !busy_) drain_overflow();
  if (!overflow_.empty() || busy_) {
    // Blocking here while an outer call of this thread is blocked (busy_)
    // could deadlock; queueing keeps the order and the thread moving.
    if (busy_ || mode.overflow || mode.policy == Policy::retry_async) {
      enqueue_overflow(call, buffer, forward, size, mode);
      if (consumed) owe(call);
      return true;
    }
    if (mode.refuse) return false;
    Scoped guard(busy_, true);
    while (!overflow_.empty()) {
      drain_overflow_now();
      if (!overflow_.empty()) wait_for_room();
    }
  }
  if (!reserve(size)) {
    if (mode.overflow || mode.policy == Policy::retry_async) {
      enqueue_overflow(call, buffer, forward, size, mode);
      if (consumed) owe(call);
      return true;
    }
    if (mode.refuse) return false;
    Scoped guard(busy_, true);
    while (!reserve(size)) wait_for_room();
  }
  // Zero copy: the call is serialized once, into registered memory the
  // RDMA write goes from.
  write_buffer(call, buffer);
  serialize(call, buffer, forward, ring_[cur_].base() + write_, size);
  write_ += size;
  if (consumed) owe(call);
  if (write_ - put_from_ >= mode.put_bytes) put_pending();
  // A caller that asked to hear back is about to wait: publish now rather
  // than at its next progress.
  if (write_ - published_ >= owner_.options.publish_bytes || consumed || mode.publish == Publish::at_once)
    write_word(false, 0);
  else
    mark_unpublished();
  if (!overflow_.empty() && !busy_) drain_overflow();
  return true;
}

bool Messenger::reserve(std::size_t bytes) {
  if (write_ + bytes <= owner_.options.chunk_size) [[likely]]
    return true;
  return rotate();
}

bool Messenger::rotate() {
  const std::size_t n = ring_.size();
  std::size_t next = (cur_ + 1) % n;
  const std::uint64_t consumed =
      std::atomic_ref<std::uint64_t>(*reinterpret_cast<std::uint64_t*>(feedback_.data)).load(std::memory_order_acquire);
  std::uint8_t grow = 0;
  if (ring_[next].seq > consumed) {
    // d has not consumed the next chunk yet: grow the ring, or wait.
    std::uint32_t added = 0;
    if (n < owner_.options.max_chunks && can_grow_) {
      const auto k = static_cast<std::uint32_t>(std::min<std::size_t>(n, owner_.options.max_chunks - n));
      Scoped guard(busy_, true);
      added = add_chunks(k, false);
      // A budget cut it short: the ring keeps the size it has (asking again
      // at every rotation would cost a refused round trip each).
      if (added < k) can_grow_ = false;
    }
    if (added == 0) {
      if (published_ != write_) write_word(false, 0);  // let d read everything it can
      return false;
    }
    next = cur_ + 1;
    grow = static_cast<std::uint8_t>(added);
  }
  write_word(true, grow);  // close: d moves on (and takes the new chunks) after reading it
  activate(next);
  return true;
}

void Messenger::put_pending() {
  if (write_ == put_from_) return;
  Chunk& c = ring_[cur_];
  if (c.mapped != nullptr) {  // already in place
    put_from_ = write_;
    return;
  }
  c.tag = tx_->post_put(c.mirror.data + put_from_, write_ - put_from_,
                        transfer::RemoteAddress{c.remote.address + put_from_, c.remote.rkey});
  unlanded_ = c.tag;
  put_from_ = write_;
}

void Messenger::write_word(bool closed, std::uint8_t grow) {
  put_pending();
  if (ring_[cur_].mapped != nullptr) {
    // Records were stored straight into d's memory: a release store orders
    // them before the word. RDMA writes of this channel (queued calls of
    // an earlier chunk, call_buffer's destination buffer) must have landed
    // first, and a fence does not order them against stores: wait for
    // their flush. That wait progresses the UCX worker only, never calls:
    // a call run here could append to this messenger and publish a later
    // end, which the word stored below would then take back (d reads that
    // as a corrupted channel).
    wait_until_free(*tx_, dest_.process, unlanded_);
    unlanded_ = {};
  }
  const Chunk& c = ring_[cur_];
  const std::uint64_t encoded = wire::encode({write_, static_cast<std::uint16_t>(c.seq), closed, grow}, salt_);
  message_sent();
  if (c.mapped != nullptr) {
    if (dest_.process == owner_.self.process) tsan_release(c.mapped);
    std::atomic_ref<std::uint64_t>(*reinterpret_cast<std::uint64_t*>(c.mapped)).store(encoded, std::memory_order_release);
    published_ = write_;
    return;
  }
  // The word must land after the records it publishes: UCX orders the
  // transfers (fence), and a full fence orders our own stores in case the
  // transport copied the records with non-temporal stores.
  tx_->fence();
  std::atomic_thread_fence(std::memory_order_seq_cst);
  // Same process: the chunk's address is the receiver's too (see core/tsan.hpp).
  if (dest_.process == owner_.self.process) tsan_release(reinterpret_cast<const void*>(c.remote.address));
  std::uint64_t* word = words_.next(*tx_, dest_.process);
  *word = encoded;
  words_.used(tx_->post_put(word, sizeof *word, c.remote));
  published_ = write_;
}

void Messenger::publish() {
  // Nothing goes to a dead process; whoever waits on it fails instead
  // (WorkerState::check_failures).
  if ((ring_.empty() && !relayed_) || dead()) return;
  const LaneClosed closed(*this);
  try {
    if (relayed_) {
      if (!overflow_.empty() && !busy_) drain_relayed(false);
      if (!overflow_.empty()) mark_unpublished();  // the rest at the next progress
      return;
    }
    if (!overflow_.empty() && !busy_) drain_overflow();
    if (published_ != write_) write_word(false, 0);
  } catch (const Error&) {
    // Publishing runs inside any wait of this thread: a destination that
    // died meanwhile must not fail an unrelated one.
    if (!dead()) throw;
    return;
  }
  if (!overflow_.empty()) mark_unpublished();
}

void Messenger::drain_relayed_all() {
  if (!relayed_ || overflow_.empty() || busy_ || dead()) return;
  try {
    drain_relayed(true);
  } catch (const Error&) {
    if (!dead()) throw;  // as publish(): a destination that died meanwhile fails its own waits
  }
}

void Messenger::mark_unpublished() {
  if (listed) return;
  listed = true;
  owner_.unpublished(*this);
}

void Messenger::wait_for_room() {
  // Room comes only from d consuming; a dead d never will. Its death is
  // noticed by the pid watch (same host) or UCX (elsewhere) within a
  // fraction of a second, so this wait ends in bounded time either way.
  if (dead() || owner_.job.process_failed(dest_.process))
    throw Error(Errc::peer_failed, "one-sided call to thread " + std::to_string(dest_.process) + "/" +
                                       std::to_string(dest_.thread) + ": " + owner_.failure_of(dest_.process) +
                                       (overflow_bytes_ != 0 ? "; " + std::to_string(overflow_bytes_) +
                                                                   " bytes of queued calls cannot be delivered"
                                                             : std::string()));
  rdmx::progress();
}

void Messenger::enqueue_overflow(const fabric::Outgoing& call, const detail::BufferTransfer* buffer,
                                 const Forward* forward, std::size_t size, const detail::Mode& mode) {
  // Back-pressure (Aggregation::ovfl): past the limit the caller waits, serving
  // its own incoming calls, until the queue has drained enough. A call made
  // from inside such a wait (busy_) queues beyond the limit instead: blocking
  // there could deadlock, and it is bounded by what the calls served make.
  if (mode.overflow && mode.overflow_limit != 0 && !busy_ && overflow_bytes_ + size > mode.overflow_limit) {
    Scoped guard(busy_, true);
    while (overflow_bytes_ != 0 && overflow_bytes_ + size > mode.overflow_limit) {
      if (relayed_)
        drain_relayed(true);
      else
        drain_overflow_now();
      if (overflow_bytes_ != 0 && overflow_bytes_ + size > mode.overflow_limit) wait_for_room();
    }
  }
  if (overflow_.empty() || overflow_.back().block.size - overflow_.back().used < size) {
    Segment s;
    const std::size_t want = std::max(overflow_segment, size);
    // Reuse a drained segment whose writes have completed.
    auto free = std::find_if(spare_.begin(), spare_.end(),
                             [&](const Segment& x) { return x.block.size >= want && x.tag.is_free(); });
    if (free != spare_.end()) {
      s.block = free->block;
      spare_.erase(free);
    } else {
      s.block = arena_of(owner_).allocate_chunk(want, 64);
    }
    overflow_.push_back(s);
  }
  Segment& s = overflow_.back();
  write_buffer(call, buffer);
  serialize(call, buffer, forward, s.block.data + s.used, size);
  s.used += size;
  overflow_bytes_ += size;
  mark_unpublished();
}

void Messenger::drain_overflow() {
  Scoped guard(busy_, true);
  drain_overflow_now();
}

void Messenger::drain_overflow_now() {
  // Queued calls go straight from their registered segment to d's chunk:
  // runs of records that fit the current chunk, one RDMA write each.
  const std::size_t capacity = owner_.options.chunk_size;
  while (!overflow_.empty()) {
    Segment& s = overflow_.front();
    while (s.sent < s.used) {
      std::size_t run = 0;
      while (s.sent + run < s.used) {
        wire::RecordHeader h;
        std::memcpy(&h, s.block.data + s.sent + run, sizeof h);
        if (write_ + run + h.size > capacity) break;
        run += h.size;
      }
      if (run == 0) {
        if (!rotate()) return;
        continue;
      }
      put_pending();
      Chunk& c = ring_[cur_];
      if (c.mapped != nullptr) {
        std::memcpy(c.mapped + write_, s.block.data + s.sent, run);
      } else {
        s.tag = tx_->post_put(s.block.data + s.sent, run, transfer::RemoteAddress{c.remote.address + write_, c.remote.rkey});
        unlanded_ = s.tag;
      }
      write_ += run;
      put_from_ = write_;
      s.sent += run;
      overflow_bytes_ -= run;
    }
    spare_.push_back(s);  // reused once its last write has completed
    overflow_.pop_front();
  }
  if (published_ != write_) write_word(false, 0);
}

// ---- relayed: no ring ----

bool Messenger::relay(const fabric::Outgoing& call, const detail::Mode& mode, const detail::BufferTransfer* buffer,
                      const Forward* forward, std::size_t size) {
  const bool consumed = answered(call, buffer);
  // Calls queued while the ring was being asked for (or while earlier
  // relayed records wait to leave) go first: FIFO per sender.
  const bool may_wait = !mode.refuse && !mode.overflow && mode.policy == Policy::retry;
  if (!overflow_.empty() && !busy_) drain_relayed(may_wait);
  // The active messages play the ring's part: when UCX holds as many of
  // this thread's sends as flow control allows, a call that must not wait
  // queues (retry_async, ovfl) or is refused (try_), as on a full ring.
  if (!busy_ && overflow_.empty() && !may_wait && (fabric::send_would_wait() || relay_window_full())) {
    if (mode.refuse) return false;
    enqueue_overflow(call, buffer, forward, size, mode);
    if (consumed) owe(call);
    return true;
  }
  if (busy_ || !overflow_.empty()) {
    if (mode.refuse) return false;
    enqueue_overflow(call, buffer, forward, size, mode);
    if (consumed) owe(call);
    return true;
  }
  if (relay_window_full()) {
    // As a ring at c_max: progress until d has consumed (calls made
    // meanwhile queue behind this one).
    Scoped guard(busy_, true);
    while (relay_window_full()) wait_for_room();
  }
  alignas(8) std::byte small[512];
  std::vector<std::byte> large;
  std::byte* at = small;
  if (size > sizeof small) {
    large.resize(size);
    at = large.data();
  }
  write_buffer(call, buffer);
  serialize(call, buffer, forward, at, size);
  // Owed before it leaves: sending may progress, and the answer may come
  // back within that progress.
  if (consumed) owe(call);
  try {
    send_relayed({at, size});
  } catch (const Error&) {
    if (consumed && !dead()) {  // not sent; a dead d's debts fail on their own (check_failures)
      call.sync->add(-1);
      if (call.remote_counter == nullptr) owner_.settle(dest_.process, call.sync);
    }
    throw;
  }
  return true;
}

void Messenger::send_relayed(std::span<std::byte> record) {
  // A call_buffer's RDMA write into d's buffer must land before the call
  // that reads it: wait for it (a fence orders RDMA, not active messages).
  wait_until_free(*tx_, dest_.process, unlanded_);
  unlanded_ = {};
  send_record(record);
  relay_unmarked_ += record.size();
  if (relay_unmarked_ >= owner_.options.publish_bytes) send_relay_marker();
}

bool Messenger::relay_window_full() const noexcept {
  return relay_markers_ - relay_acked_ >= owner_.options.max_chunks;
}

void Messenger::send_relay_marker() {
  // d acknowledges with a send-based call straight to this thread, not
  // through its own messenger: that one may itself be waiting for room
  // towards us (two threads relaying to each other), and an answer queued
  // behind that wait would never come.
  const auto marker = [s = owner_.self, d = dest_] {
    rdmx::call(s, [d] { Messengers::current().messenger(d).relay_acked(); });
  };
  const fabric::Outgoing o = fabric::outgoing<fabric::CallWrapper>(dest_, fabric::CallKind::call, marker, Completion{});
  alignas(8) std::byte record[128];
  const std::size_t size = record_size(o, nullptr, nullptr);
  if (size > sizeof record) throw Error(Errc::protocol, "a relay marker of " + std::to_string(size) + " bytes");
  serialize(o, nullptr, nullptr, record, size);
  relay_unmarked_ = 0;
  // Counted before it leaves: sending may progress, and d's acknowledgement
  // can run inside that progress. Counted after, the acknowledgement would
  // come first and the window (markers - acknowledged, unsigned) read as
  // full to every call made meanwhile, which then waited for ever.
  ++relay_markers_;
  send_record({record, size});
}

void Messenger::send_record(std::span<std::byte> record) {  // Runs, as a send-based call, on the thread that would poll d's ring: d's
  // own, or the helper serving d, which a busy d needs (its calls wait for
  // nobody else); there the record runs as if read from a chunk. A small
  // one (most) travels in the message's header, which needs no wait for the
  // send to complete; a larger one as its payload.
  const RelayedRecord::Addressed to{dest_.thread, 0};
  alignas(8) std::byte header[sizeof to + RelayedRecord::inline_bytes];
  std::memcpy(header, &to, sizeof to);
  fabric::Outgoing o;
  o.destination = relay_to_;
  o.function = fabric::FunctionId<RelayedRecord>::value;
  o.closure = header;
  if (record.size() <= RelayedRecord::inline_bytes) {
    o.kind = fabric::CallKind::call;
    std::memcpy(header + sizeof to, record.data(), record.size());
    o.closure_size = sizeof to + record.size();
  } else {
    o.kind = fabric::CallKind::buffer;
    o.closure_size = sizeof to;
    o.data = record;
  }
  fabric::send_call(o);  // returns once `record` may be reused
}

void RelayedRecord::invoke(fabric::Incoming& in) {
  WorkerState& runner = Messengers::current();
  try {
    run(runner, in);
  } catch (const Error& e) {
    // A malformed record: reported as a corrupted chunk is, by the
    // consumer's next poll (a throw here would only reach the fabric's log).
    if (e.code() != Errc::protocol) throw;
    runner.report_later(e);
  }
}

void RelayedRecord::run(WorkerState& runner, fabric::Incoming& in) {
  Addressed to;
  if (in.closure_size < sizeof to || in.closure_size > sizeof to + inline_bytes)
    throw Error(Errc::protocol, "a relayed one-sided call from " + std::to_string(in.source.process) + "/" +
                                    std::to_string(in.source.thread) + " has a malformed header of " +
                                    std::to_string(in.closure_size) + " bytes");
  std::memcpy(&to, in.closure, sizeof to);
  if (!runner.consumes_for(to.thread))
    throw Error(Errc::protocol, "a relayed one-sided call from " + std::to_string(in.source.process) + "/" +
                                    std::to_string(in.source.thread) + " to thread " + std::to_string(to.thread) +
                                    " arrived at thread " + std::to_string(runner.self.thread) +
                                    ", which does not run that thread's calls");
  WorkerState& dest = runner.layer().worker(to.thread);
  if (in.closure_size == sizeof to) return dest.run_relayed(runner, in.source, in.data);
  // Copied out of the message header: aligned, and writable for a buffer that travels inline.
  std::uint64_t words[inline_bytes / sizeof(std::uint64_t)];
  const std::size_t size = in.closure_size - sizeof to;
  std::memcpy(words, in.closure + sizeof to, size);
  dest.run_relayed(runner, in.source, {reinterpret_cast<std::byte*>(words), size});
}

void Messenger::drain_relayed(bool may_wait) {
  Scoped guard(busy_, true);  // calls made while a record leaves queue behind it
  while (!overflow_.empty()) {
    Segment& s = overflow_.front();  // a deque: calls queued meanwhile do not move it
    while (s.sent < s.used) {
      if (!may_wait && (fabric::send_would_wait() || relay_window_full())) return;
      if (relay_window_full()) {
        wait_for_room();
        continue;
      }
      wire::RecordHeader h;
      std::memcpy(&h, s.block.data + s.sent, sizeof h);
      send_relayed({s.block.data + s.sent, h.size});
      s.sent += h.size;
      overflow_bytes_ -= h.size;
    }
    spare_.push_back(s);
    overflow_.pop_front();
  }
}

}  // namespace rdmx::invoke
