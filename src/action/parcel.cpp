// The parcel layer: eager and rendezvous parcels over one-sided calls and
// RDMA gets, the caller's table of parcels awaiting an answer, and the
// destination's table of parcels whose chunks it is pulling. All of it is
// per worker thread (a WorkerParcels): a parcel's entry lives on the thread that sent
// it, and every answer (reply, release) is addressed to that thread, so
// nothing here is shared between threads and nothing is locked. The
// process-wide pieces are the registration cache for pointer chunks (its
// own lock, taken only for parcels with pointer chunks) and the registry of
// actions (read once per action and thread).
#include "rdmx/core/log.hpp"
#include "rdmx/core/token_table.hpp"
#include "rdmx/action/parcel.hpp"
#include "large_landing.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <deque>
#include <string>
#include <unordered_map>
#include <vector>

#include "settings.hpp"
#include "rdmx/fabric/call.hpp"
#include "rdmx/fabric/rma.hpp"
#include "rdmx/fabric/synchronizer.hpp"
#include "rdmx/invoke/messenger.hpp"
#include "rdmx/memory/arena.hpp"
#include "rdmx/serial/registration_cache.hpp"
#include "rdmx/serial/rma_memory.hpp"
#include "rdmx/serial/wire.hpp"
#include "rdmx/transfer/transmitter.hpp"

namespace rdmx::parcel {
namespace {

enum Kind : std::uint8_t { kind_request = 1, kind_reply = 2 };
enum Flag : std::uint8_t {
  wants_reply = 1,  // request: the caller waits for a reply
  rendezvous = 2,   // the archive has chunks to pull; release the sender afterwards
  is_failure = 4,   // reply: the message is the error text, errc the code
};

// Travels as the one-sided call's captures; the archive is the call's buffer.
struct Header {
  // The first word is read as the member `kind` selects: the two never
  // travel together, so they share it and the header stays 32 bytes.
  union {
    std::uint64_t action = 0;  // kind_request: the id of the action to run
    std::uint64_t release;     // kind_reply: the replier's entry to release once the chunks are pulled (0: none)
  };
  std::uint64_t token = 0;  // the caller's entry (0: none): a request's answers go to it, a reply completes it
  std::uint32_t source_process = 0;
  std::uint32_t source_thread = 0;
  std::uint16_t errc = 0;  // failed reply
  std::uint8_t kind = 0;
  std::uint8_t flags = 0;
  std::uint32_t reserved = 0;
};
static_assert(std::is_trivially_copyable_v<Header> && sizeof(Header) == 32);

std::string name(ThreadId t) { return std::to_string(t.process) + "/" + std::to_string(t.thread); }
std::uint64_t key_of(ThreadId t) { return (std::uint64_t{t.process} << 32) | t.thread; }
ThreadId thread_of(std::uint64_t key) { return {static_cast<std::uint32_t>(key >> 32), static_cast<std::uint32_t>(key)}; }

// A parcel this thread sent that still waits for something: the peer to
// pull its chunks (the archive is held until then), a reply, or both.
struct Entry {
  bool awaiting_release = false;
  bool awaiting_reply = false;
  std::uint32_t peer = 0;  // the process it waits on
  std::uint64_t action = 0;
  std::unique_ptr<serial::OutputArchive> archive;
  Completion completion;
  SentCallback callback;
};

// quiet(): actions travel unordered (an eager parcel overtakes a pulled
// one, and runs before it has landed), so no marker can follow them in
// order. Instead a thread counts the requests it sent to each destination
// thread, a destination counts those it has run from each source, and
// quiet() sends each destination with requests not yet confirmed one marker
// "I sent you n", which it answers once it has run n from that source.

// Requests this thread sent to one destination thread.
struct SentTo {
  std::uint64_t sent = 0;
  std::uint64_t confirmed = 0;  // of those, known to have run (a marker answered)
};
// A marker waiting at the destination until `count` requests of its source have run.
struct Marker {
  std::uint64_t count = 0;
  std::uint64_t token = 0;  // the source's QuietWait
};
// Requests run here from one source thread (ran or failed: either way, done).
struct RanFrom {
  std::uint64_t count = 0;
  std::vector<Marker> waiting;
};
// A marker this thread sent in quiet(), awaiting its answer.
struct QuietWait {
  ThreadId dest;
  std::uint64_t count = 0;
  Synchronizer* sync = nullptr;
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

class Parcels;

class WorkerParcels {
 public:
  WorkerParcels(Job& job, Parcels& layer, std::uint32_t thread)
      : job(job),
        layer(layer),
        self{job.rank(), thread},
        landing(job.arena_near(thread)),
        large_landing(job.arena_near(thread).max_size()),
        landing_segment(job.arena_near(thread).segment_size()) {}

