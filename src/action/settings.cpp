// The action layer's settings (include/rdmx/core/env.hpp).
#include "settings.hpp"

namespace {
using rdmx::env::Kind;
constexpr rdmx::env::Variable rows[] = {
    {"RDMX_PARCEL_CALLS", nullptr, Kind::choice, 0, 0, "auto|one-sided|send", "auto", nullptr,
     "how action parcels travel: auto as one-sided calls, except to processes reached only over TCP (one-sided "
     "writes emulated), where as send-based calls (UCX active messages); one-sided or send forces one, except "
     "for calls that choose their rdmx::parcel::Path"},
};
}  // namespace

extern "C" const rdmx::env::Table rdmx_action_settings{"action", rows};
