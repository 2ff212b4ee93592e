// The transfer layer's settings (include/rdmx/core/env.hpp).
#include "settings.hpp"

namespace {
using rdmx::env::Kind;
constexpr rdmx::env::Variable rows[] = {
    {"RDMX_U_MAX", nullptr, Kind::count, 1, 1ull << 20, nullptr, "64", nullptr,
     "one-sided operations per completion flush (Seriema's u_max)"},
};
}  // namespace

extern "C" const rdmx::env::Table rdmx_transfer_settings{"transfer", rows};
