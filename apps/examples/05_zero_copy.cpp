// 05_zero_copy: large arguments that travel without being copied.
//   scripts/run --tls shm -np 2 build/apps/examples/rdmx-example-05-zero-copy
// An action's argument at or above the zero-copy threshold (64 KiB by
// default) is not copied into the message: the message carries a chunk that
// names the sender's memory, and the destination pulls it with an RDMA get
// straight into the memory its argument object then owns.
// SerializeBuffer shares existing memory; RmaVector lives in registered
// memory, so not even a registration is needed on the way.
#include <atomic>
#include <cstdio>
#include <numeric>
#include <vector>

#include "rdmx/core/error.hpp"
#include "rdmx/fabric/job.hpp"
#include "rdmx/action/action.hpp"
#include "rdmx/serial/rma_vector.hpp"
#include "rdmx/serial/serialize_buffer.hpp"

using rdmx::serial::RmaVector;
using rdmx::serial::SerializeBuffer;

// The buffer owns the memory the RDMA get landed in: no copy on either side.
double total(SerializeBuffer<double> values) { return std::accumulate(values.begin(), values.end(), 0.0); }
// The vector is the destination's own: scaling it in place cannot touch the caller's.
RmaVector<double> scaled(RmaVector<double> values, double factor) {
  for (double& v : values) v *= factor;
  return values;
}

int main(int argc, char** argv) {
  try {
    // RmaVectors made inside the job take registered memory from the Job
    // (its arenas); none may outlive the Job.
    rdmx::Job job(argc, argv);
    const std::uint32_t n = job.size();
    constexpr std::size_t count = std::size_t{1} << 20;  // 8 MiB of doubles
    constexpr double expected = double(count) * (count - 1) / 2;
    std::atomic<int> errors{0};
    auto check = [&](bool ok, const char* what) {
      if (ok) return;
      std::fprintf(stderr, "05_zero_copy: %s\n", what);
      errors.fetch_add(1);
    };

    job.run([&](rdmx::ThreadId me) {
      const rdmx::ThreadId peer{(me.process + 1) % n, me.thread};

      // 1. A SerializeBuffer over memory this program keeps: reference()
      // lends it, so it must stay alive and unchanged until when_sent's
      // Synchronizer says the destination has pulled it.
      std::vector<double> mine(count);
      std::iota(mine.begin(), mine.end(), 0.0);
      rdmx::Synchronizer pulled;
      rdmx::Future<double> sum = rdmx::async(rdmx::when_sent(pulled), rdmx::action<&total>, peer,
                                             SerializeBuffer<double>::reference(mine.data(), mine.size()));
      pulled.wait();  // `mine` may change from here on
      mine.assign(count, -1.0);
      const double got = sum.get();
      check(got == expected, "the SerializeBuffer arrived changed");

      // 2. An RmaVector: copies are handles to the same elements, so
      // passing it by value sends it without copying; the reply comes back
      // the same way.
      RmaVector<double> values(count);
      std::iota(values.begin(), values.end(), 0.0);
      RmaVector<double> doubled = rdmx::async(rdmx::action<&scaled>, peer, values, 2.0).get();
      check(doubled.size() == count && doubled[count - 1] == 2.0 * (count - 1), "the scaled RmaVector is wrong");
      check(values[count - 1] == double(count - 1), "the destination changed the caller's RmaVector");
      std::printf("[%s] sent 2 x %zu MiB without copies: sum %.0f, last element doubled to %.0f\n",
                  rdmx::to_string(me).c_str(), count * sizeof(double) >> 20, got, doubled[count - 1]);
    });
    return errors.load() == 0 ? 0 : 1;
  } catch (const rdmx::Error& e) {
    std::fprintf(stderr, "05_zero_copy: %s (%s)\n", e.what(), rdmx::to_string(e.code()));
    return 1;
  }
}
