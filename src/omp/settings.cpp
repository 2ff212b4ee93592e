// The OpenMP runtime's settings (include/rdmx/core/env.hpp); only programs
// linked with rdmx_omp read them (docs/omp.md).
#include "settings.hpp"

namespace {
using rdmx::env::Kind;
constexpr std::uint64_t KiB = 1ull << 10, GiB = 1ull << 30;
constexpr rdmx::env::Variable rows[] = {
    {"RDMX_OMP_STACK", nullptr, Kind::size, 64 * KiB, 64 * GiB, nullptr, "8M", nullptr,
     "stack of the master thread (the program's main), in the DSM heap"},
    {"RDMX_OMP_WORK_SHARES", nullptr, Kind::count, 1, 1ull << 20, nullptr, "256", nullptr,
     "work-sharing constructs a thread may run ahead of the slowest before it waits (nowait constructs in a row)"},
    {"RDMX_OMP_STATS", nullptr, Kind::flag, 0, 1, nullptr, "0", nullptr,
     "each process prints its region, barrier and DSM counts to stderr at the end"},
};
}  // namespace

extern "C" const rdmx::env::Table rdmx_omp_settings{"omp", rows};
