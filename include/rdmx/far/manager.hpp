// far::Manager: this process's far memory (AIFM's FarMemManager), as the
// program holds it. It owns the local budget, a registered cache arena that
// holds the objects currently local, places objects in size classes with no
// server round trip (each process allocates from its own share of every
// server's region, spreading objects round-robin over the servers) and
// evicts cold objects with CLOCK, writing them back if they are dirty: ahead
// of time on a background thread (the evacuator) that keeps part of the
// cache free, and on the thread that needs a cache frame when none is free.
//
// Constructing one is collective: every process of the job constructs its
// Manager with the same servers; the servers map and register their region
// once and publish it. Destroying it is collective too: each process tells
// the servers it is done, and a server's destructor returns once every
// other process has done so or has failed, so a server's region outlives
// every client's use of it whatever other servers do. One Manager per
// process at a time. It registers with the job's far layer
// (fabric/layer.hpp), through which far pointers, scopes and data
// structures find it, rdmx::quiet() waits for its write-backs and a failed
// server is reported to it; it ends before its Job.
//
//   rdmx::Job job(argc, argv);
//   rdmx::far::Manager far(job);                 // RDMX_FAR_SERVERS, RDMX_FAR_CACHE ...
//   auto p = rdmx::far::make_unique<Point>(1, 2);
//   {
//     rdmx::far::DerefScope scope;
//     p.deref_mut(scope)->x += 1;                // swapped in if remote, pinned until scope ends
//   }
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>

#include "rdmx/far/access.hpp"
#include "rdmx/far/config.hpp"
#include "rdmx/far/device.hpp"

namespace rdmx {
class Job;
}

namespace rdmx::far {

namespace detail {
class Runtime;
}

struct Stats {
  std::size_t cache_bytes = 0;     // the budget
  std::size_t resident_bytes = 0;  // size-class bytes of the objects local now
  std::size_t peak_resident_bytes = 0;
  std::size_t objects = 0;         // live far objects
  std::uint64_t misses = 0;        // dereferences that fetched the object
  std::uint64_t evictions = 0;     // every kind below, and explicit ones (evict())
  std::uint64_t inline_evictions = 0;      // by a thread that needed a frame and found none free
  std::uint64_t background_evictions = 0;  // by the evacuator, ahead of the misses
  std::uint64_t background_failures = 0;   // the evacuator's write-backs that failed (the object stays local, dirty)
  std::uint64_t write_backs = 0;   // evictions of dirty objects
  std::uint64_t prefetched = 0;    // objects fetched ahead of use (far::Array's prefetcher)
  std::uint64_t prefetch_hits = 0; // of those, the ones then used (as prefetchers report them)
  std::size_t lost_servers = 0;    // servers (each copy counts) whose process the job reported failed
};

class Manager {
 public:
  // Collective over the job (see above).
  explicit Manager(Job& job, Config config = {});
  // In-process, over `device` (tests and single-process use): this process
  // is the only client of every region. Where the process has a Job, it
  // registers with the job's far layer as above.
  Manager(std::unique_ptr<Device> device, Config config);
  ~Manager();
  Manager(const Manager&) = delete;
  Manager& operator=(const Manager&) = delete;

  const Config& config() const noexcept;
  Device& device() noexcept;
  Stats stats() const;
  // Whether this process serves a region (it is in Config::servers).
  bool serving() const noexcept;
  // The registered region server `server` published (job-backed only).
  RemoteLocator server_region(std::size_t server) const;
  // Whether `p` lies in the cache arena (tests check that objects never live elsewhere).
  bool in_cache(const void* p) const noexcept;

 private:
  struct Resources;  // what the collective set-up took from the job (setup.cpp)
  std::unique_ptr<Resources> resources_;
  std::unique_ptr<detail::Runtime> runtime_;
};

}  // namespace rdmx::far
