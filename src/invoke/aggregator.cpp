#include "rdmx/core/log.hpp"
#include "rdmx/invoke/aggregator.hpp"

#include <cstdio>
#include <string>

#include "messengers.hpp"

namespace rdmx {

Aggregator::Aggregator(Aggregation mode, AggregatorOptions options) : mode_(mode) {
  invoke::WorkerState& state = invoke::Messengers::current();  // checks this is a worker thread
  if (mode == Aggregation::trad) {
    if (options.flush_bytes == 0) throw Error(Errc::invalid_argument, "Aggregator: flush_bytes must be positive");
    how_ = {options.flush_bytes, Policy::retry, false, 0};
  } else {
    how_ = {0, Policy::retry, true, options.overflow_limit};
  }
  threads_ = state.job.workers_per_process();
  called_.assign(std::size_t{state.job.size()} * threads_, false);
  phase_ = options.phase != 0 ? options.phase : state.aggregator_phase + 1;
  state.aggregator_phase = phase_;
}

Aggregator::~Aggregator() {
  try {
    shutdown();
    // Nobody can ask for this phase's count any more. (Signals of it that
    // arrive later leave an entry until a later phase's aggregator goes.)
    invoke::Messengers::current().forget_shutdowns(phase_);
  } catch (const std::exception& e) {
    rdmx::log(rdmx::LogLevel::error, "Aggregator shutdown failed: %s\n", e.what());
  }
}

void Aggregator::submit(const fabric::Outgoing& call) {
  if (shut_down_) throw Error(Errc::shut_down, "Aggregator: call after shutdown()");
  invoke::WorkerState& state = invoke::Messengers::current();
  // how_ never refuses: append waits for room (or throws).
  state.messenger(call.destination).append(call, how_);
  called_[std::size_t{call.destination.process} * threads_ + call.destination.thread] = true;
}

void Aggregator::flush() { invoke::Messengers::current().flush(); }

void Aggregator::shutdown() {
  if (shut_down_) return;
  invoke::WorkerState& state = invoke::Messengers::current();
  // The signal is one more call on the same channel, so it runs after every
  // call this aggregator made to that thread.
  const invoke::detail::Mode last{0, Policy::retry, false, 0};
  for (std::size_t g = 0; g < called_.size(); ++g) {
    if (!called_[g]) continue;
    const ThreadId dest{static_cast<std::uint32_t>(g / threads_), static_cast<std::uint32_t>(g % threads_)};
    // Counted for the destination thread, whichever thread runs it (a helper).
    state.messenger(dest).append(fabric::outgoing<fabric::CallWrapper>(dest, fabric::CallKind::call, [phase = phase_] {
      invoke::Messengers::destination().count_shutdown(phase);
    }, Completion{}), last);
  }
  shut_down_ = true;
  state.flush();
}

std::uint64_t Aggregator::shutdowns_received() const { return invoke::Messengers::current().shutdowns(phase_); }

void Aggregator::wait_for_shutdowns(std::uint64_t count) const {
  invoke::WorkerState& state = invoke::Messengers::current();
  while (state.shutdowns(phase_) < count) {
    // A dead peer will never signal: the phase cannot end.
    for (std::uint32_t p = 0; p < state.job.size(); ++p)
      if (state.job.process_failed(p))
        throw Error(Errc::peer_failed, "Aggregator: process " + std::to_string(p) + " has failed before phase " +
                                           std::to_string(phase_) + " ended (" + std::to_string(state.shutdowns(phase_)) +
                                           " of " + std::to_string(count) + " shutdowns received)");
    progress();
  }
}

}  // namespace rdmx
