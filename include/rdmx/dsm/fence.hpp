// Synchronization of the shared heap (release consistency, docs/dsm.md).
// A data-race-free program sees every write that happens before its reads
// through these operations and dsm::Mutex.
#pragma once

namespace rdmx::dsm {

// Release fence: this process's writes so far become visible to any process
// that later acquires from it (through a barrier or a mutex). Blocks it
// wrote are merged into their homes; the write notices it produced wait to
// be sent at the next synchronization.
void release();

// Release, exchange every process's signature, acquire: after it, every
// write any thread made before the barrier is visible to every thread.
// Every worker thread of every process calls it inside Job::run (as
// rdmx::barrier): worker thread 0 of each process runs the exchange once
// the process's other threads have arrived; all leave together.
void barrier();

// The same with one thread per process (as Job::barrier): the main thread
// outside Job::run, or worker thread 0 inside it (peers send it their
// signatures); another thread gets Errc::invalid_argument.
void process_barrier();

}  // namespace rdmx::dsm
