// Far memory's settings (include/rdmx/core/env.hpp): servers, the local
// budget, the path objects travel and the evacuator (docs/far.md).
#include "settings.hpp"

namespace {
using rdmx::env::Kind;
constexpr std::uint64_t KiB = 1ull << 10, TiB = 1ull << 40;
constexpr rdmx::env::Variable rows[] = {
    {"RDMX_FAR_SERVERS", nullptr, Kind::text, 0, 0, "comma-separated ranks", nullptr, "the last process",
     "processes that serve far memory (far::Manager)"},
    {"RDMX_FAR_REGION", nullptr, Kind::size, 64 * KiB, 4 * TiB, nullptr, "16M", nullptr,
     "registered bytes each far-memory server maps and publishes"},
    {"RDMX_FAR_CACHE", nullptr, Kind::size, 64 * KiB, 64 * TiB, nullptr, "4M", nullptr,
     "local budget: bytes of the far-memory cache arena"},
    {"RDMX_FAR_REPLICATION", nullptr, Kind::count, 1, 16, nullptr, "1", nullptr,
     "far-memory servers holding each object (the servers form groups of this many)"},
    {"RDMX_FAR_PATH", nullptr, Kind::choice, 0, 0, "one-sided|two-sided", "one-sided", nullptr,
     "how far objects travel: one-sided get/put, or requests served by the server's CPU"},
    {"RDMX_FAR_EVACUATOR", nullptr, Kind::choice, 0, 0, "auto|on|off", "auto", nullptr,
     "a background thread per far::Manager keeps part of the cache free (auto: where its write-backs need no "
     "service thread)"},
    {"RDMX_FAR_EVACUATOR_WATCH", nullptr, Kind::choice, 0, 0, "auto|on|off", "auto", nullptr,
     "the evacuator watches for work 200 us before it sleeps (auto: where each process of the machine has two cores "
     "to spare)"},
    {"RDMX_FAR_FREE_LOW", nullptr, Kind::count, 1, 50, nullptr, "5", nullptr,
     "percent of the far-memory cache kept free: below it the evacuator wakes"},
    {"RDMX_FAR_FREE_HIGH", nullptr, Kind::count, 1, 50, nullptr, "10", nullptr,
     "percent of the far-memory cache the evacuator frees up to once woken"},
    {"RDMX_FAR_PREFETCH", nullptr, Kind::count, 0, 64, nullptr, "0", nullptr,
     "chunks a far::Array keeps in flight ahead of a strided access pattern (0: no prefetching; 16 is a good "
     "depth)"},
    {"RDMX_FAR_CHECK", nullptr, Kind::flag, 0, 1, nullptr, "0", nullptr,
     "cache hits check the far block's generation too, refusing a byte-wise copy of a freed object (misses always "
     "check)"},
};
}  // namespace

extern "C" const rdmx::env::Table rdmx_far_settings{"far", rows};
