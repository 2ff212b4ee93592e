// dsm::Config: how a process's distributed shared memory is laid out and
// which protocols it runs. Every process of a job must use the same values
// (the Space checks this when it starts). Defaults come from the RDMX_DSM_*
// settings (docs/settings.md), so a program that sets no field gets
// the user's configuration.
#pragma once
#include <cstddef>
#include <cstdint>

namespace rdmx::dsm {

// Where a block's home (the copy every other process fetches) lives.
enum class HomePolicy {
  // MENPS's floating home: the last releaser of a block becomes its home. A
  // releaser takes the block's owner word by compare-and-swap, reads the
  // block from the previous home with one get and merges its diff locally.
  floating,
  // Baseline: block b's home is process b mod P for ever, and releasers put
  // each changed run of bytes there (remote diff merge, as in ArgoDSM).
  fixed,
};
const char* to_string(HomePolicy policy) noexcept;

// How a process learns that its cached copy of a block is out of date.
enum class Invalidation {
  // MENPS: write notices travel with the synchronization (signatures that
  // barriers exchange and an unlock leaves beside the mutex's word), name
  // the writer (a fault then reads from it directly) and fall back to
  // logical leases when they overflow.
  signature,
  // Baseline: each block's manager keeps a directory word of the processes
  // caching it; a releaser sends every other sharer an invalidation, which
  // the sharer applies at its next acquire. At most 64 processes.
  directory,
};
const char* to_string(Invalidation invalidation) noexcept;

struct Config {
  static Config from_env();

  std::size_t heap_bytes = 0;   // shared heap per process (RDMX_DSM_HEAP, default 32M)
  std::size_t block_bytes = 0;  // coherence unit, a multiple of the page size (RDMX_DSM_BLOCK, default 4K)
  HomePolicy home = HomePolicy::floating;  // RDMX_DSM_HOME=floating|fixed
  Invalidation invalidation = Invalidation::signature;  // RDMX_DSM_INVALIDATION=signature|directory
  // Write notices a signature holds; beyond that it overflows and acquirers
  // fall back to logical leases (RDMX_DSM_NOTICES, default 1024; 0: every
  // signature that carries a write overflows, leases alone keep copies).
  std::uint32_t notices = 0;
  std::uint32_t mutexes = 0;  // global mutexes (RDMX_DSM_MUTEXES, default 16)
  // Logical lease a reader takes on a block it fetches (Tardis): the copy
  // survives an overflowed signature whose logical time has not passed the
  // lease's end (RDMX_DSM_LEASE, default 16).
  std::uint64_t lease = 0;
  // Fast release (floating home): a block written since the last release
  // is merged and stays writable; one that then goes this many releases
  // unchanged is made read-only again. 0: every release makes the blocks it
  // merges read-only, so every interval's first write faults (RDMX_DSM_KEEP,
  // default 1: a block stays writable while it changes at every release).
  std::uint32_t keep = 0;
  // A read miss on the block after the thread's previous read miss also
  // fetches up to this many following blocks that are not cached (stopping
  // at the first that is, or that another thread holds), made readable
  // with the missed one by one mprotect: a sequential read then faults once
  // per run instead of once per block (RDMX_DSM_READ_AHEAD, default 8; 0: off).
  std::uint32_t read_ahead = 0;
  // A write fault on the block after the thread's previous write fault
  // also makes up to this many following blocks writable (fetching those
  // not cached, stopping at one already writable or that another thread
  // holds), with one mprotect: a sequential write then faults once per run.
  // A block made writable and left unwritten costs a twin copy and, at the
  // next release, a comparison (RDMX_DSM_WRITE_AHEAD, default 8; 0: off).
  std::uint32_t write_ahead = 0;
  // Report bytes that two processes wrote between the same synchronizations
  // (RDMX_DSM_CHECK_RACES; floating home only).
  bool check_races = false;
  // Causal misses: a miss that finds a block newer than every version this
  // process acquired (another process released it since our last acquire)
  // first acquires through this mutex, as its lock and unlock would,
  // releasing nothing. A thread that sees a flag another process wrote and
  // released under this mutex, and then reads data written before the flag
  // with no acquire of its own between, sees that data. NPB LU's pipeline
  // does so: it spins on flags under `omp flush` and reads its neighbour's
  // rows after the loop, relying on x86's ordering. rdmx_omp sets its flush
  // mutex; no_mutex (the default) is off: a program that synchronizes by its
  // own acquires pays nothing.
  static constexpr std::uint32_t no_mutex = 0xffffffff;
  std::uint32_t causal_mutex = no_mutex;
  // Testing only: microseconds a directory release waits between taking a
  // block's sharers and telling them, as if descheduled there (the window
  // the tests widen). Processes may differ in it.
  std::uint32_t tell_delay_us = 0;
  // Where to put the heap; 0 lets process 0 pick. A non-zero address that
  // some process cannot map there is an error.
  std::uintptr_t address = 0;
};

}  // namespace rdmx::dsm