  Job& job;
  Parcels& layer;
  ThreadId self;
  serial::RmaMemory landing;  // where pulled chunks land (registered: rma_vector keeps it)
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

  std::uint64_t add_entry(std::uint32_t peer, std::uint64_t action);
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

  // The answers a thread receives.
  void released(std::uint64_t token);
  void deliver(std::uint64_t token, const Received& in);
  void failed(std::uint64_t token, Errc code, const std::string& text);

  // The destination's side.
  void run_request(const Header& h, const Received& in);
  void start_pull(const Header& h, std::span<const std::byte> data);
  void send_reply(ThreadId to, std::uint64_t caller_token, std::unique_ptr<serial::OutputArchive>& archive);
  void send_failure(ThreadId to, std::uint64_t caller_token, Errc code, const std::string& text);
  void send_release(ThreadId to, std::uint64_t token);

  std::size_t poll();
  bool settled() const noexcept { return pulls_.empty(); }  // no arrived parcel waits for its chunks

  // quiet(): the sender's side, and the destination's.
  void count_request(ThreadId dest) { ++sent_to(dest).sent; }  // a request went to dest
  void quiet();
  void answered(std::uint64_t quiet_token);
  void marker(ThreadId source, std::uint64_t count, std::uint64_t quiet_token);
  serial::InputOptions input_options() noexcept { return serial::InputOptions{&landing}; }
  void count_sent(const serial::OutputArchive& ar, std::size_t message_bytes) {
    const std::size_t chunk_bytes = ar.out_of_line_bytes();
    ++(chunk_bytes != 0 ? stats.rendezvous : stats.eager);
    stats.message_bytes += message_bytes;
    stats.chunk_bytes += chunk_bytes;
  }
  Stats stats;

 private:
  void complete_pull(std::unique_ptr<Pull> p);
  void count_ran(ThreadId source);
  void answer(ThreadId source, std::uint64_t quiet_token);
  void fail_pull(const Pull& p, Errc code, const std::string& text);
  void check_failures();
  std::shared_ptr<transfer::RemoteKey> rkey(ThreadId owner, transfer::Endpoint& ep, std::span<const std::byte> packed);
  transfer::Transmitter& thread_transmitter(ThreadId peer);

