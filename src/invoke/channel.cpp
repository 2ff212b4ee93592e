// The receiving side: d polls its chunks locally and runs the calls in order.
#include <atomic>
#include <bit>
#include <cstdio>
#include <cstring>
#include <utility>
#include <vector>

#include "messengers.hpp"
#include "rdmx/core/tsan.hpp"

#include "rdmx/core/log.hpp"
#include "rdmx/fabric/function_registry.hpp"
#include "rdmx/fabric/rma.hpp"
#include "rdmx/memory/region_table.hpp"
#include "rdmx/transfer/transmitter.hpp"

namespace rdmx::invoke {
namespace {

thread_local WorkerState* running_for = nullptr;  // the owner of the channel this thread polls
thread_local std::uint32_t running_from = 0;    // the process its sender is in

// A notification for the Synchronizer at `sync` (the caller's, whose thread
// owns the channel being polled) runs: the Synchronizer, or nullptr when it
// has already failed for the process it waited on (nothing to count down,
// and nothing to write: its owner may have moved on).
Synchronizer* owed(std::uint64_t sync) {
  auto* s = reinterpret_cast<Synchronizer*>(sync);
  return running_for->settle(running_from, s) ? s : nullptr;
}

// Restores a flag on every exit path.
struct Scoped {
  bool& flag;
  bool saved;
  Scoped(bool& f, bool value) : flag(f), saved(f) { flag = value; }
  ~Scoped() { flag = saved; }
};

// Messengers::destination() for the calls run in a scope (polls nest).
struct RunningFor {
  WorkerState* saved;
  std::uint32_t saved_from;
  RunningFor(WorkerState* d, std::uint32_t from)
      : saved(std::exchange(running_for, d)), saved_from(std::exchange(running_from, from)) {}
  ~RunningFor() {
    running_for = saved;
    running_from = saved_from;
  }
  RunningFor(const RunningFor&) = delete;
  RunningFor& operator=(const RunningFor&) = delete;
};

}  // namespace

Channel::Channel(WorkerState& owner, ThreadId source, RemoteLocator feedback, std::vector<Chunk> chunks)
    : owner_(owner), source_(source), self_(owner.self), feedback_(feedback),
      salt_(wire::channel_salt(source.process, source.thread, self_.process, self_.thread)), ring_(std::move(chunks)) {}

void Channel::corrupted(const std::string& what) {
  broken_ = true;
  throw Error(Errc::protocol, "one-sided calls from " + to_string(source_) + " to " + to_string(self_) + ": " + what +
                                  "; the channel is closed and nothing more from it runs");
}

std::size_t Channel::poll(WorkerState& runner, std::size_t budget) {
  if (broken_) return 0;
  // A dead sender's calls are not run: what they would answer cannot reach
  // it, and what it owed this thread has failed (WorkerState::check_failures).
  if (owner_.job.process_failed(source_.process)) {
    broken_ = true;
    return 0;
  }
  try {
    return poll_now(runner, budget);
  } catch (const Error&) {
    // Answering (or reporting consumed chunks to) a sender that died
    // meanwhile: its channel closes, and the wait this poll runs in goes on.
    if (!owner_.job.process_failed(source_.process)) throw;
    broken_ = true;
    return 0;
  }
}

std::size_t Channel::poll_now(WorkerState& runner, std::size_t budget) {
  const RunningFor running_for_owner{&owner_, source_.process};
  std::size_t ran = 0;
  for (;;) {
    if (offset_ == end_) {
      if (closed_) {
        finish_chunk();
        continue;
      }
      const Chunk& c = ring_[cur_];
      const std::uint64_t word =
          std::atomic_ref<std::uint64_t>(*reinterpret_cast<std::uint64_t*>(c.base)).load(std::memory_order_acquire);
      if (word == 0) break;  // nothing published in this chunk yet
      const auto p = wire::decode(word, salt_);
      if (!p) {
        char text[64];
        std::snprintf(text, sizeof text, "%#llx", static_cast<unsigned long long>(word));
        corrupted(std::string("chunk header word ") + text + " fails its check (corrupted or torn)");
      }
      if (p->seq != static_cast<std::uint16_t>(activation_)) break;  // still the previous use's word
      if (p->end < end_ || p->end > c.capacity)
        corrupted("chunk header publishes end " + std::to_string(p->end) + " (read up to " + std::to_string(end_) +
                  ", chunk of " + std::to_string(c.capacity) + " bytes)");
      if (p->end == end_ && !p->closed) break;
      tsan_acquire(c.base);
      message_received();
      end_ = p->end;
      closed_ = p->closed;
      grow_ = p->grow;
      continue;
    }
    if (ran == budget) break;
    const std::byte* record = ring_[cur_].base + offset_;
    wire::RecordHeader h;
    if (end_ - offset_ < sizeof h) corrupted("a record header is cut off at the published end");
    std::memcpy(&h, record, sizeof h);
    if (h.check != wire::record_check(h)) corrupted("a record header at offset " + std::to_string(offset_) + " fails its check");
    if (h.size < sizeof h || h.size % wire::record_align != 0 || h.size > end_ - offset_)
      corrupted("a record of " + std::to_string(h.size) + " bytes does not fit the " + std::to_string(end_ - offset_) +
                " published bytes left");
    if (!read_ready(record, h)) break;  // its buffer is still being read: later calls of this sender wait
    offset_ += h.size;
    ++ran;
    // Calls run in place: the chunk is reported consumed (and may be
    // overwritten) only when no call from this channel is running.
    ++executing_;
    struct Done {
      int& n;
      ~Done() { --n; }
    } done{executing_};
    if (h.flags == wire::kind_call) [[likely]]
      execute_plain(runner, record, h);
    else
      execute(runner, record, h);
  }
  if (executing_ == 0 && finished_ != pushed_) push_consumed();
  return ran;
}

void Channel::run_relayed(WorkerState& runner, std::span<std::byte> record) {
  if (broken_ || owner_.job.process_failed(source_.process)) return;  // as poll(): a dead sender's calls do not run
  wire::RecordHeader h;
  if (record.size() < sizeof h) corrupted("a relayed record of " + std::to_string(record.size()) + " bytes is cut off");
  std::memcpy(&h, record.data(), sizeof h);
  if (h.check != wire::record_check(h) || h.size != record.size() || h.size % wire::record_align != 0)
    corrupted("a relayed record of " + std::to_string(record.size()) + " bytes has a bad header");
  // Records in chunks are 8-byte aligned, and so are the buffers that travel
  // in them: keep that promise for a record UCX delivered anywhere.
  std::vector<std::uint64_t> copy(record.size() / sizeof(std::uint64_t));
  std::memcpy(copy.data(), record.data(), record.size());
  // A call whose buffer is being read has not started: later calls of this
  // sender wait behind it, as behind read_ready() in a chunk.
  relay_backlog_.push_back(std::move(copy));
  if (relay_backlog_.size() > 1 || relay_reading_) return;  // the frame below runs it, in order
  const RunningFor running_for_owner{&owner_, source_.process};
  while (!relay_backlog_.empty() && !relay_reading_ && !broken_) {
    if (owner_.job.process_failed(source_.process)) {  // what it sent before dying does not run either
      broken_ = true;
      relay_backlog_.clear();
      break;
    }
    std::vector<std::uint64_t> next = std::move(relay_backlog_.front());
    relay_backlog_.pop_front();
    const auto* at = reinterpret_cast<const std::byte*>(next.data());
    std::memcpy(&h, at, sizeof h);
    ++executing_;
    struct Done {
      int& n;
      ~Done() { --n; }
    } done{executing_};
    try {
      if (h.flags == wire::kind_call)
        execute_plain(runner, at, h);
      else
        execute(runner, at, h);
    } catch (const Error&) {
      // Answering a sender that died meanwhile: as poll().
      if (!owner_.job.process_failed(source_.process)) throw;
      broken_ = true;
    }
  }
}

// A call_buffer whose buffer the destination reads: start the RDMA read and
// let this thread go on with other senders' calls; the call runs once the
// read is complete (Seriema's asynchronous read, done by the destination
// thread itself rather than a helper thread).
bool Channel::read_ready(const std::byte* record, const wire::RecordHeader& h) {
  if ((h.flags & wire::kind_mask) != wire::kind_buffer || !(h.flags & wire::has_remote_buffer)) return true;
  if (read_.active) return !read_.starting && (read_.length == 0 || read_.done.ready());
  const std::size_t at = sizeof h + ((h.flags & wire::has_extension) ? sizeof(wire::Extension) : 0);
  if (h.size < at + sizeof(wire::RemoteBuffer)) return true;  // execute reports it
  wire::RemoteBuffer rb;
  std::memcpy(&rb, record + at, sizeof rb);
  if (rb.how == wire::buffer_written || rb.length > Job::current().max_message()) return true;
  read_.active = true;
  read_.length = rb.length;
  read_.data.resize(rb.length);
  if (rb.length == 0) return true;
  read_.starting = true;
  try {
    // The caller's own memory, which it offered: not subject to RDMX_CHECK_ACCESS's round trip.
    const RemoteLocator from{source_.process, rb.region, rb.offset, rb.length};
    read_.done = rdmx::transmitter(from.process).get(read_.data.data(), from.length, rdmx::resolve(from));
  } catch (const Error&) {
    read_.starting = false;
    read_.active = false;  // execute reads synchronously and reports the error
    return true;
  }
  read_.starting = false;
  return read_.done.ready();
}

void Channel::finish_chunk() {
  if (grow_ != 0) {
    // The sender grew the ring right after this chunk; its service call
    // announced the chunks before the sender could close this one.
    if (pending_.size() < grow_) owner_.take_announcements();
    if (pending_.size() < grow_)
      corrupted("the sender announced " + std::to_string(grow_) + " new chunks but only " + std::to_string(pending_.size()) +
                " arrived");
    ring_.insert(ring_.begin() + static_cast<std::ptrdiff_t>(cur_ + 1), pending_.begin(), pending_.begin() + grow_);
    pending_.erase(pending_.begin(), pending_.begin() + grow_);
  }
  cur_ = (cur_ + 1) % ring_.size();
  ++activation_;
  offset_ = end_ = wire::header_bytes;
  closed_ = false;
  grow_ = 0;
  ++finished_;
  if (executing_ == 0) push_consumed();
}

void Channel::push_consumed() {
  // Pushed, not pulled: the sender learns it may reuse chunks without ever
  // reading d's memory (Seriema 4.4.1), and only once per chunk. The first
  // push looks the sender's region up with a call, whose wait progresses and
  // may come back here: that nested poll leaves the push to this frame.
  if (pushing_) return;
  pushing_ = true;
  struct Reset {
    bool& flag;
    ~Reset() { flag = false; }
  } reset{pushing_};
  transfer::Transmitter& tx = rdmx::transmitter(source_.process);
  if (feedback_address_.rkey == nullptr) feedback_address_ = rdmx::resolve(feedback_);
  std::uint64_t* word = words_.next(tx, source_.process);
  *word = finished_;
  words_.used(tx.post_put(word, sizeof *word, feedback_address_));
  pushed_ = finished_;
}

// The common case, a call with nothing to answer: no reply state, no
// buffer; anything unusual goes through execute().
void Channel::execute_plain(WorkerState& runner, const std::byte* record, const wire::RecordHeader& h) {
  const fabric::Invoker invoker = fabric::FunctionRegistry::instance().find_cached(h.function);
  if (invoker == nullptr || wire::align_up(h.closure_size) > h.size - sizeof h) [[unlikely]] {
    execute(runner, record, h);
    return;
  }
  fabric::Incoming in;
  in.function = h.function;
  in.source = source_;
  in.closure = record + sizeof h;
  in.closure_size = h.closure_size;
  try {
    invoker(in);
  } catch (const std::exception& e) {
    rdmx::log(rdmx::LogLevel::error, "process %u: a one-sided call from %s threw (nobody waits for it): %s\n", self_.process,
                 to_string(source_).c_str(), e.what());
  } catch (...) {
    rdmx::log(rdmx::LogLevel::error, "process %u: a one-sided call from %s threw a non-standard exception (nobody waits for it)\n",
                 self_.process, to_string(source_).c_str());
  }
}

std::span<std::byte> Channel::remote_buffer(const wire::RemoteBuffer& rb, std::uint32_t holder,
                                           std::vector<std::byte>& fetched) {
  if (rb.how == wire::buffer_written) {
    // Written into our own registered memory before the call was published.
    const transfer::MemoryRegion* region = memory::RegionTable::process().get(rb.region);
    if (region == nullptr || rb.offset > region->size() || rb.length > region->size() - rb.offset)
      throw Error(Errc::invalid_argument, "the destination buffer (region " + std::to_string(rb.region) + ", offset " +
                                              std::to_string(rb.offset) + ", " + std::to_string(rb.length) +
                                              " bytes) is not registered memory of this process");
    return {static_cast<std::byte*>(region->data()) + rb.offset, static_cast<std::size_t>(rb.length)};
  }
  if (read_.active) {  // read_ready started it and saw it complete
    read_.active = false;
    if (read_.length != 0) read_.done.get();  // throws what the read failed with
    fetched = std::move(read_.data);
    return {fetched.data(), fetched.size()};
  }
  // Read from the caller's memory (synchronously: this thread progresses meanwhile).
  if (rb.length > Job::current().max_message())
    throw Error(Errc::message_too_large, "a buffer of " + std::to_string(rb.length) + " bytes exceeds RDMX_MAX_MESSAGE");
  fetched.resize(rb.length);
  if (rb.length != 0) {
    const RemoteLocator from{holder, rb.region, rb.offset, rb.length};  // offered by its holder
    Scoped reading(relay_reading_, true);  // relayed records that arrive meanwhile wait (run_relayed)
    rdmx::transmitter(holder).get(fetched.data(), from.length, rdmx::resolve(from)).get();
  }
  return {fetched.data(), fetched.size()};
}

namespace {
// The binomial tree over the job's n threads, numbered from the root: thread
// r forwards to r + step for every power of two step > r, so r's subtree is
// every thread congruent to r modulo the first power of two above r.
std::uint64_t subtree_size(std::uint64_t r, std::uint64_t n) {
  if (r == 0) return n;
  const std::uint64_t stride = std::bit_floor(r) << 1;
  return (n - r + stride - 1) / stride;
}
}  // namespace

void Channel::forward_broadcast(WorkerState& runner, const wire::RecordHeader& h, const Forward& forward,
                                const fabric::Incoming& in, const wire::RemoteBuffer* rb, const std::string* failure) {
  const bool read = rb != nullptr && rb->how != wire::buffer_written;
  detail::BufferTransfer reference{read ? detail::BufferTransfer::read : detail::BufferTransfer::written, {}};
  if (read) reference.where = RemoteLocator{forward.root.process, rb->region, rb->offset, rb->length};
  Synchronizer written;  // this thread's writes into its children's buffers
  const std::uint32_t threads = runner.job.threads_per_process();
  const std::uint64_t n = std::uint64_t{runner.job.size()} * threads;
  const std::uint64_t root = std::uint64_t{forward.root.process} * threads + forward.root.thread;
  const std::uint64_t me = std::uint64_t{self_.process} * threads + self_.thread;
  const std::uint64_t r = (me + n - root) % n;
  for (std::uint64_t step = 1; step < n; step <<= 1) {
    if (r >= step || r + step >= n) continue;
    const std::uint64_t child = (root + r + step) % n;
    fabric::Outgoing o;
    o.destination = ThreadId{static_cast<std::uint32_t>(child / threads), static_cast<std::uint32_t>(child % threads)};
    o.kind = fabric::CallKind::broadcast;
    o.function = h.function;
    o.closure = in.closure;
    o.closure_size = in.closure_size;
    if (!read) o.data = in.data;
    std::string error = failure != nullptr ? *failure : std::string();
    Errc code = Errc::transport;
    if (error.empty()) {
      try {
        if (rb != nullptr && !read) {
          const wire::Target& t = forward.targets[child];
          reference.where = RemoteLocator{o.destination.process, t.region, t.offset, rb->length};
          o.sync = &written;
          o.notify = fabric::Notify::sent;
        }
        runner.messenger(o.destination).append(o, {0, Policy::retry}, rb != nullptr ? &reference : nullptr, &forward);
      } catch (const Error& e) {
        code = e.code();
        error = std::string("broadcast: forwarding to thread ") + to_string(o.destination) + ": " + e.what();
      }
    }
    if (error.empty()) continue;
    // That child's subtree is not reached: the root hears it for each of them.
    if (forward.sync == 0)
      rdmx::log(rdmx::LogLevel::error, "process %u: a broadcast from %s did not reach the subtree of thread %s: %s\n",
                   self_.process, to_string(forward.root).c_str(), to_string(o.destination).c_str(), error.c_str());
    else
      for (std::uint64_t k = subtree_size(r + step, n); k > 0; --k) notify_caller(forward.root, forward.sync, &error, code);
  }
  // func may change this thread's buffer once the children's copies have left it.
  written.wait();
}

// The result goes first, then (fenced) one atomic decrement of the caller's
// Synchronizer count: when the caller sees its count drop, the result is there.
void Channel::answer_by_rdma(const wire::RemoteReply& reply, bool returning, std::span<const std::byte> result) {
  transfer::Transmitter& tx = rdmx::transmitter(source_.process);
  if (returning) {
    tx.put(result.data(), result.size(),
           rdmx::resolve(RemoteLocator{source_.process, reply.result_region, reply.result_offset, result.size()}))
        .get();  // local completion: `result` is on this stack
    tx.fence();
  }
  // Nobody waits for the old value; the operation completes as this thread progresses.
  (void)tx.fetch_add(rdmx::resolve(RemoteLocator{source_.process, reply.counter_region, reply.counter_offset, 8}),
                     ~std::uint64_t{0});
}

void Channel::notify_caller(ThreadId owner, std::uint64_t sync, const std::string* failure, Errc code, bool counted) {
  MessengerGlobal back;
  const auto text = failure != nullptr ? std::as_bytes(std::span(failure->data(), failure->size()))
                                       : std::span<const std::byte>();
  const auto c = static_cast<std::uint32_t>(code);
  if (!counted) {  // an answer by RDMA atomic that failed: the caller counted nothing
    back.call_buffer(owner, [sync, c](std::span<std::byte> text) {
      reinterpret_cast<Synchronizer*>(sync)->fail(static_cast<Errc>(c), std::string(reinterpret_cast<const char*>(text.data()), text.size()));
    }, text);
  } else if (failure != nullptr) {
    back.call_buffer(owner, [sync, c](std::span<std::byte> text) {
      if (Synchronizer* s = owed(sync))
        s->fail(static_cast<Errc>(c), std::string(reinterpret_cast<const char*>(text.data()), text.size()));
    }, text);
  } else {
    back.call(owner, [sync] {
      if (Synchronizer* s = owed(sync)) s->notify();
    });
  }
}

void Channel::execute(WorkerState& runner, const std::byte* record, const wire::RecordHeader& h) {
  const std::byte* p = record + sizeof h;
  const std::byte* const last = record + h.size;
  wire::Extension ext{};
  if (h.flags & wire::has_extension) {
    if (last - p < static_cast<std::ptrdiff_t>(sizeof ext)) corrupted("a record is too short for its extension");
    std::memcpy(&ext, p, sizeof ext);
    p += sizeof ext;
  }
  const std::uint8_t kind = h.flags & wire::kind_mask;
  Forward forward{source_, ext.sync};  // a broadcast's root (the sync belongs to it)
  if (kind == wire::kind_broadcast) {
    wire::BroadcastRoot root;
    if (!(h.flags & wire::has_extension) || last - p < static_cast<std::ptrdiff_t>(sizeof root))
      corrupted("a broadcast record is too short for its root");
    std::memcpy(&root, p, sizeof root);
    p += sizeof root;
    forward.root = ThreadId{root.process, root.thread};
  }
  wire::RemoteBuffer rb{};
  if (h.flags & wire::has_remote_buffer) {
    if (last - p < static_cast<std::ptrdiff_t>(sizeof rb)) corrupted("a record is too short for its buffer reference");
    std::memcpy(&rb, p, sizeof rb);
    p += sizeof rb;
  }
  std::vector<wire::Target> targets;  // broadcast_buffer into destination buffers
  if (h.flags & wire::has_targets) {
    const std::size_t n = std::size_t{runner.job.size()} * runner.job.threads_per_process();
    if (kind != wire::kind_broadcast || !(h.flags & wire::has_remote_buffer) || rb.how != wire::buffer_written ||
        static_cast<std::size_t>(last - p) < n * sizeof(wire::Target))
      corrupted("a broadcast record is too short for its destination buffers");
    targets.resize(n);
    std::memcpy(targets.data(), p, n * sizeof(wire::Target));
    p += n * sizeof(wire::Target);
    forward.targets = targets;
  }
  wire::RemoteReply reply{};
  const bool remote_reply = (h.flags & wire::has_remote_reply) != 0;
  if (remote_reply) {
    if (!(h.flags & wire::has_extension) || last - p < static_cast<std::ptrdiff_t>(sizeof reply))
      corrupted("a record is too short for its remote reply");
    std::memcpy(&reply, p, sizeof reply);
    p += sizeof reply;
  }
  fabric::Incoming in;
  in.function = h.function;
  in.source = source_;
  in.closure = p;
  in.closure_size = h.closure_size;
  if (static_cast<std::size_t>(last - p) < wire::align_up(h.closure_size)) corrupted("a record's captures overrun it");
  p += wire::align_up(h.closure_size);
  std::vector<std::byte> fetched;  // a buffer read from the caller
  bool notified_early = false;      // the caller's sync counted down when its buffer was read
  std::string failure;
  Errc code = Errc::transport;
  const bool remote = (h.flags & wire::has_remote_buffer) && (kind == wire::kind_buffer || kind == wire::kind_broadcast);
  if (remote) {
    // A broadcast's buffer to read stays at its root: only the reference
    // goes down the tree. One written into destination buffers is passed on
    // from this thread's buffer, once it is here.
    const bool into_targets = kind == wire::kind_broadcast && rb.how == wire::buffer_written;
    if (kind == wire::kind_broadcast && !into_targets) forward_broadcast(runner, h, forward, in, &rb);
    try {
      in.data = remote_buffer(rb, kind == wire::kind_broadcast ? forward.root.process : source_.process, fetched);
    } catch (const Error& e) {
      code = e.code();
      failure = std::string(into_targets ? "broadcast_buffer: " : "call_buffer: ") + e.what();
    }
    if (into_targets) {
      const std::string unreached = "broadcast_buffer: not reached, thread " + to_string(self_) + " above it failed: " + failure;
      try {
        forward_broadcast(runner, h, forward, in, &rb, failure.empty() ? nullptr : &unreached);
      } catch (const Error& e) {  // the writes into the children's buffers failed (a transport error)
        if (failure.empty()) {
          code = e.code();
          failure = std::string("broadcast_buffer: ") + e.what();
        }
      }
    }
    if (rb.how == wire::buffer_read_sent && ext.sync != 0) {
      notified_early = true;
      notify_caller(source_, ext.sync, failure.empty() ? nullptr : &failure, code);
    }
  } else if (kind == wire::kind_buffer || kind == wire::kind_broadcast) {
    if (ext.buffer_length > static_cast<std::size_t>(last - p)) corrupted("a record's buffer overruns it");
    in.data = {const_cast<std::byte*>(p), static_cast<std::size_t>(ext.buffer_length)};
  }
  struct Result {
    bool set = false;
    std::byte bytes[256];
    std::size_t size = 0;
  } result;
  in.runtime = &result;
  in.reply = [](fabric::Incoming& call, const void* value, std::size_t size) {
    auto* r = static_cast<Result*>(call.runtime);
    if (size > sizeof r->bytes) throw Error(Errc::message_too_large, "call_return results are limited to 256 bytes");
    std::memcpy(r->bytes, value, size);
    r->size = size;
    r->set = true;
  };
  if (kind == wire::kind_broadcast && !remote) forward_broadcast(runner, h, forward, in);  // fan out first, then run
  if (!failure.empty()) {
    // The buffer could not be had: the function does not run.
  } else if (fabric::Invoker invoker = fabric::FunctionRegistry::instance().find_cached(h.function)) {
    try {
      invoker(in);
    } catch (const Error& e) {
      code = e.code() == Errc::unknown_function ? Errc::remote_exception : e.code();
      failure = e.what();
    } catch (const std::exception& e) {
      code = Errc::remote_exception;
      failure = std::string("remote function threw: ") + e.what();
    } catch (...) {
      code = Errc::remote_exception;
      failure = "remote function threw a non-standard exception";
    }
  } else {
    char id[32];
    std::snprintf(id, sizeof id, "%#llx", static_cast<unsigned long long>(h.function));
    code = Errc::unknown_function;
    failure = "process " + std::to_string(self_.process) + " has no function with id " + id +
              " (was the caller built from the same program?)";
  }
  if (ext.sync == 0 || notified_early) {
    if (!failure.empty())
      rdmx::log(rdmx::LogLevel::error, "process %u dropped a one-sided call from %s: %s\n", self_.process, to_string(source_).c_str(),
                   failure.c_str());
    return;
  }
  const std::uint64_t sync = ext.sync;
  if (remote_reply && failure.empty()) {
    try {
      return answer_by_rdma(reply, kind == wire::kind_returning, {result.bytes, result.size});
    } catch (const Error& e) {  // the caller's memory could not be written: tell it with a message
      code = e.code();
      failure = std::string("answering by RDMA: ") + e.what();
    }
  }
  // The caller waits: answer through this thread's messenger back to it (the
  // symmetric channel), so the answer is ordered after everything else.
  if (failure.empty() && kind == wire::kind_returning) {
    const std::uint64_t orig = ext.result_address;
    MessengerGlobal().call_buffer(source_, [sync, orig](std::span<std::byte> value) {
      if (Synchronizer* s = owed(sync)) {
        std::memcpy(reinterpret_cast<void*>(orig), value.data(), value.size());
        s->notify();
      }
    }, std::span<const std::byte>(result.bytes, result.size));
  } else {
    notify_caller(forward.root, sync, failure.empty() ? nullptr : &failure, code, !remote_reply);
  }
}

}  // namespace rdmx::invoke

namespace rdmx {
namespace invoke {
WorkerState& Messengers::destination() {
  if (running_for == nullptr) throw Error(Errc::invalid_argument, "call_destination(): no one-sided call runs on this thread");
  return *running_for;
}
}  // namespace invoke

ThreadId call_destination() { return invoke::Messengers::destination().self; }
}  // namespace rdmx
