#include "rdmx/serial/rma_memory.hpp"

#include <atomic>
#include <string>

#include "rdmx/core/error.hpp"

namespace rdmx::serial {

namespace {
std::atomic<RmaMemory*> process_default_memory{nullptr};
// Constant-initialized: a source installed by another file's static
// initializer is never overwritten by this one's.
constinit std::atomic<RmaMemory::DefaultSource> default_source{nullptr};
}  // namespace

RmaMemory::RmaMemory(memory::Arena& arena, memory::GeneralOptions options)
    : allocator_(std::make_shared<memory::GeneralAllocator>(arena, options)) {}

RmaMemory::~RmaMemory() {
  RmaMemory* self = this;
  process_default_memory.compare_exchange_strong(self, nullptr);
}

RmaBytes RmaMemory::allocate(std::size_t n, std::size_t align) {
  const memory::Block block = allocator_->allocate(n, align);
  // The deleter holds the allocator, so pieces may outlive this RmaMemory.
  std::shared_ptr<std::byte> data(block.data, [allocator = allocator_](std::byte* p) { allocator->deallocate(p); });
  return {std::move(data), n, {block.region, block.offset}};
}

RmaMemory* RmaMemory::set_process_default(RmaMemory* memory) noexcept { return process_default_memory.exchange(memory); }

RmaMemory* RmaMemory::process_default() noexcept { return process_default_memory.load(); }

RmaMemory::DefaultSource RmaMemory::set_default_source(DefaultSource source) noexcept {
  return default_source.exchange(source);
}

RmaMemory& RmaMemory::resolve(RmaMemory* memory, const char* who) {
  if (memory == nullptr) memory = process_default();
  if (memory == nullptr)
    if (DefaultSource source = default_source.load()) memory = source();
  if (memory == nullptr)
    throw Error(Errc::invalid_argument, std::string(who) +
                                            " needs registered memory: use it on a worker thread of a Job (which provides "
                                            "it), pass an RmaMemory (InputOptions::rma_memory when decoding) or install "
                                            "one with RmaMemory::set_process_default");
  return *memory;
}

}  // namespace rdmx::serial
