#include "messengers.hpp"

#include <algorithm>
#include <cstdio>

#include "settings.hpp"
#include "rdmx/fabric/rma.hpp"

namespace rdmx {

MessengerOptions MessengerOptions::from_env() {
  MessengerOptions o;
  o.chunk_size = rdmx_invoke_settings.number("RDMX_CHUNK_SIZE");
  o.chunks = static_cast<std::uint32_t>(rdmx_invoke_settings.number("RDMX_CHUNKS"));  // at most 127
  o.max_chunks = static_cast<std::uint32_t>(rdmx_invoke_settings.number("RDMX_MAX_CHUNKS"));
  o.publish_bytes = rdmx_invoke_settings.number("RDMX_PUBLISH_BYTES");
  o.mapped_chunks = rdmx_invoke_settings.flag("RDMX_MAPPED_CHUNKS");
  o.ring_budget = rdmx_invoke_settings.number("RDMX_RING_BUDGET");
  if (o.chunk_size < 4096 || o.chunk_size % invoke::wire::record_align != 0 || o.chunk_size > invoke::wire::max_end)
    throw Error(Errc::invalid_argument, "RDMX_CHUNK_SIZE must be a multiple of 8 between 4 KiB and 2 GiB, got " +
                                            std::to_string(o.chunk_size));
  if (o.chunks == 0 || o.max_chunks < o.chunks || o.max_chunks > invoke::wire::max_grow)
    throw Error(Errc::invalid_argument, "messenger chunks: need 1 <= RDMX_CHUNKS (" + std::to_string(o.chunks) +
                                            ") <= RDMX_MAX_CHUNKS (" + std::to_string(o.max_chunks) + ") <= " +
                                            std::to_string(invoke::wire::max_grow));
  return o;
}

namespace invoke {

void wait_until_free(transfer::Transmitter& tx, std::uint32_t process, const transfer::EpochTag& tag) {
  if (tag.is_free()) [[likely]]
    return;
  if (tag.value >= tag.epoch->current()) tx.start_flush();  // its epoch is still open: close it
  // Only the worker, never calls: the caller is in the middle of an update.
  // A peer watched by pid (shared memory) fails without its endpoint knowing.
  const Job& job = Job::current();
  while (!tag.is_free()) {
    tx.endpoint().check_alive();
    if (job.process_failed(process)) throw Error(Errc::peer_failed, "process " + std::to_string(process) + " has failed");
    tx.endpoint().worker().progress();
  }
}

std::uint64_t* WordSlots::next(transfer::Transmitter& tx, std::uint32_t process) {
  last_ = (last_ + 1) % count;
  wait_until_free(tx, process, tags_[last_]);
  return &words_[last_];
}

// ---- WorkerState ----

WorkerState::WorkerState(Messengers& layer, Job& j, std::uint32_t worker, const MessengerOptions& opts)
    : job(j), self{j.rank(), worker}, options(opts), layer_(layer), owed_shared_(j.helpers_per_process() != 0),
      failures_handled_(j.size(), false), workers_(j.workers_per_process()) {
  messengers_.resize(std::size_t{j.size()} * j.workers_per_process());
  spare_owed_.reserve(64);
}

void WorkerState::owe(std::uint32_t process, Synchronizer* sync, std::int64_t n) {
  const auto lock = lock_owed();
  const std::pair key{process, sync};
  if (auto it = owed_.find(key); it != owed_.end()) {
    it->second += n;
    return;
  }
  if (spare_owed_.empty()) {
    owed_.emplace(key, n);
    return;
  }
  auto node = std::move(spare_owed_.back());
  spare_owed_.pop_back();
  node.key() = key;
  node.mapped() = n;
  owed_.insert(std::move(node));
}

bool WorkerState::settle(std::uint32_t process, Synchronizer* sync) {
  const auto lock = lock_owed();
  auto it = owed_.find({process, sync});
  if (it == owed_.end()) it = owed_.find({any_process, sync});
  if (it == owed_.end()) return false;
  if (--it->second == 0) {
    if (spare_owed_.size() < spare_owed_.capacity())
      spare_owed_.push_back(owed_.extract(it));
    else
      owed_.erase(it);
  }
  return true;
}

std::string WorkerState::failure_of(std::uint32_t process) const { return layer_.failure_of(process); }

void WorkerState::check_failures() {
  const std::uint64_t failures = layer_.failures();
  if (failures == failures_seen_) [[likely]]
    return;
  failures_seen_ = failures;
  for (std::uint32_t p = 0; p < job.size(); ++p) {
    if (failures_handled_[p] || !job.process_failed(p)) continue;
    failures_handled_[p] = true;
    // What p owes, and what every broadcast (whose tree p was part of) still
    // waits for, fails now. Their late notifications, should any come from
    // live processes, find nothing owed and are dropped.
    std::vector<std::pair<Synchronizer*, std::int64_t>> failed;
    {
      const auto lock = lock_owed();
      for (auto it = owed_.begin(); it != owed_.end();) {
        if (it->first.first != p && it->first.first != any_process) {
          ++it;
          continue;
        }
        failed.emplace_back(it->first.second, it->second);
        it = owed_.erase(it);
      }
    }
    const std::string why = failure_of(p) + "; one-sided calls waiting on it fail";
    for (auto [sync, n] : failed) {
      sync->fail(Errc::peer_failed, why);
      while (--n > 0) sync->notify();
    }
  }
  // call() would go on writing into the dead process's chunk unseen.
  if (lane.holder != nullptr && static_cast<Messenger*>(lane.holder)->dead())
    static_cast<Messenger*>(lane.holder)->close_lane();
}

WorkerState::~WorkerState() = default;

Messenger& WorkerState::messenger(ThreadId dest) {
  // Known destinations are checked once, when their messenger is made.
  const std::size_t index = std::size_t{dest.process} * workers_ + dest.thread;
  if (dest.thread < workers_ && index < messengers_.size() && messengers_[index]) [[likely]]
    return *messengers_[index];
  job.check_destination(dest);
  if (dest.is_service())
    throw Error(Errc::invalid_argument, "one-sided calls go to worker threads; call the service thread with rdmx::call");
  auto& m = messengers_[index];
  m = std::make_unique<Messenger>(*this, dest);
  return *m;
}

std::vector<ThreadId> WorkerState::messenger_destinations() const {
  std::vector<ThreadId> out;
  for (const auto& m : messengers_)
    if (m) out.push_back(m->destination());
  return out;
}

void WorkerState::announce(Announcement a) {
  {
    std::lock_guard lock(announce_mutex_);
    announcements_.push_back(std::move(a));
  }
  announced_.store(true, std::memory_order_release);
}

void WorkerState::run_relayed(WorkerState& runner, ThreadId source, std::span<std::byte> record) {
  // Only ever the consuming thread (consumer_of) touches the relays, as a
  // ring's channel is only ever polled by one.
  auto& channel = relays_[std::uint64_t{source.process} << 32 | source.thread];
  if (!channel) channel = std::make_unique<Channel>(*this, source, RemoteLocator{}, std::vector<Channel::Chunk>{});
  channel->run_relayed(runner, record);
}

bool WorkerState::consumes_for(std::uint32_t thread) const noexcept {
  if (thread == self.thread) return true;
  return std::any_of(serves_.begin(), serves_.end(), [&](const WorkerState* w) { return w->self.thread == thread; });
}

void WorkerState::take_announcements() {
  std::deque<Announcement> taken;
  {
    std::lock_guard lock(announce_mutex_);
    taken.swap(announcements_);
    announced_.store(false, std::memory_order_relaxed);
  }
  for (auto& a : taken) {
    if (a.first) {
      channels_.push_back(std::make_unique<Channel>(*this, a.source, a.feedback, std::move(a.chunks)));
      continue;
    }
    for (auto& c : channels_)
      if (c->source() == a.source) c->add_pending(a.chunks);
  }
}

std::size_t WorkerState::poll() {
  if (deferred_error_) [[unlikely]] {
    const Error e = *deferred_error_;
    deferred_error_.reset();
    throw e;
  }
  check_failures();
  std::size_t ran = served_ ? 0 : consume(*this);
  for (WorkerState* worker : serves_) ran += worker->consume(*this);
  publish_all();
  return ran;
}

bool WorkerState::settled() const {
  for (const auto& c : channels_)
    if (c->reading()) return false;
  return true;
}

std::size_t WorkerState::consume(WorkerState& runner) {
  // Nested progress (a call that waits) re-enters here; channels tolerate
  // it, but taking announcements while iterating the channel list does not.
  std::size_t ran = 0;
  if (!polling_) {
    polling_ = true;
    struct Reset {
      bool& flag;
      ~Reset() { flag = false; }
    } reset{polling_};
    if (announced_.load(std::memory_order_acquire)) take_announcements();
  }
  for (std::size_t i = 0; i < channels_.size(); ++i) ran += channels_[i]->poll(runner, 1024);
  return ran;
}

void WorkerState::publish_all() {
  // What call() wrote into the lane is not listed: its holder checks.
  if (lane.holder != nullptr) static_cast<Messenger*>(lane.holder)->publish_lane();
  if (pending_publish_.empty()) return;
  // Each listed messenger publishes once; one that cannot publish everything
  // (its ring is full) lists itself again for the next round.
  std::vector<Messenger*> list;
  list.swap(pending_publish_);
  for (Messenger* m : list) m->listed = false;
  for (Messenger* m : list) m->publish();
  // Hand the capacity back (unless a nested round listed some meanwhile):
  // a list that starts empty every round allocated once per call.
  if (pending_publish_.empty()) {
    list.clear();
    pending_publish_.swap(list);
  }
}

void WorkerState::flush() {
  publish_all();
  if (relaying_.empty()) return;
  for (Messenger* m : relaying_) m->drain_relayed_all();
  fabric::flush_sends();
}

// ---- Messengers ----

Messengers::Messengers(Job& job)
    : options_(MessengerOptions::from_env()), mapped_(std::make_unique<std::atomic<std::uint8_t>[]>(job.size())) {
  for (std::uint32_t s = 0; s < job.workers_per_process(); ++s) workers_.push_back(std::make_unique<WorkerState>(*this, job, s, options_));
  // A channel is only ever consumed by one thread, so no consumer-side state is shared.
  for (std::uint32_t w = 0; job.helpers_per_process() != 0 && w < job.threads_per_process(); ++w)
    workers_[consumer_of(job, w)]->serve(*workers_[w]);
}

std::uint32_t consumer_of(const Job& job, std::uint32_t thread) {
  const std::uint32_t threads = job.threads_per_process(), helpers = job.helpers_per_process();
  return helpers != 0 && thread < threads ? threads + thread % helpers : thread;
}

std::size_t Messengers::poll(std::uint32_t worker) { return workers_[worker]->poll(); }

std::uint32_t Messengers::charge_chunks(std::uint32_t wanted, std::uint32_t at_least, std::size_t bytes) {
  std::size_t used = ring_bytes_.load(std::memory_order_relaxed);
  for (;;) {
    const std::size_t room = options_.ring_budget > used ? options_.ring_budget - used : 0;
    const auto fit = static_cast<std::uint32_t>(std::min<std::size_t>(wanted, room / bytes));
    if (fit == 0 || fit < at_least) return 0;
    if (ring_bytes_.compare_exchange_weak(used, used + fit * bytes, std::memory_order_relaxed)) return fit;
  }
}

void Messengers::flush(std::uint32_t worker) { workers_[worker]->publish_all(); }

void Messengers::quiet(std::uint32_t worker) {
  // One-sided calls from one thread to another run in the order they were
  // made, so a marker with when_run after everything else, one per
  // messenger, runs last. The markers sent refer to `sync`: should a later
  // one fail to go, they are still waited for before it goes.
  Synchronizer sync;
  MessengerGlobal messenger;
  try {
    for (const ThreadId dest : workers_[worker]->messenger_destinations())
      messenger.call(dest, [] {}, when_run(sync));
  } catch (const Error&) {
    try {
      messenger.flush();
      sync.wait();
    } catch (const Error&) {  // the first error is the one to report
    }
    throw;
  }
  messenger.flush();
  sync.wait();
}

void Messengers::process_failed(std::uint32_t process, const std::string& why) {
  {
    std::lock_guard lock(failures_mutex_);
    why_[process] = why;
  }
  failures_.fetch_add(1, std::memory_order_acq_rel);
}

std::string Messengers::failure_of(std::uint32_t process) const {
  std::lock_guard lock(failures_mutex_);
  auto it = why_.find(process);
  return it != why_.end() ? it->second : "process " + std::to_string(process) + " has failed";
}

WorkerState& Messengers::current() {
  void** word = fabric::acting_word<WorkerState>();
  if (word != nullptr && *word != nullptr) [[likely]]
    return *static_cast<WorkerState*>(*word);
  if (word == nullptr || this_thread().is_service())
    throw Error(Errc::invalid_argument,
                "one-sided calls are made by worker threads (Job::run); other threads use the send-based rdmx::call");
  WorkerState& state = fabric::layer<Messengers>().worker(this_thread().thread);
  *word = &state;
  *fabric::acting_word<detail::Lane>() = &state.lane;
  return state;
}

namespace detail {

bool send(const fabric::Outgoing& call, const Mode& mode, const BufferTransfer* buffer) {
  WorkerState& state = Messengers::current();
  return state.messenger(call.destination).append(call, mode, buffer);
}

bool broadcast(const fabric::Outgoing& call, const Mode& mode, const BufferTransfer* buffer,
               std::span<const RemoteLocator> dest_buffers) {
  WorkerState& state = Messengers::current();
  if (buffer != nullptr && buffer->where.process != state.self.process)
    throw Error(Errc::invalid_argument, "broadcast_buffer: the buffer to read must be in the caller's process");
  const bool consumed = call.sync != nullptr && call.notify == fabric::Notify::consumed;
  Forward forward{state.self, consumed ? reinterpret_cast<std::uint64_t>(call.sync) : 0};
  // Into destination buffers: the table of every thread's buffer travels
  // down the tree with the call, checked here once.
  std::vector<wire::Target> targets;
  BufferTransfer own{BufferTransfer::written, {}};
  if (!dest_buffers.empty()) {
    const std::uint32_t threads = state.job.threads_per_process();
    const std::size_t n = std::size_t{state.job.size()} * threads;
    if (dest_buffers.size() != n)
      throw Error(Errc::invalid_argument, "broadcast_buffer: " + std::to_string(dest_buffers.size()) +
                                              " destination buffers given, the job has " + std::to_string(n) + " threads");
    targets.resize(n);
    for (std::size_t i = 0; i < n; ++i) {
      const RemoteLocator& d = dest_buffers[i];
      if (d.process != i / threads || d.length < call.data.size())
        throw Error(Errc::invalid_argument,
                    "broadcast_buffer: destination buffer " + std::to_string(i) + " (" + std::to_string(d.length) +
                        " bytes in process " + std::to_string(d.process) + ") must hold " +
                        std::to_string(call.data.size()) + " bytes in process " + std::to_string(i / threads) +
                        " (entry i belongs to thread i % threads of process i / threads)");
      targets[i] = wire::Target{d.region, 0, d.offset};
    }
    forward.targets = targets;
    own.where = dest_buffers[std::size_t{state.self.process} * threads + state.self.thread];
    buffer = &own;
  }
  // The root sends the call to itself: running it there fans it out.
  fabric::Outgoing o = call;
  o.destination = state.self;
  // when_sent into destination buffers: when the root's own buffer is
  // written, `call.data` is free (the tree forwards from the buffers).
  if (dest_buffers.empty() || consumed) o.sync = nullptr;
  if (!state.messenger(state.self).append(o, mode, buffer, &forward)) return false;
  if (consumed) {
    const auto threads = static_cast<std::int64_t>(state.job.size()) * state.job.threads_per_process();
    call.sync->add(threads);
    state.owe(WorkerState::any_process, call.sync, threads);
  }
  return true;
}

std::size_t process_calls() {
  // The fabric's progress polls the layer too (and runs send-based calls).
  return rdmx::progress();
}

void flush() { Messengers::current().flush(); }

void publish_lane() {
  Lane* lane = acting_lane();
  if (lane != nullptr && lane->holder != nullptr) static_cast<Messenger*>(lane->holder)->publish_lane_now();
}

}  // namespace detail
}  // namespace invoke
}  // namespace rdmx
