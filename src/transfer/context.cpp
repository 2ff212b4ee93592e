#include "rdmx/transfer/context.hpp"

#include <cstdlib>
#include <string>

#include "rdmx/transfer/endpoint.hpp"
#include "rdmx/transfer/status.hpp"
#include "abandon.hpp"
#include "report.hpp"

namespace rdmx::transfer {

Context::Context() {
  ucp_config_t* config = nullptr;
  check(ucp_config_read(nullptr, nullptr, &config), "ucp_config_read (check UCX_* environment variables)");
  // UCX 1.16 selects its protocols anew by default ("protocols v2") and has
  // none for a remote atomic that a transport without native atomics (TCP)
  // must emulate: the first fetch_add then fails ("cannot find remote
  // protocol ... amo_fetch") and its request is canceled (seen with UCX
  // 1.16 over TCP on one machine). The earlier protocols emulate it, and
  // are what UCX 1.13 and 1.14 use by default; a user who sets
  // UCX_PROTO_ENABLE keeps that choice.
  unsigned major = 0, minor = 0, release = 0;
  ucp_get_version(&major, &minor, &release);
  if ((major > 1 || (major == 1 && minor >= 15)) && std::getenv("UCX_PROTO_ENABLE") == nullptr)
    (void)ucp_config_modify(config, "PROTO_ENABLE", "n");  // an unknown key leaves UCX's default
  ucp_params_t params{};
  params.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_MT_WORKERS_SHARED;
  params.features = UCP_FEATURE_RMA | UCP_FEATURE_AMO32 | UCP_FEATURE_AMO64 | UCP_FEATURE_AM | UCP_FEATURE_WAKEUP;
  params.mt_workers_shared = 1;  // workers live on different threads
  ucs_status_t status = ucp_init(&params, config, &handle_);
  ucp_config_release(config);
  check(status, "ucp_init (is UCX_TLS naming transports this machine has?)");
  // The report lists one line per resource, "resource 3  :  md 2  dev 3  flags -- posix/memory".
  const std::string info = detail::report(&ucp_context_print_info, handle_);
  for (const char* tl : {"-- posix/", "-- sysv/", "-- xpmem/"})
    if (info.find(tl) != std::string::npos) shared_memory_ = true;
}

Context::~Context() {
  if (handle_ == nullptr) return;
  // Workers left to the process's exit after a peer failure (worker.cpp)
  // still use the context: it stays too, reachable.
  if (Endpoint::any_failed()) {
    detail::abandon_until_exit(handle_);
    return;
  }
  ucp_cleanup(handle_);
}

}  // namespace rdmx::transfer
