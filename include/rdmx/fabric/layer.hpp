// The fabric's extension point: how a layer above it (invoke, far memory,
// distributed shared memory) keeps per-process state that the fabric drives,
// without the fabric knowing the layer. Waiting anywhere in rdmx polls every
// layer, rdmx::quiet() quiets each, leaving a job flushes and settles them,
// and a failed process is reported to each, so a layer's traffic is served,
// awaited, drained and failed like the fabric's own.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>

#include "rdmx/fabric/job.hpp"

namespace rdmx::fabric {

// One instance per process and layer type, made by layer<L>() on first use
// and destroyed when the job has been left (every process gone), before the
// arenas its memory may live in. `worker` below is a worker thread's index
// in this process: 0 .. threads + helpers - 1.
class Layer {
 public:
  virtual ~Layer() = default;
  // The thread acting as `worker` progresses: handle what arrived for it and
  // return how many things ran (0: idle, so waits may back off).
  virtual std::size_t poll(std::uint32_t /*worker*/) { return 0; }
  // This process starts leaving the job (~Job), before its peers are told:
  // stop the layer's own threads (they must not send while the job ends,
  // nor touch its memory after), and say so if the program should have
  // ended something of the layer's first. Called once, by the thread
  // destroying the Job.
  virtual void leaving() {}
  // Leaving the job, on behalf of `worker`: make what it sent visible to peers.
  virtual void flush(std::uint32_t /*worker*/) {}
  // Leaving the job: false while something `worker` received still waits on
  // the network before it can run; the leave rounds go on meanwhile.
  virtual bool settled(std::uint32_t /*worker*/) const { return true; }
  // rdmx::quiet() on `worker` (fabric/quiet.hpp), on the thread acting as
  // it: return once everything it issued through this layer so far has run
  // at its destinations, progressing while it waits; throw Errc::peer_failed
  // naming the process when a destination process fails first.
  virtual void quiet(std::uint32_t /*worker*/) {}
  // `process` failed (`why` names it). Called once per process, from
  // whichever thread learnt it: fail what this layer waits for from it, so
  // that nothing waits on a dead process for ever.
  virtual void process_failed(std::uint32_t /*process*/, const std::string& /*why*/) {}
};

namespace detail {
Layer& layer(Job& job, const void* key, std::unique_ptr<Layer> (*make)(Job&));
template <class L>
inline const char layer_key = 0;
// Words kept per worker for the layers (acting_word): the calling thread's
// worker's, nullptr when it acts as none.
extern thread_local constinit void** acting_words;
std::size_t word_index(const void* key);
template <class T>
inline const std::size_t word_of = word_index(&layer_key<T>);
}  // namespace detail

// The process's instance of L, constructed as L(job) on first use by any
// thread. The lookup takes no lock; construction does, so L's constructor
// must not wait for another thread of this process.
template <class L>
L& layer(Job& job = Job::current()) {
  static_assert(std::is_base_of_v<Layer, L>, "a fabric layer derives from rdmx::fabric::Layer");
  return static_cast<L&>(detail::layer(job, &detail::layer_key<L>,
                                       [](Job& j) -> std::unique_ptr<Layer> { return std::make_unique<L>(j); }));
}

// One pass of a layer's own wait outside Job::run (a far-memory server
// waiting for its clients): handles what arrived for the calling thread and
// runs the calls of every worker no thread acts as, as Job::barrier's wait
// does, so that a peer blocked on a call to a thread that has left Job::run
// is answered. Returns how many things ran (0: idle, so the wait may back off).
std::size_t serve_while_waiting(Job& job = Job::current());

// A word of per-worker state named by the type T (one word per T and
// worker, null until the layer sets it), for fast paths: it belongs to the
// worker the calling thread acts as (its own thread, a helper running its
// calls, or the thread standing in for it while leaving), so it follows the
// worker from one OS thread to another. nullptr when the calling thread acts
// as no worker. The word dies with the job.
template <class T>
inline void** acting_word() noexcept {
  void** words = detail::acting_words;
  return words == nullptr ? nullptr : words + detail::word_of<T>;
}

}  // namespace rdmx::fabric
