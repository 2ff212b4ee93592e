// What this process's DSM did since its Space started (all threads).
#pragma once
#include <cstdint>
#include <string>

namespace rdmx::dsm {

struct Counters {
  std::uint64_t read_faults = 0;   // first access was a read
  std::uint64_t write_faults = 0;  // a write to an invalid or clean block
  std::uint64_t fast_reads = 0;    // misses served from a write notice's writer, no owner lookup
  std::uint64_t read_ahead = 0;    // blocks fetched after a sequential read miss, each a fault saved if read
  std::uint64_t write_ahead = 0;   // blocks made writable after a sequential write fault, each a fault saved if written
  std::uint64_t migrations = 0;    // floating home: blocks this process took from another home
  std::uint64_t links_followed = 0; // floating home: probable-owner links that did not name the home
  std::uint64_t merges = 0;        // blocks whose diff this process merged into a home
  std::uint64_t fast_releases = 0; // merges that left the block writable (it changed since the last release)
  std::uint64_t invalidations = 0; // cached blocks dropped at an acquire
  std::uint64_t overflows = 0;     // acquires of a signature that had overflowed (all invalidated)
  std::uint64_t bytes_fetched = 0; // block data read from other processes
  std::uint64_t races = 0;         // bytes two processes wrote between the same synchronizations (check mode)
  std::uint64_t protects = 0;      // mprotect calls on the app view (each a system call and a TLB flush)
  std::uint64_t barriers = 0;      // process barriers (release, signature exchange, acquire)
  std::uint64_t locks = 0;         // mutex acquisitions
  std::uint64_t causal_misses = 0; // misses that found a newer version and acquired first (Config::causal_mutex)
};

Counters counters();
std::string to_string(const Counters& c);

}  // namespace rdmx::dsm
