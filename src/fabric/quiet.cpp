#include "rdmx/fabric/quiet.hpp"

#include "rdmx/core/error.hpp"
#include "rdmx/fabric/call.hpp"
#include "rdmx/fabric/synchronizer.hpp"
#include "runtime.hpp"

namespace rdmx {

void quiet() {
  fabric::ThreadContext* const context = fabric::current_context;
  if (context == nullptr || context->id().is_service())
    throw Error(Errc::invalid_argument, "rdmx::quiet() is for worker threads (inside Job::run)");
  // The marker goes after every send-based call this thread made to each
  // worker it holds an endpoint to. Each one sent refers to `sync`: should a
  // later one fail to go, they are still waited for before it goes.
  Synchronizer sync;
  try {
    for (const ThreadId dest : context->contacted_workers()) call(dest, [] {}, when_run(sync));
  } catch (const Error&) {
    try {
      sync.wait();
    } catch (const Error&) {  // the first error is the one to report
    }
    throw;
  }
  sync.wait();
  fabric::Runtime::current().quiet_layers(context->id().thread);
}

}  // namespace rdmx
