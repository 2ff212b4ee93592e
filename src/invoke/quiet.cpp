#include "rdmx/invoke/quiet.hpp"

#include "messengers.hpp"
#include "rdmx/fabric/call.hpp"
#include "rdmx/fabric/synchronizer.hpp"
#include "rdmx/invoke/messenger.hpp"

namespace rdmx {

void quiet() {
  if (fabric::acting_word<invoke::WorkerState>() == nullptr || this_thread().is_service())
    throw Error(Errc::invalid_argument, "rdmx::quiet() is for worker threads (inside Job::run)");
  invoke::WorkerState& slot = invoke::Messengers::current();
  Synchronizer sync;
  // The markers go after everything this thread made: the send path's
  // calls to each worker it holds an endpoint to, and each messenger's ring.
  for (const ThreadId dest : send_destinations()) call<Notify::consumed>(dest, [] {}, sync);
  MessengerGlobal messenger;
  for (const ThreadId dest : slot.messenger_destinations())
    messenger.call<Notify::consumed>(dest, [] {}, &sync);
  messenger.flush();
  sync.wait();
}

}  // namespace rdmx
