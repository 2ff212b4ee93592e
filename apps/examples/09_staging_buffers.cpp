// 09_staging_buffers: stream records into another process's memory without
// waiting for each write and without copying out of registered memory.
//   scripts/run --tls shm -np 2 build/apps/examples/rdmx-example-09-staging-buffers --rdmx-threads=2
// Each record is built in a segment of a LinearCircularAllocator (Seriema's
// linear-circular allocator: units of registered memory, variable-size
// segments packed into each), written with post_put, and its segment tagged
// with the put's EpochTag. A unit is reused once the flush that covers its
// last put has completed: one flush frees every buffer of an epoch, so the
// program never waits per write, and a small ring carries a large stream.
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

#include "rdmx/core/error.hpp"
#include "rdmx/fabric/collective.hpp"
#include "rdmx/fabric/job.hpp"
#include "rdmx/fabric/rma.hpp"
#include "rdmx/memory/linear_circular_allocator.hpp"
#include "rdmx/transfer/transmitter.hpp"

namespace {
constexpr std::size_t records = 1500;
constexpr std::size_t log_bytes = 512 * 1024;

// Record i of thread `t`: 8 to 512 bytes, a multiple of 8, a known pattern.
std::size_t record_size(std::size_t i) { return 8 + (i * 37 % 505) / 8 * 8; }
std::uint8_t record_byte(std::uint32_t t, std::size_t i, std::size_t j) {
  return static_cast<std::uint8_t>(t * 131 + i * 7 + j);
}
}  // namespace

int main(int argc, char** argv) {
  try {
    rdmx::Job job(argc, argv);
    std::atomic<int> errors{0};
    auto check = [&](bool ok, const char* what) {
      if (ok) return;
      std::fprintf(stderr, "09_staging_buffers: %s\n", what);
      errors.fetch_add(1);
    };

    job.run([&](rdmx::ThreadId me) {
      const std::uint32_t next = (me.process + 1) % job.size();
      const rdmx::RemoteLocator log = rdmx::allocate_remote(next, log_bytes);

      // 64 KiB of staging at most, for about 380 KiB of records: the ring
      // must reuse its units. When none is free, the hook completes what is
      // in flight towards `next`, which frees them all.
      rdmx::memory::LinearCircularAllocator staging(
          job.arena(), {.unit_size = 16 * 1024, .initial_units = 2, .max_units = 4});
      rdmx::transfer::Transmitter& to_next = rdmx::transmitter(next);
      const rdmx::ProgressHook complete_in_flight{
          [](void* tx) {
            static_cast<rdmx::transfer::Transmitter*>(tx)->flush();
            return true;
          },
          &to_next};

      const std::uint32_t t = me.process * job.threads_per_process() + me.thread;
      std::size_t at = 0;
      for (std::size_t i = 0; i < records; ++i) {
        const std::size_t n = record_size(i);
        rdmx::memory::Block segment = staging.allocate(n, complete_in_flight);
        for (std::size_t j = 0; j < n; ++j) segment.data[j] = static_cast<std::byte>(record_byte(t, i, j));
        staging.tag(segment, rdmx::post_put(segment.data, log.slice(at, n)));
        at += n;
      }
      rdmx::flush(next);  // every record has reached the log

      // Read the log back and check every byte of every record.
      std::vector<std::uint8_t> back(at);
      rdmx::get(back.data(), log.slice(0, at)).get();
      std::size_t bad = 0;
      for (std::size_t i = 0, o = 0; i < records; o += record_size(i), ++i)
        for (std::size_t j = 0; j < record_size(i); ++j) bad += back[o + j] != record_byte(t, i, j);
      check(bad == 0, "a record arrived damaged");
      check(staging.units() <= 4, "the staging ring grew past its limit");
      rdmx::free_remote(log);
      std::printf("[%s] %zu records, %zu KiB, through %zu KiB of staging\n", rdmx::to_string(me).c_str(), records,
                  at / 1024, staging.units() * staging.unit_size() / 1024);
    });
    return errors.load() == 0 ? 0 : 1;
  } catch (const rdmx::Error& e) {
    std::fprintf(stderr, "09_staging_buffers: %s (%s)\n", e.what(), rdmx::to_string(e.code()));
    return 1;
  }
}
