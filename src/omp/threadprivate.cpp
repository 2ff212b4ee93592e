// The master's threadprivate variables, readable from every process, for
// `copyin`.
//
// GCC compiles `parallel copyin(x)` into a copy that each thread of the
// team makes from the master's x, whose address the master passes in the
// region's data: an address in the master's block of the program's static
// TLS, on process 0. A thread of another process would find nothing there
// (a segmentation fault), or memory of its own. So every other process
// reserves that address range at start-up, and at each region the master
// copies its block into the shared heap and each other process copies that
// into its reservation before its threads run the region: they read the
// master's values as of the region's start, which is what copyin asks.
//
// Only the program's own TLS (its threadprivate variables) is covered, and
// only programs that have some pay: one copy of the block per region and
// process. A process that cannot reserve the range (it holds memory there,
// as when address randomization is off) says so at start-up: a copyin there
// would read that memory instead.
#include <link.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <mutex>

#include "rdmx/core/log.hpp"
#include "rdmx/fabric/job.hpp"
#include "runtime.hpp"

extern "C" void* rdmx_shared_malloc(std::size_t bytes);  // shared_heap.cpp

namespace rdmx::omp {
namespace {

struct Block {
  std::uint64_t address = 0, bytes = 0;
};

// The calling thread's block of the executable's PT_TLS segment.
Block own_tls_block() {
  Block block;
  dl_iterate_phdr(
      [](dl_phdr_info* info, std::size_t, void* out) {
        // The first object is the executable; its TLS is module 1.
        for (int i = 0; i < info->dlpi_phnum; ++i)
          if (info->dlpi_phdr[i].p_type == PT_TLS && info->dlpi_tls_data != nullptr)
            *static_cast<Block*>(out) = {reinterpret_cast<std::uint64_t>(info->dlpi_tls_data), info->dlpi_phdr[i].p_memsz};
        return 1;
      },
      &block);
  return block;
}

Block master;               // the master's block, the same on every process
bool mirrored = false;      // this process holds the reservation (processes other than 0)
std::mutex received_mutex;  // one copy per process and region
std::uint64_t received = 0;

}  // namespace

void setup_threadprivate(Job& job, Region& region) {
  const Block mine = job.rank() == 0 ? own_tls_block() : Block{};
  master = job.allgather(mine)[0];
  if (master.bytes == 0) return;
  if (job.rank() == 0) {
    region.threadprivate = rdmx_shared_malloc(master.bytes);  // the master writes it per region
    if (region.threadprivate == nullptr)
      fatal("no room in the shared heap for a copy of the master's %llu bytes of threadprivate variables "
            "(RDMX_DSM_HEAP)",
            static_cast<unsigned long long>(master.bytes));
    return;
  }
  const auto page = static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
  const std::uint64_t begin = master.address / page * page;
  const std::uint64_t end = (master.address + master.bytes + page - 1) / page * page;
  void* at = ::mmap(reinterpret_cast<void*>(begin), end - begin, PROT_READ | PROT_WRITE,
                    MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
  if (at == reinterpret_cast<void*>(begin)) {
    mirrored = true;
    return;
  }
  if (at != MAP_FAILED) ::munmap(at, end - begin);
  rdmx::log(LogLevel::warn,
            "omp: process %u holds memory where the master's threadprivate variables lie (%#llx, %llu bytes): "
            "a copyin there would read that memory, not the master's values\n",
            job.rank(), static_cast<unsigned long long>(master.address), static_cast<unsigned long long>(master.bytes));
}

void publish_threadprivate(Region& region) {
  if (master.bytes == 0) return;
  std::memcpy(region.threadprivate, reinterpret_cast<const void*>(master.address), master.bytes);
}

void receive_threadprivate(const Region& region) {
  if (!mirrored) return;
  std::lock_guard lock(received_mutex);
  if (received == region.number) return;
  std::memcpy(reinterpret_cast<void*>(master.address), region.threadprivate, master.bytes);
  received = region.number;
}

}  // namespace rdmx::omp
