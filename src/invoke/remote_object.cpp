// Registered memory for RemoteObject: chunks of this process's arena.
#include "rdmx/core/log.hpp"
#include "rdmx/invoke/remote_object.hpp"

#include <cstdio>
#include <cstring>

#include "rdmx/core/error.hpp"
#include "rdmx/fabric/job.hpp"
#include "rdmx/memory/arena.hpp"

namespace rdmx::invoke::detail {

memory::Block allocate_registered(std::size_t bytes) {
  memory::Block b = Job::current().arena().allocate_chunk(bytes == 0 ? 1 : bytes, 64);
  std::memset(b.data, 0, b.size);
  return b;
}

void release_registered(const memory::Block& block) noexcept {
  try {
    Job::current().arena().release_chunk(block);
  } catch (const std::exception& e) {  // the job is gone or the block is not the arena's: nothing to give back to
    rdmx::log(rdmx::LogLevel::error, "RemoteObject: %s\n", e.what());
  }
}

std::uint32_t this_process() { return Job::current().rank(); }

}  // namespace rdmx::invoke::detail
