// The serialization layer's settings (include/rdmx/core/env.hpp).
#include "settings.hpp"

namespace {
using rdmx::env::Kind;
constexpr std::uint64_t TiB = 1ull << 40;
constexpr rdmx::env::Variable rows[] = {
    {"RDMX_ZERO_COPY_THRESHOLD", nullptr, Kind::size, 64, TiB, "0|disabled|off|none", "64K", nullptr,
     "bytes from which serialized data travels as a zero-copy chunk"},
    {"RDMX_REG_CACHE_BYTES", nullptr, Kind::size, 1, 64 * TiB, nullptr, "256M", nullptr,
     "most memory the serialization registration cache keeps pinned"},
};
}  // namespace

extern "C" const rdmx::env::Table rdmx_serial_settings{"serial", rows};
