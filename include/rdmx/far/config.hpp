// far::Config: which processes serve far memory, how much each serves, the
// local cache budget and the path objects travel by. Defaults come from the
// environment (RDMX_FAR_*), so a program that sets no field gets the user's
// configuration and one that sets a field overrides it.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace rdmx::far {

// How a compute process reaches a server's region.
enum class Path {
  one_sided,  // RDMA get/put straight into the server's registered region: its CPU does nothing
  two_sided,  // a request per object, served by the server's service thread (AIFM's TCP device)
};
const char* to_string(Path path) noexcept;
Path parse_path(const std::string& text, const char* what);

// Whether a Manager runs the background evacuator.
enum class Evacuator {
  // Where its write-backs complete without this process's service thread:
  // in-process devices, and the one-sided path where RMA is native (shared
  // memory, RDMA). Not where the service thread must progress them (TCP,
  // the two-sided path): there, on the 2-core machine it was measured on,
  // it made cold writes several times slower (docs/results/far.md).
  automatic,
  on,
  off,
};
const char* to_string(Evacuator evacuator) noexcept;

// Whether the evacuator, after a round, watches for the next request before
// it sleeps: a miss then hands it work with a store instead of a system call
// that wakes a sleeping thread (docs/far-cache.md, "The background evacuator").
enum class Watch {
  // Where the machine has a core to spare for each process's service thread
  // and evacuator (Job::spare_cores): elsewhere the watch takes a core the
  // computation needs.
  automatic,
  on,
  off,
};
const char* to_string(Watch watch) noexcept;

struct Config {
  static std::vector<std::uint32_t> env_servers();  // RDMX_FAR_SERVERS, default: the last process
  static std::size_t env_region_bytes();            // RDMX_FAR_REGION, default 16M
  static std::size_t env_cache_bytes();             // RDMX_FAR_CACHE, default 4M
  static Path env_path();                           // RDMX_FAR_PATH, default one-sided
  static std::size_t env_replication();             // RDMX_FAR_REPLICATION, default 1
  static Evacuator env_evacuator();                 // RDMX_FAR_EVACUATOR, default auto
  static Watch env_evacuator_watch();               // RDMX_FAR_EVACUATOR_WATCH, default auto
  static double env_free_low();                     // RDMX_FAR_FREE_LOW (percent), default 5
  static double env_free_high();                    // RDMX_FAR_FREE_HIGH (percent), default 10
  static std::size_t env_prefetch_depth();          // RDMX_FAR_PREFETCH, default 0 (off)
  static bool env_check();                          // RDMX_FAR_CHECK, default off

  // Ranks that serve; empty: the last process of the job.
  std::vector<std::uint32_t> servers = env_servers();
  // Registered bytes each server maps once and publishes; every process of
  // the job allocates from its own equal share of it.
  std::size_t region_bytes = env_region_bytes();
  // Local budget: the registered cache arena objects live in while local.
  std::size_t cache_bytes = env_cache_bytes();
  Path path = env_path();
  // Servers holding each object: the servers form groups of this many
  // (their count must divide by it); a group survives the loss of all but one.
  std::size_t replication = env_replication();
  // Background evacuation: a thread of the Manager keeps free cache space
  // between these fractions of the budget, so that a miss usually finds a
  // free frame instead of paying for a write-back inline. It wakes when a
  // miss leaves less than free_low free and evicts (CLOCK, writing dirty
  // victims back) until free_high is free. Off: eviction happens only on
  // the thread that needs a frame.
  Evacuator evacuator = env_evacuator();
  Watch evacuator_watch = env_evacuator_watch();
  double free_low = env_free_low();
  double free_high = env_free_high();
  // far::Array's prefetcher: once a thread's accesses to an array's chunks
  // keep one stride, at most this many chunks along it are fetched ahead
  // (and never more than a sixteenth of the cache). 0: no prefetching.
  std::size_t prefetch_depth = env_prefetch_depth();
  // Checking mode: a cache hit also checks that the object's far block has
  // not been freed since (a byte-wise copy of a pointer, fetched while its
  // original lived, used after the original freed it). Misses always check;
  // a hit costs a lookup more.
  bool check = env_check();
};

// Objects are placed in power-of-two size classes from 64 B to 16 KiB; a
// cache slab holds objects of one class and is as large as the largest.
inline constexpr std::size_t min_object_bytes = 64;
inline constexpr std::size_t max_object_bytes = 16 * 1024;
inline constexpr std::size_t size_classes = 9;  // 64 << 0 ... 64 << 8
inline constexpr std::size_t slab_bytes = max_object_bytes;

// The class of an object of `bytes`; throws Errc::invalid_argument above max_object_bytes.
std::uint32_t size_class_of(std::size_t bytes);
inline constexpr std::size_t class_bytes(std::uint32_t size_class) noexcept { return min_object_bytes << size_class; }

}  // namespace rdmx::far
