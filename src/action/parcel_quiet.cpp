// quiet()'s markers for actions (parcel_quiet.hpp): the sender's counts and
// markers, the destination's counts and answers.
#include "parcel_quiet.hpp"

#include <algorithm>
#include <string>

#include "rdmx/core/error.hpp"
#include "rdmx/core/log.hpp"
#include "rdmx/fabric/call.hpp"
#include "rdmx/invoke/messenger.hpp"
#include "parcel_layer.hpp"

namespace rdmx::parcel {

void QuietMarkers::quiet() {
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
  } forget{waits_, waits};
  // Listed first: sending may progress, and what runs meanwhile may send more.
  std::vector<std::pair<ThreadId, std::uint64_t>> unconfirmed;
  for (const auto& [key, to] : sent_)
    if (to.sent != to.confirmed) unconfirmed.emplace_back(thread_of(key), to.sent);
  if (unconfirmed.empty()) return;
  for (const auto& [dest, count] : unconfirmed) {
    if (job_.process_failed(dest.process))
      throw Error(Errc::peer_failed, "process " + std::to_string(dest.process) + " has failed: not every action " +
                                         to_string(self_) + " sent to " + to_string(dest) + " is known to have run");
    auto added = waits_.add();
    added.value = {dest, count, &sync};
    const std::uint64_t token = added.token;
    waits.push_back(token);
    sync.add();
    // Send-based, whatever path the parcels took: one small call per
    // destination and phase, answered the same way.
    rdmx::call(dest, [source = self_, count, token] { current_worker().markers().marker(source, count, token); });
  }
  // Parcels sent as one-sided calls (on any path, chosen per call) may
  // still wait in this thread's messengers: publish them, or the
  // destinations never see them.
  MessengerGlobal().flush();
  sync.wait();
}

void QuietMarkers::answered(std::uint64_t quiet_token) {
  QuietWait* w = waits_.find(quiet_token);
  if (w == nullptr) return;  // its quiet() has ended (failed)
  SentTo& to = sent_to(w->dest);
  to.confirmed = std::max(to.confirmed, w->count);
  Synchronizer* sync = w->sync;
  waits_.erase(quiet_token);
  sync->notify();
}

void QuietMarkers::marker(ThreadId source, std::uint64_t count, std::uint64_t quiet_token) {
  RanFrom& from = ran_from(source);
  if (from.count >= count)
    answer(source, quiet_token);
  else
    from.waiting.push_back({count, quiet_token});
}

void QuietMarkers::count_ran(ThreadId source) {
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

void QuietMarkers::answer(ThreadId source, std::uint64_t quiet_token) {
  try {
    rdmx::call(source, [quiet_token] { current_worker().markers().answered(quiet_token); });
  } catch (const Error& e) {
    rdmx::log(rdmx::LogLevel::error, "process %u: could not answer the quiet() of %s: %s\n", self_.process,
              to_string(source).c_str(), e.what());
  }
}

void QuietMarkers::fail_waits_on_failed() {
  waits_.for_each([&](std::uint64_t token, QuietWait& w) {
    if (!job_.process_failed(w.dest.process)) return;
    w.sync->fail(Errc::peer_failed, "process " + std::to_string(w.dest.process) + " failed before it ran every action " +
                                        to_string(self_) + " sent to " + to_string(w.dest));
    waits_.erase(token);
  });
}

}  // namespace rdmx::parcel
