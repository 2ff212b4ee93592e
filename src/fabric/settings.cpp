// The fabric's settings (include/rdmx/core/env.hpp): the job's shape, its
// threads' placement and waits, and send-based calls.
#include "settings.hpp"

namespace {
using rdmx::env::Kind;
constexpr std::uint64_t TiB = 1ull << 40;
constexpr rdmx::env::Variable rows[] = {
    {"RDMX_THREADS", "threads", Kind::count, 1, 1024, nullptr, nullptr, "1, or T of RDMX_LAYOUT",
     "worker threads per process"},
    {"RDMX_LAYOUT", "layout", Kind::text, 0, 0, "MxPxT, each at least 1", nullptr, "none",
     "layout to expect (machines x processes per machine x threads); the job fails if the launcher started another"},
    {"RDMX_PIN", "pin", Kind::choice, 0, 0, "auto|on|off", "auto", nullptr,
     "pin worker threads to cores (auto: when every thread of the host gets a core)"},
    {"RDMX_HELPERS", "helpers", Kind::count, 0, 1024, nullptr, "0", nullptr,
     "helper threads per process that run the one-sided calls addressed to the worker threads, at most "
     "RDMX_THREADS (docs/invoke.md, \"Helper threads\")"},
    {"RDMX_PROGRESS", "progress", Kind::choice, 0, 0, "auto|spin|yield|block", "auto", nullptr,
     "what an idle wait does after RDMX_IDLE_SPINS idle polls: keep spinning, yield its core, or sleep until its "
     "network worker has an event (auto: yield; docs/fabric.md, \"Progress\")"},
    {"RDMX_IDLE_SPINS", nullptr, Kind::count, 0, 0xffffffffull, nullptr, nullptr,
     "65536, or 1 when threads outnumber cores", "idle polls before a waiting thread yields or sleeps"},
    {"RDMX_EAGER_ENDPOINTS", nullptr, Kind::flag, 0, 1, nullptr, "0", nullptr,
     "create every endpoint at start-up instead of on first use"},
    {"RDMX_SERVE_IDLE", nullptr, Kind::flag, 0, 1, nullptr, "0", nullptr,
     "the service thread runs the calls of worker threads outside Job::run (as them) and drains their retry_async "
     "queues"},
    {"RDMX_CHECK_ACCESS", nullptr, Kind::flag, 0, 1, nullptr, "0", nullptr,
     "debug: every rdmx::put, get and atomic asks the owner whether its locator lies inside one allocation "
     "(allocate_remote or local_locator); without it access is checked per registered segment"},
    {"RDMX_RECEIVE_PROBE_MS", nullptr, Kind::count, 0, 3'600'000, nullptr, "10000", nullptr,
     "after a process on this host fails: how long a worker waits for an answer from a live one before it takes its "
     "shared-memory receive queue for blocked and fails the host's processes (0: never checks)"},
    {"RDMX_MAX_MESSAGE", nullptr, Kind::size, 1, TiB, nullptr, "1G", nullptr, "largest call_buffer payload"},
};
}  // namespace

extern "C" const rdmx::env::Table rdmx_fabric_settings{"fabric", rows};
