// Ending a phase: rdmx::quiet() returns once everything the calling worker
// thread has issued so far has run at its destination: send-based calls
// (rdmx::call, call_buffer, broadcast), one-sided messenger calls, the
// aggregated calls an Aggregator has flushed (flush() it first), and remote
// actions (rdmx::post, async), their pulled arguments landed. A
// barrier alone orders execution, not delivery: calls sent with
// no completion (or when_sent) before it may still be on their way.
//
//   job.run([&](rdmx::ThreadId me) {
//     for (...) rdmx::call(peer, [v] { table.add(v); });   // fire and forget
//     for (...) rdmx::post(rdmx::action<&add>, peer, v);
//     aggregator.flush();
//     rdmx::quiet();     // they have all run
//     rdmx::barrier();   // and so have everyone else's
//   });
//
// How: the fabric waits for its own send path, then asks every layer above
// it to do the same for what the thread issued through it
// (fabric::Layer::quiet). Calls from one thread to another run in the order
// they were made on each path, so one empty call with when_run per
// path and destination, after everything else, runs last: the send path
// and invoke's messengers wait for those. Actions travel unordered, so the
// action layer counts instead: each thread counts the actions it sent to
// each destination thread, each destination counts those it has run from
// each source, and one marker per destination carrying "I sent you n" is
// answered once the destination has run n.
// Throws Errc::peer_failed naming the process when a destination process
// has failed; Errc::invalid_argument on a thread that acts as no worker.
#pragma once

namespace rdmx {

void quiet();

}  // namespace rdmx