  TokenTable<Entry> entries_;  // parcels waiting for a release or a reply, by token
  std::uint32_t tick_ = 0;
  std::vector<std::unique_ptr<Pull>> pulls_;
  std::vector<std::unique_ptr<serial::OutputArchive>> archives_;
  std::unordered_map<std::string, std::shared_ptr<transfer::RemoteKey>> rkeys_;  // by thread + packed bytes
  std::unordered_map<std::uint64_t, std::unique_ptr<transfer::Transmitter>> thread_transmitters_;
  // Counted on every request: the last peer's entry is kept at hand (a
  // hash lookup per request and side was 3 % of a round trip). Entries are
  // never erased, so the pointers stay valid.
  SentTo& sent_to(ThreadId dest) { return cached(sent_, last_sent_, dest); }
  RanFrom& ran_from(ThreadId source) { return cached(ran_, last_ran_, source); }
  template <class V>
  static V& cached(std::unordered_map<std::uint64_t, V>& map, std::pair<std::uint64_t, V*>& last, ThreadId t) {
    const std::uint64_t key = key_of(t);
    if (last.second == nullptr || last.first != key) last = {key, &map[key]};
    return *last.second;
  }
  std::unordered_map<std::uint64_t, SentTo> sent_;   // by destination thread (key_of)
  std::unordered_map<std::uint64_t, RanFrom> ran_;   // by source thread (key_of)
  std::pair<std::uint64_t, SentTo*> last_sent_{0, nullptr};
  std::pair<std::uint64_t, RanFrom*> last_ran_{0, nullptr};
  TokenTable<QuietWait> quiet_waits_;
};

class Parcels final : public fabric::Layer {
 public:
  explicit Parcels(Job& job);
  std::size_t poll(std::uint32_t worker) override { return workers_[worker]->poll(); }
  void flush(std::uint32_t) override {}  // parcels travel as one-sided calls: invoke's flush publishes them
  bool settled(std::uint32_t worker) const override { return workers_[worker]->settled(); }
  void quiet(std::uint32_t worker) override { workers_[worker]->quiet(); }
  // Each worker fails its own entries when it next polls (WorkerParcels::check_failures).
  void process_failed(std::uint32_t, const std::string&) override { failures.store(true, std::memory_order_release); }
  WorkerParcels& worker(std::uint32_t thread) { return *workers_.at(thread); }

  serial::RegistrationCache registrations;
  std::atomic<bool> failures{false};  // some process has failed: slots look for what waits on it
  // Whether parcel messages to `process` go as one-sided calls (up to
  // eager_limit bytes; larger ones as send-based calls, which have no chunk
  // size limit) or all as send-based calls. RDMX_PARCEL_CALLS=auto (the
  // default) chooses send-based where UCX emulates one-sided writes (TCP):
  // there each write waits for the destination's service thread.
  bool one_sided(std::uint32_t process);
  std::size_t eager_limit(std::uint32_t process) { return one_sided(process) ? one_sided_limit_ : 0; }

 private:
  std::vector<std::unique_ptr<WorkerParcels>> workers_;
  enum Choice : std::int8_t { unknown, yes, no };
  Choice forced_ = unknown;                          // RDMX_PARCEL_CALLS=one-sided|send
  std::vector<std::atomic<std::int8_t>> chosen_;     // auto, by process
  std::size_t one_sided_limit_;
};

Parcels::Parcels(Job& job)
    : registrations(job.context()),
      chosen_(job.size()),
      one_sided_limit_(MessengerOptions::from_env().chunk_size / 4) {
  const std::string calls = rdmx_action_settings.word("RDMX_PARCEL_CALLS");
  if (calls == "send") forced_ = no;
  if (calls == "one-sided") forced_ = yes;
  // Helper threads run one-sided calls on a thread other than their
  // destination, but a parcel's state (its caller's entry, its pulls) lives
  // with its thread: with helpers, parcels go as send-based calls, which
  // their destination thread runs itself.
  if (job.helpers_per_process() != 0) forced_ = no;
  for (std::uint32_t t = 0; t < job.workers_per_process(); ++t)
    workers_.push_back(std::make_unique<WorkerParcels>(job, *this, t));
}

bool Parcels::one_sided(std::uint32_t process) {
  if (forced_ != unknown) return forced_ == yes;
  // The own process too: without shared memory its rings are reached by
  // emulated RDMA as well (an async to the own thread over TCP took 60-70
  // us one-sided, 13 us send-based).
  std::int8_t c = chosen_[process].load(std::memory_order_relaxed);
  if (c == unknown) {
    // Any of the process's workers is reached over the same transports.
    c = rdmx::rma_emulated(process) ? no : yes;
    chosen_[process].store(c, std::memory_order_relaxed);
  }
  return c == yes;
}

WorkerParcels& current_worker() {
  void** word = fabric::acting_word<WorkerParcels>();
  if (word != nullptr && *word != nullptr) [[likely]]
    return *static_cast<WorkerParcels*>(*word);
  if (word == nullptr || this_thread().is_service()) [[unlikely]]
    throw Error(Errc::invalid_argument,
                "rdmx::async, post and async_cb are called from worker threads (inside Job::run or on the thread that "
                "made the Job); other threads can use the send-based rdmx::call");
  *word = &fabric::layer<Parcels>().worker(this_thread().thread);
  return *static_cast<WorkerParcels*>(*word);
}

// The Job's memory for rma_vector and rma_object when neither the container
// nor the program names any (RmaMemory::resolve): the calling worker's
// landing memory, registered in its NUMA zone's arena and destroyed with the
// Parcels layer, after the job is left and before the arenas. The service
// thread takes worker 0's.
serial::RmaMemory* job_rma_memory() {
  ThreadId me;
  try {
    me = this_thread();
  } catch (const Error&) {
    return nullptr;  // no Job, or a thread that is not one of its threads
  }
  return &fabric::layer<Parcels>().worker(me.is_service() ? 0 : me.thread).landing;
}
[[maybe_unused]] const bool job_rma_memory_installed = (serial::RmaMemory::set_default_source(&job_rma_memory), true);


void on_message(const Header& h, std::span<std::byte> data);

// One parcel message to thread `to`: a one-sided call (one RDMA write) when
// it fits the destination's chunks comfortably and one-sided writes to its
// process are not emulated, else a send-based call. A reply, and a request
// whose future the caller will wait on, is published at once: batched, a
// window of requests reached the destination only when the caller began to
// wait, and their replies came back only after the last had run (0.54-0.64x
// MPI's request rate at 64 outstanding, against 0.8-0.95x at once).
void transmit(Parcels& layer, ThreadId to, const Header& h, std::span<const std::byte> message) {
  auto call = [h](std::span<std::byte> data) { on_message(h, data); };
  const bool awaited = h.kind == kind_reply || (h.flags & wants_reply) != 0;
  if (message.size() <= layer.eager_limit(to.process))
    MessengerGlobal(Policy::retry, awaited ? Publish::at_once : Publish::batched).call_buffer(to, call, message);
  else
    rdmx::call_buffer(to, call, message);  // returns once `message` may be reused
}

void on_release(std::uint64_t token) { current_worker().released(token); }

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
                 unsigned{h.kind}, name(source).c_str());
  }
}

