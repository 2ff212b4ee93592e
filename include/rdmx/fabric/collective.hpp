// Collectives of worker threads, for ending a phase inside Job::run: every
// worker thread of every process calls the same collectives in the same
// order, and each returns once all have contributed. Waiting serves the
// calls addressed to the waiting thread, so a peer blocked on one of them
// cannot deadlock the collective; a failed process makes it throw
// Errc::peer_failed, a process that left the job (~Job) without entering it
// Errc::shut_down.
//
//   job.run([&](rdmx::ThreadId me) {
//     ... calls ...
//     rdmx::barrier();                                          // every worker thread is here
//     double total = rdmx::allreduce(local, rdmx::op::sum{});   // every thread gets the sum
//     auto best = rdmx::allreduce(mine, [](Best a, Best b) { return a.score < b.score ? b : a; });
//     Config c = rdmx::broadcast_value(config, rdmx::ThreadId{0, 0});
//   });
//
// A barrier orders execution, not delivery: calls sent before it may still
// be on their way. To end a phase, wait for what was sent (rdmx::quiet() in
// rdmx/fabric/quiet.hpp, or when_run and Synchronizer::wait,
// futures), then meet at the barrier.
//
// Threads that call different collectives (another kind, type or size),
// and a thread that has left Job::run's function (returned, or thrown)
// while the other threads of its process enter one, fail that collective
// on every thread once all have come to it, with an error that says who
// called what; the next collective starts in step.
//
// Values are trivially copyable. Contributions are combined at one root
// (process 0's service thread) in arrival order, so every thread gets the
// same result; for floating point that order may differ between runs.
// Operations: rdmx::op::sum, min, max, or any stateless callable
// T(T, T), a captureless lambda for instance.
#pragma once
#include <algorithm>
#include <array>
#include <cstddef>
#include <cstring>
#include <span>
#include <type_traits>

#include "rdmx/fabric/call.hpp"
#include "rdmx/fabric/identity.hpp"
#include "rdmx/fabric/job.hpp"

namespace rdmx {

namespace op {
struct sum {
  template <class T>
  T operator()(const T& a, const T& b) const { return a + b; }
};
struct min {
  template <class T>
  T operator()(const T& a, const T& b) const { return std::min(a, b); }
};
struct max {
  template <class T>
  T operator()(const T& a, const T& b) const { return std::max(a, b); }
};
}  // namespace op

namespace fabric::detail {
// Values travel inside the calls, so they are bounded.
inline constexpr std::size_t max_collective_value = 256;

// One collective of the calling worker thread: its sequence number (every
// worker counts its own; all count alike), how many workers take part, and
// who calls what ("allreduce<8 bytes>"), for the error if they disagree.
struct Ticket {
  std::uint64_t epoch;
  std::uint32_t participants;
  ThreadId from;
  std::array<char, 40> what;
};
// `bytes`: the size of the value the caller contributes (0: none).
Ticket next_collective(const char* what, std::size_t bytes);
// Folds `value` into the accumulator `acc`, both a T's bytes.
using Combine = void (*)(std::byte* acc, const std::byte* value);
// At the root (process 0's service thread): folds `value` into collective
// `epoch`; the last contribution releases every process with the result.
void contribute(const Ticket& ticket, std::span<const std::byte> value, Combine combine);
// Waits, serving calls, until collective `ticket` is released on this
// process, and copies its result over `result`.
void await_collective(const Ticket& ticket, std::span<std::byte> result, const char* what);

template <class T, class Op>
void combine(std::byte* acc, const std::byte* value) {
  T a, b;
  std::memcpy(&a, acc, sizeof(T));
  std::memcpy(&b, value, sizeof(T));
  const T r = Op{}(a, b);
  std::memcpy(acc, &r, sizeof(T));
}

// What a worker sends the root: a call the root runs.
template <class T, class Op>
struct Contribution {
  Ticket ticket;
  T value;
  void operator()() const { contribute(ticket, std::as_bytes(std::span(&value, 1)), &combine<T, Op>); }
};

// `shown`: the value's size as the caller sees it, for a mismatch's error.
template <class T, class Op>
T all_combine(T value, const char* what, std::size_t shown = sizeof(T)) {
  static_assert(std::is_trivially_copyable_v<T>, "rdmx: collectives combine trivially copyable values");
  static_assert(sizeof(T) <= max_collective_value,
                "rdmx: a collective's value is at most 256 bytes (reduce larger data with calls)");
  static_assert(std::is_empty_v<Op> && std::is_default_constructible_v<Op>,
                "rdmx: a collective's operation must be stateless (rdmx::op::sum, min, max, or a captureless lambda)");
  static_assert(std::is_convertible_v<std::invoke_result_t<const Op&, const T&, const T&>, T>,
                "rdmx: a collective's operation must take two values and return one of the same type");
  const Ticket ticket = next_collective(what, shown);
  call(ThreadId{0, service_thread}, Contribution<T, Op>{ticket, value});
  await_collective(ticket, std::as_writable_bytes(std::span(&value, 1)), what);
  return value;
}

// broadcast_value: only the root's contribution is kept.
template <class T>
struct Offered {
  T value;
  bool from_root;
};
struct KeepRoot {
  template <class T>
  Offered<T> operator()(const Offered<T>& a, const Offered<T>& b) const { return a.from_root ? a : b; }
};
}  // namespace fabric::detail

// Every worker thread of the job waits here until all have arrived.
inline void barrier() { fabric::detail::all_combine<unsigned char, op::max>(0, "barrier", 0); }

// Every worker thread contributes `value`; each gets op folded over all of them.
template <class T, class Op>
T allreduce(const T& value, Op) {
  return fabric::detail::all_combine<T, Op>(value, "allreduce");
}

// Every worker thread gets `root`'s value (the others' `value` is ignored).
template <class T>
T broadcast_value(const T& value, ThreadId root) {
  using Offer = fabric::detail::Offered<T>;
  const Job& job = Job::current();
  if (root.process >= job.size() || root.thread >= job.threads_per_process())
    throw Error(Errc::invalid_argument, "broadcast_value: the root " + to_string(root) + " is not a worker thread of the job");
  const ThreadId me = this_thread();
  const Offer mine{value, me.process == root.process && me.thread == root.thread};
  return fabric::detail::all_combine<Offer, fabric::detail::KeepRoot>(mine, "broadcast_value", sizeof(T)).value;
}

}  // namespace rdmx
