// The process barrier: release, exchange of signatures (by dissemination
// where one-sided operations are native, by messages elsewhere), acquire;
// and the meeting of a process's threads in barrier (every worker thread).
#include "engine.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "rdmx/core/backoff.hpp"
#include "rdmx/core/error.hpp"
#include "rdmx/fabric/call.hpp"
#include "rdmx/fabric/job.hpp"
#include "rdmx/fabric/layer.hpp"
#include "rdmx/fabric/rma.hpp"
#include "rdmx/transfer/transmitter.hpp"

namespace rdmx::dsm {

// Two ways to exchange signatures, chosen once for the job (disseminate_):
// - Where every process reaches every other with native one-sided
//   operations (shared memory, RDMA), a process that released or acquired
//   something puts its signature into every other process's metadata, in
//   its place for this barrier's parity and sender, and flushes; then all meet in a dissemination barrier
//   (round k: a record to process rank + 2^k, wait for the one from
//   rank - 2^k), log2(P) rounds of one put each instead of P - 1, whose
//   records carry the largest logical clock seen so far. A signature
//   from this barrier was put before its sender's first round, so before
//   the rounds end here; an older one means the sender had nothing to say.
// - Otherwise (TCP, where a put is a round trip through the peer's
//   service thread) every process sends every other its signature as one
//   message, whose handler raises the sender's flag here, and waits for
//   every flag.
// Two sets of signatures, by parity, suffice: nobody can start barrier
// e+2, and overwrite e's set, before every process has entered e+1, which
// it does only after reading e's signatures. Flags and records are per parity too: a
// signature sent as a message may go to either of two threads (by its
// size), so e+2's may be delivered before e+1's, and must not raise the
// flag e+1's waiter reads.
void Engine::process_barrier(bool alone) {
  counters_.barriers.fetch_add(1, std::memory_order_relaxed);
  if (local()) {
    // Nothing is ever dirty or stale (the app view stays read-write); the
    // threads met in barrier().
    ++epoch_;
    return;
  }
  // No barrier completes without every process: fail at once, before
  // anything goes to a failed one.
  throw_if_failed(every_peer, [] { return std::string("dsm barrier"); });
  release_all();
  std::vector<std::byte> mine;
  {
    std::lock_guard<std::mutex> hold(history_mutex_);
    mine = history_.encode(epoch_, now());
  }
  const std::uint64_t target = epoch_ + 1;
  const std::uint64_t parity = target % 2;
  if (disseminate_) {
    advance(disseminate(mine, target));
  } else {
    // One message per peer: it goes to worker thread 0, which runs every
    // process's barrier and receives it as it waits, if the receive needs
    // no allocation: the message may arrive while that thread serves a
    // fault, which may have interrupted malloc. A larger one goes to the
    // service thread, which wakes up for it (slower).
    const std::uint32_t receiver = mine.size() <= fabric::receive_reserved_bytes ? 0 : service_thread;
    for (std::uint32_t q = 0; q < processes_; ++q) {
      if (q == rank_) continue;
      const std::uint32_t sender = rank_;
      call_buffer(ThreadId{q, receiver},
                  [sender, target](std::span<std::byte> signature) { deliver_barrier(sender, target, signature); },
                  mine);
    }
    for (std::uint32_t p = 0; p < processes_; ++p)
      if (p != rank_) await_flag(meta_.barrier_flag_here(parity, p), target, p);
  }
  std::vector<DecodedSignature> received;
  for (std::uint32_t p = 0; p < processes_; ++p) {
    if (p == rank_) continue;
    const std::byte* signature = meta_.barrier_signature_here(parity, p);
    SignatureHeader header;
    std::memcpy(&header, signature, sizeof header);
    if (header.count > config_.notices)
      throw Error(Errc::protocol, "dsm: process " + std::to_string(p) + " sent a malformed barrier signature");
    if (header.epoch + 1 != target) {
      if (disseminate_) continue;  // nothing from p this time
      // Every process passes the same barriers.
      throw Error(Errc::protocol, "dsm: process " + std::to_string(p) + "'s signature for barrier " +
                                      std::to_string(target) + " is from barrier " + std::to_string(header.epoch + 1));
    }
    received.push_back(decode({signature, Signature::encoded_size(header.count)}, blocks_, processes_));
  }
  acquire(received, alone);
  invalidator_->acquired();
  // Everything acquired here every process acquired too: no need to pass it on.
  std::lock_guard<std::mutex> hold(history_mutex_);
  history_.clear();
  ++epoch_;
}

std::uint64_t Engine::disseminate(std::span<const std::byte> signature, std::uint64_t target) {
  const std::uint64_t parity = target % 2;
  SignatureHeader header;
  std::memcpy(&header, signature.data(), sizeof header);
  if (header.count != 0 || header.overflowed != 0) {
    for (std::uint32_t q = 0; q < processes_; ++q)
      if (q != rank_) post_put(signature.data(), meta_.barrier_signature(q, parity, rank_, signature.size()));
    for (std::uint32_t q = 0; q < processes_; ++q)
      if (q != rank_) flush(q);
  }
  std::uint64_t clock = header.time;
  std::uint32_t round = 0;
  for (std::uint32_t distance = 1; distance < processes_; distance *= 2, ++round) {
    const std::uint32_t to = (rank_ + distance) % processes_;
    const std::uint64_t sent = clock;
    put(&sent, meta_.round_word(to, parity, round, 0)).get();
    transmitter(to).fence();  // the clock lands before the flag says it is there
    put(&target, meta_.round_word(to, parity, round, 1)).get();
    std::uint64_t* record = meta_.round_record_here(parity, round);
    await_flag(record[1], target, every_peer);
    clock = std::max(clock, std::atomic_ref<std::uint64_t>(record[0]).load(std::memory_order_relaxed));
  }
  return clock;
}

// A barrier signature that came as a message: stored where a put would have
// put it, then the flag raised, as the puts' flush orders them. Runs on the
// service thread or worker thread 0. One too large to be a signature is
// stored as a header that says so, which process_barrier reports.
void Engine::deliver_barrier(std::uint32_t sender, std::uint64_t target, std::span<const std::byte> signature) {
  Engine* engine = fabric::layer<Layer>().engine();
  if (engine == nullptr || sender >= engine->processes_) return;  // the Space is gone; nobody waits
  std::byte* at = engine->meta_.barrier_signature_here(target % 2, sender);
  if (signature.size() <= engine->meta_.signature_bytes() && signature.size() >= sizeof(SignatureHeader)) {
    std::memcpy(at, signature.data(), signature.size());
  } else {
    SignatureHeader malformed{};
    malformed.count = ~0u;
    std::memcpy(at, &malformed, sizeof malformed);
  }
  std::atomic_ref<std::uint64_t>(engine->meta_.barrier_flag_here(target % 2, sender)).store(target, std::memory_order_release);
}

// Waits until a flag `process` (every_peer: any peer) raises here reaches
// `target`. A process that died never raises it: the wait fails as soon as
// the fabric reports it failed, and, for a death the fabric has not seen,
// `process` is asked every few milliseconds whether it is alive (every
// peer in a dissemination round, which hears from one peer only, which may
// itself wait on the dead one).
void Engine::await_flag(std::uint64_t& word, std::uint64_t target, std::uint32_t process) {
  std::atomic_ref<std::uint64_t> flag(word);
  Backoff backoff;
  auto last_check = std::chrono::steady_clock::now();
  while (flag.load(std::memory_order_acquire) < target) {
    throw_if_failed(process, [] { return std::string("dsm barrier"); });
    throw_if_ended(target);
    backoff(progress() != 0);
    const auto t = std::chrono::steady_clock::now();
    if (t - last_check < std::chrono::milliseconds(5)) continue;
    last_check = t;
    probe_peers("dsm barrier", process);
  }
}

void Engine::barrier(bool every_thread) {
  const std::uint32_t threads = job_.threads_per_process();
  if (!every_thread || threads <= 1) {
    // Peers send their signatures to worker thread 0 (process_barrier): the
    // barrier must run there, or on the main thread outside Job::run.
    if (const ThreadId me = this_thread(); me.is_service() || me.thread != 0)
      throw Error(Errc::invalid_argument, std::string(every_thread ? "dsm::barrier" : "dsm::process_barrier") + ": called by " + to_string(me) +
                                              "; only worker thread 0 (or the main thread outside Job::run) may call it, "
                                              "or every worker thread dsm::barrier");
    process_barrier(threads <= 1);
    return;
  }
  // Worker thread 0 runs the process's barrier once the others have arrived
  // (Job::allgather belongs to it); the others wait for it.
  std::unique_lock<std::mutex> hold(meet_mutex_);
  const std::uint64_t generation = generation_;
  const ThreadId me = this_thread();
  if (me.is_service() || me.thread >= threads)
    throw Error(Errc::invalid_argument, "dsm::barrier: called by " + to_string(me) + ", not a worker thread");
  if (me.thread != 0) {
    ++arrived_;
    meet_cv_.notify_all();
    meet_cv_.wait(hold, [&] { return generation_ != generation; });
    if (meet_error_) std::rethrow_exception(meet_error_);
    return;
  }
  meet_cv_.wait(hold, [&] { return arrived_ == threads - 1; });
  arrived_ = 0;
  meet_error_ = nullptr;
  hold.unlock();
  std::exception_ptr error;
  try {
    process_barrier(true);
  } catch (...) {
    error = std::current_exception();
  }
  hold.lock();
  meet_error_ = error;
  ++generation_;
  meet_cv_.notify_all();
  if (error) std::rethrow_exception(error);
}

}  // namespace rdmx::dsm