// The destination's answer to one request.
class RequestResponder final : public Responder {
 public:
  RequestResponder(WorkerParcels& worker, const Header& h) : worker_(worker), h_(h) {}
  ~RequestResponder() {
    if (archive_) worker_.give_archive(std::move(archive_));
  }
  bool wants_result() const noexcept override { return (h_.flags & wants_reply) != 0; }
  serial::OutputArchive& archive() override {
    if (!archive_) archive_ = worker_.take_archive();
    return *archive_;
  }
  void reply() override {
    if (!wants_result()) return;
    try {
      worker_.send_reply(source(), h_.token, archive_);
    } catch (const Error& e) {
      // E.g. the result holds more pointer chunks than the registration budget.
      worker_.send_failure(source(), h_.token, e.code(), "the result of " + action_name(h_.action) + " could not be sent: " + e.what());
    }
  }
  void fail(Errc code, const std::string& text) override {
    if (wants_result()) {
      worker_.send_failure(source(), h_.token, code, text);
    } else {
      rdmx::log(rdmx::LogLevel::error, "process %u: a posted %s from %s failed (nobody waits for it): %s\n", worker_.self.process,
                   action_name(h_.action).c_str(), name(source()).c_str(), text.c_str());
    }
  }

 private:
  ThreadId source() const noexcept { return {h_.source_process, h_.source_thread}; }
  WorkerParcels& worker_;
  const Header& h_;
  std::unique_ptr<serial::OutputArchive> archive_;
};

}  // namespace

// ---- the sending side ----

std::uint64_t WorkerParcels::add_entry(std::uint32_t peer, std::uint64_t action) {
  // A late or repeated answer for a reused entry finds nothing
  // (TokenTable) instead of completing someone else's parcel.
  auto added = entries_.add();
  added.value.peer = peer;
  added.value.action = action;
  return added.token;
}

