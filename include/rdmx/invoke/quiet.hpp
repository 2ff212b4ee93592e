// Ending a phase: rdmx::quiet() returns once every call the calling worker
// thread has made so far has run at its destination: send-based calls
// (rdmx::call, call_buffer, broadcast), one-sided messenger calls and the
// aggregated calls an Aggregator has flushed (flush() it first). A barrier
// alone orders execution, not delivery: calls sent with Notify::sent before
// it may still be on their way.
//
//   job.run([&](rdmx::ThreadId me) {
//     for (...) rdmx::call(peer, [v] { table.add(v); });   // fire and forget
//     aggregator.flush();
//     rdmx::quiet();     // they have all run
//     rdmx::barrier();   // and so have everyone else's
//   });
//
// How: calls from one thread to another run in the order they were made, on
// each path, so one empty call with Notify::consumed per path and
// destination, after everything else, runs last; quiet() waits for those.
// Actions (async, post) travel unordered: wait for their futures instead.
// Throws Errc::peer_failed when a destination process has failed.
#pragma once

namespace rdmx {

void quiet();

}  // namespace rdmx
