#include "heap.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>

#include "rdmx/core/error.hpp"
#include "rdmx/fabric/job.hpp"

namespace rdmx::dsm {

namespace {
constexpr int attempts = 8;

std::string hex(std::uintptr_t v) {
  char text[32];
  std::snprintf(text, sizeof text, "0x%zx", static_cast<std::size_t>(v));
  return text;
}

std::byte* map_or_throw(void* hint, std::size_t bytes, int protection, int flags, int fd, const char* what) {
  void* p = ::mmap(hint, bytes, protection, flags, fd, 0);
  if (p == MAP_FAILED)
    throw Error(Errc::out_of_memory, std::string("dsm: mapping the ") + what + " (" + std::to_string(bytes) +
                                         " bytes) failed: " + std::strerror(errno));
  return static_cast<std::byte*>(p);
}
}  // namespace

Heap::Heap(Job& job, const Config& config, bool local) : bytes_(config.heap_bytes), block_bytes_(config.block_bytes) {
  try {
    memfd_ = ::memfd_create("rdmx-dsm-heap", MFD_CLOEXEC);
    if (memfd_ < 0) throw Error(Errc::out_of_memory, std::string("dsm: memfd_create failed: ") + std::strerror(errno));
    if (::ftruncate(memfd_, static_cast<off_t>(bytes_)) != 0)
      throw Error(Errc::out_of_memory, "dsm: sizing the heap to " + std::to_string(bytes_) + " bytes failed: " +
                                           std::strerror(errno));
    // The address first: a heap no range fits in every process is refused
    // before any process fills its memory (sizing the memfd allocates none).
    map_app(job, config, local);
    rw_ = map_or_throw(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, memfd_, "runtime view");
    twin_ = map_or_throw(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1,
                         "twin area");
  } catch (...) {
    unmap();
    throw;
  }
}

Heap::~Heap() { unmap(); }

void Heap::unmap() noexcept {
  if (app_ != nullptr) ::munmap(app_, bytes_);
  if (rw_ != nullptr) ::munmap(rw_, bytes_);
  if (twin_ != nullptr) ::munmap(twin_, bytes_);
  if (memfd_ >= 0) ::close(memfd_);
}

void Heap::map_app(Job& job, const Config& config, bool local) {
  const std::size_t bytes = bytes_;
  // Process 0 proposes an address, every process tries to map the heap
  // there; if any cannot, all drop it and process 0 proposes another.
  std::string failures;
  for (int attempt = 0; attempt < attempts; ++attempt) {
    std::uintptr_t proposal = config.address;
    if (proposal == 0 && job.rank() == 0) {
      if (attempt == 0) {
        // Where the kernel would put it here: usually free in the peers too.
        void* probe = ::mmap(nullptr, bytes + block_bytes_, PROT_NONE,
                             MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (probe != MAP_FAILED) {
          ::munmap(probe, bytes + block_bytes_);
          proposal = (reinterpret_cast<std::uintptr_t>(probe) + block_bytes_ - 1) / block_bytes_ * block_bytes_;
        }
      }
      // Then the middle of the 47-bit user space, far from heap, libraries and stacks.
      if (proposal == 0) proposal = (std::uintptr_t{0x200000000000} + std::uintptr_t(attempt) * 0x40000000000ull);
    }
    proposal = job.allgather(proposal)[0];
    // A job of one process has no other copy to keep coherent: its threads
    // share the app view like any memory, so it is never protected and
    // never faults (no twins, no merges, no notices).
    const int protection = local ? PROT_READ | PROT_WRITE : PROT_NONE;
    void* p = ::mmap(reinterpret_cast<void*>(proposal), bytes, protection, MAP_SHARED | MAP_FIXED_NOREPLACE, memfd_, 0);
    std::uint32_t ok = p != MAP_FAILED && reinterpret_cast<std::uintptr_t>(p) == proposal ? 1 : 0;
    const int error = errno;
    if (p != MAP_FAILED && ok == 0) ::munmap(p, bytes);  // a kernel that took the address as a hint
    const auto oks = job.allgather(ok);
    std::string failed;
    for (std::uint32_t q = 0; q < oks.size(); ++q)
      if (oks[q] == 0) failed += (failed.empty() ? "" : ", ") + std::to_string(q);
    if (failed.empty()) {
      app_ = static_cast<std::byte*>(p);
      return;
    }
    if (ok != 0) ::munmap(p, bytes);
    failures += "\n  " + hex(proposal) + ": taken in process(es) " + failed +
                (ok == 0 ? std::string(" (here: ") + std::strerror(error) + ")" : "");
    if (config.address != 0) break;
  }
  throw Error(Errc::out_of_memory, "dsm: no address range of " + std::to_string(bytes) +
                                       " bytes is free in every process; tried:" + failures +
                                       "\n  (a smaller RDMX_DSM_HEAP, or Config::address of a range free everywhere)");
}

void Heap::protect(std::uint32_t first, std::uint32_t count, int protection) const {
  if (::mprotect(app_ + offset(first), std::size_t{count} * block_bytes_, protection) != 0)
    throw Error(Errc::invalid_argument, "dsm: mprotect of blocks " + std::to_string(first) + " to " +
                                            std::to_string(first + count - 1) + " failed: " + std::strerror(errno));
}

}  // namespace rdmx::dsm
