#include "rdmx/fabric/rma.hpp"

#include <cstring>

#include "rdmx/fabric/call.hpp"
#include "rdmx/memory/arena.hpp"
#include "rdmx/memory/region_table.hpp"
#include "runtime.hpp"

namespace rdmx {
namespace {

fabric::Runtime& runtime() { return fabric::Runtime::current(); }

// What a process tells others about one of its regions.
struct RegionInfo {
  std::uint32_t known = 0;
  std::uint32_t rkey_length = 0;
  std::uint64_t base = 0;
  std::uint64_t length = 0;
  std::byte rkey[1024];
};

void check_locator(const RemoteLocator& where) {
  if (where.process >= runtime().size())
    throw Error(Errc::no_such_destination, "locator names process " + std::to_string(where.process) + " but the job has " +
                                               std::to_string(runtime().size()));
}

// RDMX_CHECK_ACCESS: the owner confirms that the locator lies inside one
// piece of memory it handed out (a round trip per operation: a debug mode).
// Without it, access is checked against the registered region only.
void check_access(const RemoteLocator& where, const char* what) {
  fabric::Runtime& rt = runtime();
  if (!rt.check_access()) return;
  check_locator(where);
  std::uint32_t allowed = 0;
  const std::uint32_t region = where.region;
  const std::uint64_t offset = where.offset, length = where.length;
  if (where.process == rt.rank()) {
    allowed = rt.access_allowed(region, offset, length) ? 1 : 0;
  } else {
    Synchronizer sync;
    call_return(ThreadId{where.process, service_thread}, [region, offset, length]() -> std::uint32_t {
      return fabric::Runtime::current().access_allowed(region, offset, length) ? 1u : 0u;
    }, into(allowed, sync));
    sync.wait();
  }
  if (allowed == 0)
    throw Error(Errc::invalid_argument, std::string(what) + ": locator {process " + std::to_string(where.process) + ", region " +
                                            std::to_string(region) + ", offset " + std::to_string(offset) + ", length " +
                                            std::to_string(length) + "} is not inside one allocation of process " +
                                            std::to_string(where.process) + " (RDMX_CHECK_ACCESS)");
}

}  // namespace

namespace fabric {

memory::Arena& Runtime::arena_for(int numa_node) {
  std::lock_guard lock(arenas_mutex_);
  auto& arena = arenas_[numa_node];
  if (!arena) {
    memory::ArenaOptions options;
    options.numa_node = numa_node;
    arena = std::make_unique<memory::Arena>(context_, options);
  }
  return *arena;
}

const ThreadContext::RemoteRegion& ThreadContext::remote_region(std::uint32_t process, std::uint32_t region) {
  const std::uint64_t key = (std::uint64_t{process} << 32) | region;
  {
    std::lock_guard lock(endpoints_mutex_);
    if (auto it = regions_.find(key); it != regions_.end()) return it->second;
  }
  // Ask the owner's service thread (a no-setup call; its workers are not involved).
  RegionInfo info{};
  Synchronizer sync;
  call_return(ThreadId{process, service_thread}, [region] {
    RegionInfo out{};
    const transfer::MemoryRegion* r = memory::RegionTable::process().get(region);
    if (r != nullptr && r->packed_rkey().size() <= sizeof out.rkey) {
      out.known = 1;
      out.base = reinterpret_cast<std::uint64_t>(r->data());
      out.length = r->size();
      out.rkey_length = static_cast<std::uint32_t>(r->packed_rkey().size());
      std::memcpy(out.rkey, r->packed_rkey().data(), out.rkey_length);
    }
    return out;
  }, into(info, sync));
  sync.wait();
  if (info.known == 0)
    throw Error(Errc::invalid_argument, "process " + std::to_string(process) + " has no registered region " + std::to_string(region));
  transfer::Endpoint& ep = rma_endpoint(process);
  RemoteRegion entry{info.base, info.length, transfer::RemoteKey(ep, std::span(info.rkey, info.rkey_length))};
  std::lock_guard lock(endpoints_mutex_);
  return regions_.try_emplace(key, std::move(entry)).first->second;
}

}  // namespace fabric

RemoteLocator allocate_remote(std::uint32_t process, std::size_t bytes, std::optional<ThreadId> near) {
  fabric::Runtime& rt = runtime();
  rt.validate(ThreadId{process, service_thread});
  if (near) rt.validate(*near);
  if (bytes == 0) throw Error(Errc::invalid_argument, "allocate_remote: cannot allocate 0 bytes");
  const std::uint32_t near_thread = near ? near->thread : service_thread;
  RemoteLocator where{};
  Synchronizer sync;
  // What the service thread throws (out_of_memory, ...) comes back through sync.
  call_return(ThreadId{process, service_thread}, [bytes, near_thread] {
    fabric::Runtime& r = fabric::Runtime::current();
    memory::Block block = r.arena_for(r.numa_node_of(near_thread)).allocate_chunk(bytes);
    std::memset(block.data, 0, bytes);  // like calloc: recycled arena memory holds old data
    r.remember_allocation(block);
    RemoteLocator out = block.locator(r.rank());
    out.length = bytes;
    return out;
  }, into(where, sync));
  try {
    sync.wait();
  } catch (const Error& e) {
    throw Error(e.code(), "allocate_remote on process " + std::to_string(process) + ": " + e.what());
  }
  return where;
}

void free_remote(const RemoteLocator& memory) {
  check_locator(memory);
  std::uint32_t ok = 0;
  Synchronizer sync;
  const RemoteLocator where = memory;
  call_return(ThreadId{memory.process, service_thread}, [where]() -> std::uint32_t {
    return fabric::Runtime::current().forget_allocation(where) ? 1u : 0u;
  }, into(ok, sync));
  sync.wait();
  if (ok == 0)
    throw Error(Errc::invalid_argument, "free_remote: process " + std::to_string(memory.process) +
                                            " allocated nothing at region " + std::to_string(memory.region) + " offset " +
                                            std::to_string(memory.offset));
}

RemoteLocator local_locator(const void* address, std::size_t length) {
  auto where = memory::RegionTable::process().find(address, length);
  if (!where)
    throw Error(Errc::invalid_argument, "local_locator: the memory is not inside a registered region (allocate it from the arena)");
  const RemoteLocator granted{runtime().rank(), where->region, where->offset, length};
  runtime().remember_grant(granted);
  return granted;
}

transfer::RemoteAddress resolve(const RemoteLocator& where) {
  check_locator(where);
  const auto& region = runtime().calling_context().remote_region(where.process, where.region);
  if (where.offset > region.length || where.length > region.length - where.offset)
    throw Error(Errc::invalid_argument, "locator {process " + std::to_string(where.process) + ", region " +
                                            std::to_string(where.region) + ", offset " + std::to_string(where.offset) +
                                            ", length " + std::to_string(where.length) + "} lies outside its region of " +
                                            std::to_string(region.length) + " bytes");
  return transfer::RemoteAddress{region.base + where.offset, region.key.get()};
}

transfer::Transmitter& transmitter(std::uint32_t process) {
  runtime().validate(ThreadId{process, service_thread});
  return runtime().calling_context().transmitter(process);
}

bool rma_emulated(std::uint32_t process) {
  // Callers ask per message (the action and MCTS layers choose a path by
  // it): a known answer is one relaxed load, without the context's
  // endpoint lock; an endpoint that has no report from UCX yet says "not
  // emulated" and is asked again next time.
  fabric::Runtime& rt = runtime();
  rt.validate(ThreadId{process, service_thread});
  std::atomic<std::int8_t>& known = rt.rma_emulation(process);
  if (const std::int8_t k = known.load(std::memory_order_relaxed); k >= 0) return k != 0;
  const transfer::Endpoint& ep = rt.calling_context().rma_endpoint(process);
  const bool emulated = ep.rma_emulated();
  if (ep.rma_emulation_known()) known.store(emulated ? 1 : 0, std::memory_order_relaxed);
  return emulated;
}

transfer::Endpoint& endpoint_to(ThreadId peer) {
  fabric::Runtime& rt = runtime();
  rt.validate(peer);
  return rt.calling_context().endpoint(peer.process, rt.worker_of(peer.thread));
}

Future<void> put(const void* source, const RemoteLocator& target) {
  check_access(target, "put");
  return transmitter(target.process).put(source, target.length, resolve(target));
}
Future<void> get(void* destination, const RemoteLocator& source) {
  check_access(source, "get");
  return transmitter(source.process).get(destination, source.length, resolve(source));
}
namespace {
Synchronizer& synchronizer_of(const Completion& done, const char* what) {
  if (done.synchronizer() == nullptr)
    throw Error(Errc::invalid_argument, std::string(what) + " with a completion needs when_sent(sync) or when_run(sync) "
                                                            "(post_" + what + " is the fire-and-forget form)");
  return *done.synchronizer();
}
}  // namespace

void notify_when_flushed(transfer::Transmitter& tx, std::uint32_t process, transfer::EpochTag tag, Synchronizer& sync) {
  sync.add();
  runtime().calling_context().notify_when_flushed(tx, process, tag, sync);
}

void put(const void* source, const RemoteLocator& target, const Completion& done) {
  Synchronizer& sync = synchronizer_of(done, "put");
  check_access(target, "put");
  transfer::Transmitter& tx = transmitter(target.process);
  notify_when_flushed(tx, target.process, tx.post_put(source, target.length, resolve(target)), sync);
}
void get(void* destination, const RemoteLocator& source, const Completion& done) {
  Synchronizer& sync = synchronizer_of(done, "get");
  check_access(source, "get");
  transfer::Transmitter& tx = transmitter(source.process);
  notify_when_flushed(tx, source.process, tx.post_get(destination, source.length, resolve(source)), sync);
}
void blocking_get(void* destination, const RemoteLocator& source) {
  check_access(source, "get");
  transmitter(source.process).blocking_get(destination, source.length, resolve(source));
}
transfer::EpochTag post_put(const void* source, const RemoteLocator& target) {
  check_access(target, "post_put");
  return transmitter(target.process).post_put(source, target.length, resolve(target));
}
transfer::EpochTag post_get(void* destination, const RemoteLocator& source) {
  check_access(source, "post_get");
  return transmitter(source.process).post_get(destination, source.length, resolve(source));
}

namespace {
transfer::RemoteAddress resolve_word(const RemoteLocator& word) {
  if (word.length != 8) throw Error(Errc::invalid_argument, "atomics need an 8-byte locator");
  auto address = resolve(word);
  if (address.address % 8 != 0) throw Error(Errc::invalid_argument, "atomics need an 8-byte aligned locator");
  return address;
}
}  // namespace

Future<std::uint64_t> fetch_add(const RemoteLocator& word, std::uint64_t value) {
  check_access(word, "fetch_add");
  return transmitter(word.process).fetch_add(resolve_word(word), value);
}
Future<std::uint64_t> compare_swap(const RemoteLocator& word, std::uint64_t expected, std::uint64_t desired) {
  check_access(word, "compare_swap");
  return transmitter(word.process).compare_swap(resolve_word(word), expected, desired);
}
std::uint64_t blocking_fetch_add(const RemoteLocator& word, std::uint64_t value) {
  check_access(word, "fetch_add");
  return transmitter(word.process).blocking_fetch_add(resolve_word(word), value);
}
std::uint64_t blocking_compare_swap(const RemoteLocator& word, std::uint64_t expected, std::uint64_t desired) {
  check_access(word, "compare_swap");
  return transmitter(word.process).blocking_compare_swap(resolve_word(word), expected, desired);
}
void flush(std::uint32_t process) { transmitter(process).flush(); }

}  // namespace rdmx
