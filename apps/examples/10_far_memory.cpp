// 10_far_memory: objects that live on a memory server and are swapped in on use.
//   scripts/run --tls shm -np 2 build/apps/examples/rdmx-example-10-far-memory --rdmx-threads=2
// The last process serves far memory (RDMX_FAR_SERVERS), the others compute.
// A computing process keeps at most its budget of objects local; beyond it
// the coldest are written back to the server, and a dereference fetches an
// object straight into its cache slot again.
#include <cstdio>
#include <span>
#include <vector>

#include "rdmx/core/error.hpp"
#include "rdmx/fabric/job.hpp"
#include "rdmx/far/pointer.hpp"

struct Particle {
  double x = 0, v = 0;
  std::uint64_t id = 0;
};

int main(int argc, char** argv) {
  try {
    rdmx::Job job(argc, argv);
    rdmx::far::Config config;
    config.cache_bytes = 128 << 10;         // the local budget: 2048 particles
    rdmx::far::Manager far(job, config);    // collective: every process builds one
    if (far.serving()) return 0;            // a server serves until the Manager's destructor
    constexpr std::uint64_t count = 10000;  // five times the budget
    std::vector<rdmx::far::UniquePtr<Particle>> particles;
    for (std::uint64_t i = 0; i < count; ++i)
      particles.push_back(rdmx::far::make_unique<Particle>(Particle{static_cast<double>(i), 0.5, i}));

    // Every worker thread moves its share of the particles, two steps.
    const std::uint32_t threads = job.threads_per_process();
    job.run([&](rdmx::ThreadId me) {
      for (int step = 0; step < 2; ++step)
        for (std::uint64_t i = me.thread; i < count; i += threads) {
          rdmx::far::DerefScope scope;                  // keeps what it dereferences local
          Particle* p = particles[i].deref_mut(scope);  // fetched if remote, marked dirty
          p->x += p->v;
        }
    });

    // A batch: the misses of 64 objects in flight together.
    std::uint64_t wrong = 0;
    {
      rdmx::far::DerefScope scope;
      const auto batch = rdmx::far::deref_all(scope, std::span<const rdmx::far::UniquePtr<Particle>>(particles).first(64));
      for (const Particle* p : batch) wrong += p->x != static_cast<double>(p->id) + 1.0 ? 1 : 0;
    }
    for (std::uint64_t i = 0; i < count; ++i) {
      const Particle p = particles[i].read();  // a copy, in a scope of its own
      wrong += p.id != i || p.x != static_cast<double>(i) + 1.0 ? 1 : 0;
    }

    // Mistakes are clear errors, not crashes.
    rdmx::far::UniquePtr<Particle> moved = std::move(particles[0]);
    bool refused = false;
    try {
      rdmx::far::DerefScope scope;
      particles[0].deref(scope);
    } catch (const rdmx::Error& e) {
      refused = e.code() == rdmx::Errc::invalid_argument;
      std::printf("dereferencing a moved-from far pointer: %s\n", e.what());
    }

    const rdmx::far::Stats s = far.stats();
    std::printf("%llu particles through a %zu KiB budget: %llu misses, %llu write-backs, at most %zu KiB local\n",
                static_cast<unsigned long long>(count), s.cache_bytes >> 10, static_cast<unsigned long long>(s.misses),
                static_cast<unsigned long long>(s.write_backs), s.peak_resident_bytes >> 10);
    if (wrong != 0 || !refused || s.peak_resident_bytes > s.cache_bytes || s.write_backs == 0) {
      std::fprintf(stderr, "10_far_memory: %llu wrong particles, refused %d, peak %zu of %zu bytes, %llu write-backs\n",
                   static_cast<unsigned long long>(wrong), refused, s.peak_resident_bytes, s.cache_bytes,
                   static_cast<unsigned long long>(s.write_backs));
      return 1;
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "10_far_memory: %s\n", e.what());
    return 1;
  }
  return 0;
}
