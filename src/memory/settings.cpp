// The memory layer's settings (include/rdmx/core/env.hpp).
#include "settings.hpp"

namespace {
using rdmx::env::Kind;
constexpr std::uint64_t KiB = 1ull << 10, TiB = 1ull << 40;
constexpr rdmx::env::Variable rows[] = {
    {"RDMX_ARENA_SEGMENT", nullptr, Kind::size, 4 * KiB, TiB, nullptr, "64M", nullptr,
     "size of each registered arena segment (rounded up to the page size)"},
    {"RDMX_ARENA_MAX", nullptr, Kind::size, 4 * KiB, 64 * TiB, nullptr, "1G", nullptr,
     "most registered memory one arena maps"},
    {"RDMX_ARENA_BACKING", nullptr, Kind::choice, 0, 0, "auto|ucx|hugetlb|thp", "auto", nullptr,
     "where arena segments come from: huge pages where the system has them (auto), UCX-allocated shared memory "
     "(ucx), hugetlbfs pages (hugetlb) or transparent huge pages (thp); docs/memory.md"},
};
}  // namespace

extern "C" const rdmx::env::Table rdmx_memory_settings{"memory", rows};