void WorkerParcels::released(std::uint64_t token) {
  Entry* e = find(token);
  if (e == nullptr || !e->awaiting_release) return;  // e.g. already failed with its peer
  e->awaiting_release = false;
  SentCallback callback = std::move(e->callback);
  e->callback = nullptr;
  free_if_done(token);
  if (callback) callback(nullptr);
}

void WorkerParcels::deliver(std::uint64_t token, const Received& in) {
  Entry* e = find(token);
  if (e == nullptr || !e->awaiting_reply) {
    rdmx::log(rdmx::LogLevel::error, "process %u: a reply from %s matches no parcel of thread %u (dropped)\n", self.process,
                 name(in.source).c_str(), self.thread);
    return;
  }
  Completion c = std::move(e->completion);
  e->awaiting_reply = false;
  free_if_done(token);
  c.deliver(*c.state, in);  // may run continuations, which may send: e is not used after this
}

void WorkerParcels::failed(std::uint64_t token, Errc code, const std::string& text) {
  Entry* e = find(token);
  if (e == nullptr || !e->awaiting_reply) return;
  Completion c = std::move(e->completion);
  e->awaiting_reply = false;
  free_if_done(token);
  c.state->set_error(code, text);
}

void send_request(ThreadId dest, std::uint64_t action, ArchiveLease& lease, Completion* completion,
                  SentCallback* callback) {
  WorkerParcels& worker = current_worker();
  worker.job.check_destination(dest);
  if (dest.is_service())
    throw Error(Errc::invalid_argument, "remote actions run on worker threads; " + name(dest) + " is a service thread");
  if (worker.job.process_failed(dest.process))
    throw Error(Errc::peer_failed, "process " + std::to_string(dest.process) + " has failed");
  serial::OutputArchive& ar = *lease;
  const bool chunks = !ar.out_of_line_chunks().empty();
  if (chunks) serial::register_pointer_chunks(ar, worker.layer.registrations);
  const std::span<const std::byte> message = ar.flatten();
  worker.count_sent(ar, message.size());
  SentCallback* const caller_callback = callback;

  Header h;
  h.action = action;
  h.source_process = worker.self.process;
  h.source_thread = worker.self.thread;
  h.kind = kind_request;
  h.flags = static_cast<std::uint8_t>((completion != nullptr ? wants_reply : 0) | (chunks ? rendezvous : 0));
  if (completion != nullptr || chunks) {
    // Registered before sending: the answer can come back while we are still
    // in transmit (it progresses when the destination's ring is full).
    h.token = worker.add_entry(dest.process, action);
    Entry& e = *worker.find(h.token);
    e.awaiting_reply = completion != nullptr;
    if (completion != nullptr) e.completion = std::move(*completion);
    if (chunks) {
      e.awaiting_release = true;
      e.archive = std::move(lease.owned());  // the message points into it: held until the destination pulled
      if (callback != nullptr) e.callback = std::move(*callback);
      callback = nullptr;
    }
  }
  try {
    transmit(worker.layer, dest, h, message);
  } catch (...) {
    // The caller fails its future with what is thrown, and runs the callback.
    if (Entry* e = worker.find(h.token); e != nullptr && e->callback && caller_callback != nullptr)
      *caller_callback = std::move(e->callback);
    worker.forget(h.token);
    throw;
  }
  worker.count_request(dest);  // only once it went: quiet() waits for as many to run
  if (callback != nullptr && *callback) (*callback)(nullptr);  // eager: the message was copied out, the arguments may be reused
}

// ---- the destination's side ----

void WorkerParcels::run_request(const Header& h, const Received& in) {
  {
    RequestResponder out(*this, h);
    Handler handle = ActionRegistry::instance().find_cached(h.action);
    if (handle == nullptr)
      out.fail(Errc::unknown_function, "process " + std::to_string(self.process) + " has no remote action with id " +
                                           action_name(h.action) +
                                           " (were caller and destination built from the same program?)");
    else
      handle(in, out);  // catches what the action throws
  }
  count_ran({h.source_process, h.source_thread});
}

