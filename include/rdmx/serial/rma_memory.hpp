// RmaMemory: where RmaVector and RmaValue take their memory from (HPX's
// rma_allocator over the parcelport's memory pool, section 3.4). It hands
// out pieces of an Arena's registered segments through a GeneralAllocator,
// so the memory is pinned when the container is created or grows, never
// during a transfer, and every piece already has its key: the segment's
// region index and the offset inside it.
//
// Pieces are shared (RmaBytes::data is a shared_ptr) and go back to the
// allocator when the last reference goes; they keep the allocator alive,
// so an RmaMemory may be destroyed before the pieces it handed out. The
// Arena must outlive all of them (as for every rdmx::memory allocator).
// Thread-safe.
#pragma once
#include <cstddef>
#include <memory>

#include "rdmx/memory/general_allocator.hpp"
#include "rdmx/serial/chunk.hpp"

namespace rdmx::serial {

// A shared piece of registered memory.
struct RmaBytes {
  std::shared_ptr<std::byte> data;  // null for an empty piece
  std::size_t size = 0;
  RmaKey key;  // of data[0]
};

class RmaMemory {
 public:
  explicit RmaMemory(memory::Arena& arena, memory::GeneralOptions options = {});
  ~RmaMemory();
  RmaMemory(const RmaMemory&) = delete;
  RmaMemory& operator=(const RmaMemory&) = delete;

  // n > 0 bytes aligned to `align`. Throws Errc::out_of_memory when the arena is exhausted.
  RmaBytes allocate(std::size_t n, std::size_t align = 64);

  // The memory rma containers use when given none (also when a received
  // RmaVector must be allocated and InputOptions names none), installed by
  // the program. nullptr until a program installs one; an RmaMemory that is
  // the default uninstalls itself when destroyed. Returns the previous default.
  static RmaMemory* set_process_default(RmaMemory* memory) noexcept;
  static RmaMemory* process_default() noexcept;

  // Where memory comes from when neither a container nor the program names
  // any: the running Job's. serial sits beside the fabric, not above it, so
  // the layer that sees both (action) installs the source, once, before main.
  // The source returns nullptr where it has no memory (no Job, a thread that
  // acts as no worker of it), and may throw. Returns the previous source.
  using DefaultSource = RmaMemory* (*)();
  static DefaultSource set_default_source(DefaultSource source) noexcept;

  // `memory`, else the process default, else the default source's; throws
  // Errc::invalid_argument naming `who` when there is none.
  static RmaMemory& resolve(RmaMemory* memory, const char* who);

 private:
  std::shared_ptr<memory::GeneralAllocator> allocator_;
};

}  // namespace rdmx::serial
