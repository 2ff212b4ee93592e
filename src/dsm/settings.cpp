// The DSM's settings (include/rdmx/core/env.hpp): the heap, its block and
// the coherence protocol (docs/dsm.md).
#include "settings.hpp"

namespace {
using rdmx::env::Kind;
constexpr std::uint64_t KiB = 1ull << 10, GiB = 1ull << 30, TiB = 1ull << 40;
constexpr rdmx::env::Variable rows[] = {
    {"RDMX_DSM_HEAP", nullptr, Kind::size, 64 * KiB, TiB, nullptr, "32M",
     "rdmx_omp programs: their shared variables + stack + 32M",
     "bytes of the DSM's shared heap, a multiple of RDMX_DSM_BLOCK"},
    {"RDMX_DSM_BLOCK", nullptr, Kind::size, 4 * KiB, GiB, nullptr, "4K",
     "rdmx_omp programs: 16K, up to 64K with shared variables",
     "the DSM's coherence block, a multiple of the page size"},
    {"RDMX_DSM_HOME", nullptr, Kind::choice, 0, 0, "floating|fixed", "floating", nullptr,
     "home policy: floating (a block moves to its last releaser, MENPS) or fixed (home b mod P, remote diff merge)"},
    {"RDMX_DSM_INVALIDATION", nullptr, Kind::choice, 0, 0, "signature|directory", "signature", nullptr,
     "how cached blocks learn they are stale: signature (write notices travel with each synchronization, MENPS) or "
     "directory (each block's manager tracks its sharers and a releaser invalidates them; baseline, at most 63 "
     "processes)"},
    {"RDMX_DSM_NOTICES", nullptr, Kind::count, 0, 1ull << 20, nullptr, "1024", nullptr,
     "write notices a signature holds before it overflows (acquirers then fall back to logical leases; 0: leases "
     "only)"},
    {"RDMX_DSM_MUTEXES", nullptr, Kind::count, 1, 1ull << 16, nullptr, "16", nullptr, "global DSM mutexes (dsm::Mutex indices)"},
    {"RDMX_DSM_LEASE", nullptr, Kind::count, 0, 1ull << 32, nullptr, "16", nullptr,
     "logical lease of a fetched block, used when a signature overflowed (Tardis)"},
    {"RDMX_DSM_KEEP", nullptr, Kind::count, 0, 255, nullptr, "1", nullptr,
     "fast release (floating home): releases a written block stays writable without changing before it is made "
     "read-only again (0: off, every release re-protects)"},
    {"RDMX_DSM_READ_AHEAD", nullptr, Kind::count, 0, 64, nullptr, "8", nullptr,
     "read-ahead: a read miss on the block after the thread's previous one also fetches up to this many following "
     "uncached blocks, made readable with it by one mprotect (0: off)"},
    {"RDMX_DSM_WRITE_AHEAD", nullptr, Kind::count, 0, 64, nullptr, "8", nullptr,
     "write-ahead: a write fault on the block after the thread's previous run also makes following blocks writable "
     "(1, then twice the previous run, up to this many), with one mprotect (0: off)"},
    {"RDMX_DSM_CHECK_RACES", nullptr, Kind::flag, 0, 1, nullptr, "0", nullptr,
     "debug: report bytes two processes wrote between the same synchronizations (floating home)"},
};
}  // namespace

extern "C" const rdmx::env::Table rdmx_dsm_settings{"dsm", rows};