void WorkerParcels::send_reply(ThreadId to, std::uint64_t caller_token, std::unique_ptr<serial::OutputArchive>& archive) {
  if (!archive) archive = take_archive();  // a handler that wrote nothing (cannot happen for typed actions)
  serial::OutputArchive& ar = *archive;
  const bool chunks = !ar.out_of_line_chunks().empty();
  if (chunks) serial::register_pointer_chunks(ar, layer.registrations);
  const std::span<const std::byte> message = ar.flatten();
  count_sent(ar, message.size());
  Header h;
  h.token = caller_token;
  h.source_process = self.process;
  h.source_thread = self.thread;
  h.kind = kind_reply;
  if (chunks) {
    h.flags = rendezvous;
    h.release = add_entry(to.process, 0);
    Entry& e = *find(h.release);
    e.awaiting_release = true;
    e.archive = std::move(archive);
  }
  try {
    transmit(layer, to, h, message);
  } catch (const Error& e) {
    forget(h.release);
    rdmx::log(rdmx::LogLevel::error, "process %u: a reply to %s could not be sent: %s\n", self.process, name(to).c_str(), e.what());
  }
}

void WorkerParcels::send_failure(ThreadId to, std::uint64_t caller_token, Errc code, const std::string& text) {
  Header h;
  h.token = caller_token;
  h.source_process = self.process;
  h.source_thread = self.thread;
  h.kind = kind_reply;
  h.flags = is_failure;
  h.errc = static_cast<std::uint16_t>(code);
  // Long texts are cut: a reply must fit a one-sided call.
  const std::size_t n = std::min(text.size(), std::size_t{16384});
  try {
    transmit(layer, to, h, std::as_bytes(std::span(text.data(), n)));
  } catch (const Error& e) {
    rdmx::log(rdmx::LogLevel::error, "process %u: a failure could not be reported to %s (%s): %s\n", self.process,
                 name(to).c_str(), e.what(), text.c_str());
  }
}

void WorkerParcels::send_release(ThreadId to, std::uint64_t token) {
  if (token == 0) return;
  try {
    auto release = [token] { on_release(token); };
    if (layer.one_sided(to.process))
      MessengerGlobal().call(to, release);
    else
      rdmx::call(to, release);
  } catch (const Error& e) {
    rdmx::log(rdmx::LogLevel::error, "process %u: could not release a parcel of %s: %s\n", self.process, name(to).c_str(), e.what());
  }
}

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
    fail_pull(*p, e.code(), std::string("pulling the chunks of a parcel from ") + name(source) + ": " + e.what());
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
      send_failure(source, h.token, code, text);
    else
      rdmx::log(rdmx::LogLevel::error, "process %u: a posted %s was dropped: %s\n", self.process, action_name(h.action).c_str(),
                   text.c_str());
    count_ran(source);  // done with, if not run: the sender's quiet() must not wait for it
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
    // The sender may reuse its buffers before the action runs (async_cb):
    // publish the release now, the action may run long without progressing.
    send_release(source, h.token);
    if (h.token != 0 && layer.one_sided(source.process)) MessengerGlobal().flush();
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
  if ((entries_.in_use() != 0 || !pulls_.empty() || quiet_waits_.in_use() != 0) && (++tick_ & 255) == 0)
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
    Completion c = std::move(e.completion);
    SentCallback callback = std::move(e.callback);
    const bool reply = e.awaiting_reply;
    forget(token);
    // User code below may send and add entries: nothing of e is used after.
    if (callback) callback(&error);
    if (reply && c.state) c.state->set_error(error.code(), error.what());
  });
  quiet_waits_.for_each([&](std::uint64_t token, QuietWait& w) {
    if (!job.process_failed(w.dest.process)) return;
    w.sync->fail(Errc::peer_failed, "process " + std::to_string(w.dest.process) + " failed before it ran every action " +
                                        name(self) + " sent to " + name(w.dest));
    quiet_waits_.erase(token);
  });
}

// ---- quiet() ----

