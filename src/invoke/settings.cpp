// The one-sided invocation layer's settings (include/rdmx/core/env.hpp):
// the messengers' chunk rings.
#include "settings.hpp"

namespace {
using rdmx::env::Kind;
constexpr std::uint64_t KiB = 1ull << 10, GiB = 1ull << 30, TiB = 1ull << 40;
constexpr rdmx::env::Variable rows[] = {
    {"RDMX_CHUNK_SIZE", nullptr, Kind::size, 4 * KiB, 2 * GiB, nullptr, "256K", nullptr,
     "bytes per one-sided messenger chunk, a multiple of 8; the largest one-sided call is 64 bytes less"},
    {"RDMX_CHUNKS", nullptr, Kind::count, 1, 127, nullptr, "2", nullptr, "chunks a messenger sets up per destination thread"},
    {"RDMX_MAX_CHUNKS", nullptr, Kind::count, 1, 127, nullptr, "16", nullptr,
     "most chunks per destination (at least RDMX_CHUNKS)"},
    {"RDMX_RING_BUDGET", nullptr, Kind::size, 0, 64 * TiB, nullptr, "512M", nullptr,
     "most bytes of messenger chunks a process holds (its receivers' chunks and its senders' mirrors); past it new "
     "rings are refused and those messengers send their calls as active messages"},
    {"RDMX_PUBLISH_BYTES", nullptr, Kind::size, 1, 2 * GiB, nullptr, "4K", nullptr,
     "a messenger publishes after this many unpublished bytes"},
    {"RDMX_MAPPED_CHUNKS", nullptr, Kind::flag, 0, 1, nullptr, "1", nullptr,
     "over shared memory, serialize one-sided calls straight into the destination's mapped chunk (0: mirror + RDMA "
     "write)"},
};
}  // namespace

extern "C" const rdmx::env::Table rdmx_invoke_settings{"invoke", rows};
