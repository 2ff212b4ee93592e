// Private to the action layer: the marker protocol behind rdmx::quiet() for
// actions. Actions travel unordered (an eager parcel overtakes a pulled
// one, and runs before it has landed), so no marker can follow them in
// order. Instead a thread counts the requests it sent to each destination
// thread, a destination counts those it has run from each source, and
// quiet() sends each destination with requests not yet confirmed one marker
// "I sent you n", which it answers once it has run n from that source.
// One per worker thread (in its WorkerParcels), used by that thread only.
#pragma once
#include <cstdint>
#include <unordered_map>
#include <utility>
#include <vector>

#include "rdmx/core/token_table.hpp"
#include "rdmx/fabric/identity.hpp"
#include "rdmx/fabric/job.hpp"
#include "rdmx/fabric/synchronizer.hpp"

namespace rdmx::parcel {

class QuietMarkers {
 public:
  QuietMarkers(Job& job, ThreadId self) : job_(job), self_(self) {}

  // A request went to `dest` (counted once it went: quiet() waits for as many to run).
  void count_request(ThreadId dest) { ++sent_to(dest).sent; }
  // A request from `source` is done with here: it ran, or it failed.
  void count_ran(ThreadId source);
  // Returns once every request this thread sent is known to have run
  // (throws peer_failed when a destination failed first).
  void quiet();
  // The destination's side: `source` sent `count` requests; answer once they ran.
  void marker(ThreadId source, std::uint64_t count, std::uint64_t quiet_token);
  // The answer to one of this thread's markers.
  void answered(std::uint64_t quiet_token);
  // Whether a quiet() of this thread waits for answers.
  bool waiting() const noexcept { return waits_.in_use() != 0; }
  // Ends the waits for answers from processes that have failed.
  void fail_waits_on_failed();

 private:
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

  void answer(ThreadId source, std::uint64_t quiet_token);
  static std::uint64_t key_of(ThreadId t) { return (std::uint64_t{t.process} << 32) | t.thread; }
  static ThreadId thread_of(std::uint64_t key) {
    return {static_cast<std::uint32_t>(key >> 32), static_cast<std::uint32_t>(key)};
  }
  // Counted on every request: the last peer's entry is kept at hand, so a
  // run of requests to one peer costs no hash lookup per request and side
  // (docs/results/latency.md). Entries are never erased, so the pointers
  // stay valid.
  SentTo& sent_to(ThreadId dest) { return cached(sent_, last_sent_, dest); }
  RanFrom& ran_from(ThreadId source) { return cached(ran_, last_ran_, source); }
  template <class V>
  static V& cached(std::unordered_map<std::uint64_t, V>& map, std::pair<std::uint64_t, V*>& last, ThreadId t) {
    const std::uint64_t key = key_of(t);
    if (last.second == nullptr || last.first != key) last = {key, &map[key]};
    return *last.second;
  }

  Job& job_;
  ThreadId self_;
  std::unordered_map<std::uint64_t, SentTo> sent_;  // by destination thread (key_of)
  std::unordered_map<std::uint64_t, RanFrom> ran_;  // by source thread (key_of)
  std::pair<std::uint64_t, SentTo*> last_sent_{0, nullptr};
  std::pair<std::uint64_t, RanFrom*> last_ran_{0, nullptr};
  TokenTable<QuietWait> waits_;
};

}  // namespace rdmx::parcel