void WorkerParcels::quiet() {
  // The markers' waits refer to `sync`: whatever ends this function takes
  // them out, so that a late answer finds nothing.
  Synchronizer sync;
  std::vector<std::uint64_t> waits;
  struct Forget {
    TokenTable<QuietWait>& table;
    std::vector<std::uint64_t>& tokens;
    ~Forget() {
      for (std::uint64_t t : tokens) table.erase(t);
    }
  } forget{quiet_waits_, waits};
  // Listed first: sending may progress, and what runs meanwhile may send more.
  std::vector<std::pair<ThreadId, std::uint64_t>> unconfirmed;
  for (const auto& [key, to] : sent_)
    if (to.sent != to.confirmed) unconfirmed.emplace_back(thread_of(key), to.sent);
  if (unconfirmed.empty()) return;
  bool one_sided = false;
  for (const auto& [dest, count] : unconfirmed) {
    if (job.process_failed(dest.process))
      throw Error(Errc::peer_failed, "process " + std::to_string(dest.process) + " has failed: not every action " +
                                         name(self) + " sent to " + name(dest) + " is known to have run");
    auto added = quiet_waits_.add();
    added.value = {dest, count, &sync};
    const std::uint64_t token = added.token;
    waits.push_back(token);
    sync.add();
    // Send-based, whatever path the parcels took: one small call per
    // destination and phase, answered the same way.
    rdmx::call(dest, [source = self, count, token] { current_worker().marker(source, count, token); });
    one_sided = one_sided || layer.one_sided(dest.process);
  }
  // Parcels sent as one-sided calls may still wait in this thread's
  // messengers: publish them, or the destinations never see them.
  if (one_sided) MessengerGlobal().flush();
  sync.wait();
}

void WorkerParcels::answered(std::uint64_t quiet_token) {
  QuietWait* w = quiet_waits_.find(quiet_token);
  if (w == nullptr) return;  // its quiet() has ended (failed)
  SentTo& to = sent_to(w->dest);
  to.confirmed = std::max(to.confirmed, w->count);
  Synchronizer* sync = w->sync;
  quiet_waits_.erase(quiet_token);
  sync->notify();
}

void WorkerParcels::marker(ThreadId source, std::uint64_t count, std::uint64_t quiet_token) {
  RanFrom& from = ran_from(source);
  if (from.count >= count)
    answer(source, quiet_token);
  else
    from.waiting.push_back({count, quiet_token});
}

void WorkerParcels::count_ran(ThreadId source) {
  RanFrom& from = ran_from(source);
  ++from.count;
  if (from.waiting.empty()) return;
  // Answering sends, which may progress and run more requests (and change
  // from.waiting): take the ready markers out first.
  std::vector<Marker> ready;
  std::erase_if(from.waiting, [&](const Marker& m) {
    if (m.count > from.count) return false;
    ready.push_back(m);
    return true;
  });
  for (const Marker& m : ready) answer(source, m.token);
}

void WorkerParcels::answer(ThreadId source, std::uint64_t quiet_token) {
  try {
    rdmx::call(source, [quiet_token] { current_worker().answered(quiet_token); });
  } catch (const Error& e) {
    rdmx::log(rdmx::LogLevel::error, "process %u: could not answer the quiet() of %s: %s\n", self.process,
              name(source).c_str(), e.what());
  }
}

// ---- public pieces ----

ArchiveLease::ArchiveLease() : worker_(&current_worker()) { archive_ = static_cast<WorkerParcels*>(worker_)->take_archive(); }
ArchiveLease::~ArchiveLease() {
  if (archive_) static_cast<WorkerParcels*>(worker_)->give_archive(std::move(archive_));
}

Stats stats() { return current_worker().stats; }

ProgressHook progress_hook() noexcept {
  return {[](void*) { return rdmx::progress() != 0; }, nullptr};
}

}  // namespace rdmx::parcel

// rdmx links every program against this object file (src/CMakeLists.txt
// names this symbol as undefined): the default memory for rma_vector, which
// the initializer above installs, must be there in a program that makes no
// action, which a static library's link would otherwise leave out.
extern "C" const int rdmx_action_layer_linked = 1;
