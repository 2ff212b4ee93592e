// Collective allocation from the shared heap: every process asks for the
// same sizes in the same order and gets the same pointer.
#include "engine.hpp"

#include <algorithm>
#include <string>

#include "rdmx/core/error.hpp"
#include "rdmx/fabric/job.hpp"

namespace rdmx::dsm {

void* Engine::allocate(std::size_t bytes, std::size_t alignment) {
  // Every process gathers every request before it checks any, so that a
  // bad request on one process fails the allocation on all of them, and
  // the next collective starts in step everywhere.
  struct Request {
    std::uint64_t bytes, alignment;
  };
  const Request mine{bytes, alignment};
  const auto all = job_.allgather(mine);
  for (std::uint32_t p = 0; p < processes_; ++p) {
    const std::uint64_t a = all[p].alignment;
    if (a == 0 || (a & (a - 1)) != 0 || a > config_.block_bytes)
      throw Error(Errc::invalid_argument, "dsm::allocate: process " + std::to_string(p) + " asked for alignment " +
                                              std::to_string(a) + ", not a power of two up to the block size " +
                                              std::to_string(config_.block_bytes));
  }
  for (std::uint32_t p = 0; p < processes_; ++p)
    if (all[p].bytes != bytes || all[p].alignment != alignment)
      throw Error(Errc::invalid_argument, "dsm::allocate is collective: process " + std::to_string(p) + " asked for " +
                                              std::to_string(all[p].bytes) + " bytes (alignment " +
                                              std::to_string(all[p].alignment) + ") while process " +
                                              std::to_string(rank_) + " asked for " + std::to_string(bytes) + " (" +
                                              std::to_string(alignment) + ")");
  const std::size_t start = (allocated_ + alignment - 1) / alignment * alignment;
  if (bytes == 0 || start > config_.heap_bytes || bytes > config_.heap_bytes - start)
    throw Error(bytes == 0 ? Errc::invalid_argument : Errc::out_of_memory,
                "dsm::allocate: " + std::to_string(bytes) + " bytes do not fit the shared heap (" +
                    std::to_string(config_.heap_bytes - std::min(start, config_.heap_bytes)) + " of " +
                    std::to_string(config_.heap_bytes) + " bytes left; RDMX_DSM_HEAP sets its size)");
  allocated_ = start + bytes;
  return base() + start;
}

}  // namespace rdmx::dsm
