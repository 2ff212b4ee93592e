// The core layer's settings (include/rdmx/core/env.hpp).
#include "settings.hpp"

namespace {
using rdmx::env::Kind;
constexpr rdmx::env::Variable rows[] = {
    {"RDMX_LOG", nullptr, Kind::choice, 0, 0, "error|warn|info|debug|off", "warn", nullptr,
     "which diagnostics rdmx writes to standard error: errors (a call dropped, a process ended), warnings (teardown "
     "giving up on a peer), info (the job's layout and given settings, once per job; the transports UCX chose to each peer, once per "
     "process and peer; leaving with survivors), debug"},
};
}  // namespace

extern "C" const rdmx::env::Table rdmx_core_settings{"core", rows};
