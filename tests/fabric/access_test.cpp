// Remote access checked per allocation (RDMX_CHECK_ACCESS=1) against the
// default, per registered segment. Process 1 holds locators to two
// allocations of process 0 and forges a third that spans from one into
// the other: the default lets the put through (the segment is registered),
// the debug mode refuses it naming the locator, and a freed allocation is
// refused too. Prints "access: checked" or "access: per segment".
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "rdmx/fabric/call.hpp"
#include "rdmx/fabric/collective.hpp"
#include "rdmx/fabric/job.hpp"
#include "rdmx/fabric/rma.hpp"
#include "rdmx/memory/arena.hpp"

using namespace rdmx;

namespace {
[[noreturn]] void fail(const std::string& what) {
  std::fprintf(stderr, "access: FAILED: %s\n", what.c_str());
  std::fflush(stderr);
  std::_Exit(1);
}

// Whether `op` was refused as RDMX_CHECK_ACCESS refuses.
template <class Op>
bool refused(Op op) {
  try {
    op();
    return false;
  } catch (const Error& e) {
    if (e.code() != Errc::invalid_argument || std::string(e.what()).find("not inside one allocation") == std::string::npos)
      fail(std::string("unexpected error: ") + e.what());
    return true;
  }
}
}  // namespace

int main(int argc, char** argv) {
  const char* flag = std::getenv("RDMX_CHECK_ACCESS");
  const bool checked = flag != nullptr && std::string(flag) == "1";
  Job job(argc, argv);
  if (job.size() != 2) fail("needs 2 processes");
  if (job.rank() == 1) {
    const RemoteLocator a = allocate_remote(0, 256), b = allocate_remote(0, 256);
    std::byte bytes[256];
    std::memset(bytes, 5, sizeof bytes);
    if (refused([&] { put(bytes, a).get(); })) fail("a put into its own allocation was refused");
    if (refused([&] { fetch_add(RemoteLocator{a.process, a.region, a.offset, 8}, 1).get(); }))
      fail("an atomic inside its allocation was refused");
    // Forged: from the middle of a to 256 bytes on, past its end.
    const RemoteLocator forged{a.process, a.region, a.offset + 128, 256};
    if (refused([&] { put(bytes, forged).get(); }) != checked)
      fail(checked ? "a forged locator was let through" : "the default refused a locator inside the segment");
    if (refused([&] { get(bytes, RemoteLocator{b.process, b.region, b.offset + 64, 64}).get(); }))
      fail("a get inside its allocation was refused");
    free_remote(b);
    if (refused([&] { get(bytes, b).get(); }) != checked) fail("a freed allocation was let through");
    // Memory process 0 offered with local_locator, from its arena.
    RemoteLocator offered{};
    Synchronizer sync;
    call_return(ThreadId{0, service_thread}, [] {
      memory::Block block = Job::current().arena().allocate_chunk(512);
      return local_locator(block.data, 512);
    }, into(offered, sync));
    sync.wait();
    if (refused([&] { put(bytes, RemoteLocator{offered.process, offered.region, offered.offset + 256, 256}).get(); }))
      fail("a put into offered memory was refused");
    std::printf("access: %s\n", checked ? "checked" : "per segment");
  }
  job.barrier();
  return 0;
}
