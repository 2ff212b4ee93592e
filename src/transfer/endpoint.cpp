#include "rdmx/transfer/endpoint.hpp"

#include <ucs/debug/log_def.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <sstream>
#include <vector>

#include "rdmx/core/error.hpp"
#include "rdmx/transfer/status.hpp"
#include "rdmx/transfer/worker.hpp"
#include "abandon.hpp"
#include "report.hpp"

namespace rdmx::transfer {
namespace {

// UCX logs an error when no transport of a peer can report peer failures
// (shared memory, in UCX 1.13). We probe for that and fall back, so the
// message is expected; drop it only while this thread probes.
thread_local bool probing_peer_mode = false;

ucs_log_func_rc_t filter_probe(const char*, unsigned, const char*, ucs_log_level_t, const ucs_log_component_config_t*,
                               const char*, va_list) {
  const detail::OutOfUcx visible;  // UCX calls this from progress (TSan builds)
  return probing_peer_mode ? UCS_LOG_FUNC_RC_STOP : UCS_LOG_FUNC_RC_CONTINUE;
}

ucs_status_t create(ucp_worker_h worker, const ucp_address_t* address, ucp_err_handling_mode_t mode,
                    ucp_err_handler_cb_t callback, void* arg, ucp_ep_h* ep) {
  ucp_ep_params_t params{};
  params.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                      UCP_EP_PARAM_FIELD_ERR_HANDLER;
  params.address = address;
  params.err_mode = mode;
  params.err_handler.cb = callback;
  params.err_handler.arg = arg;
  return ucp_ep_create(worker, &params, ep);
}

// One lane of an endpoint: its transport/device and what UCX uses it for
// ("am", "am_bw#0", "rma#0", "rma_bw#0", "amo#0", "wireup", ...).
struct Lane {
  std::string transport;
  std::vector<std::string> uses;
};

// UCX 1.13 has no query for an endpoint's lanes; its report lists one line
// per lane: "lane[0]:  1:posix/memory.0 md[1]  -> md[1]/posix/sysdev[255] amo#0 am".
// Between the resource index and the path index (".0") is transport/device;
// after the remote memory domain come the uses.
std::vector<Lane> lanes_of(ucp_ep_h ep) {
  const std::string info = detail::report(&ucp_ep_print_info, ep);
  std::vector<Lane> lanes;
  for (std::size_t at = info.find("lane["); at != std::string::npos; at = info.find("lane[", at + 1)) {
    std::istringstream line(info.substr(at, info.find('\n', at) - at));
    std::string word, resource;
    line >> word >> resource;  // "lane[0]:", "1:posix/memory.0"
    const std::size_t colon = resource.find(':');
    const std::size_t path = resource.rfind('.');
    if (colon == std::string::npos || resource.find('/', colon) == std::string::npos) continue;
    Lane lane;
    lane.transport = resource.substr(colon + 1, (path != std::string::npos && path > colon ? path : resource.size()) - colon - 1);
    while (line >> word && word != "->") {
    }
    line >> word;  // the remote memory domain
    while (line >> word) lane.uses.push_back(word);
    lanes.push_back(std::move(lane));
  }
  return lanes;
}

}  // namespace

Endpoint::Endpoint(Worker& worker, std::span<const std::byte> remote_address, std::string peer_name, Watch watch)
    : worker_(&worker), peer_name_(std::move(peer_name)) {
  static std::once_flag install_filter;
  std::call_once(install_filter, [] { ucs_log_push_handler(&filter_probe); });
  auto* address = reinterpret_cast<const ucp_address_t*>(remote_address.data());
  ucs_status_t status = UCS_ERR_UNREACHABLE;
  if (watch == Watch::transport) {
    probing_peer_mode = true;
    status = create(worker.get(), address, UCP_ERR_HANDLING_MODE_PEER, &Endpoint::error_callback, this, &handle_);
    probing_peer_mode = false;
  }
  if (status == UCS_ERR_UNREACHABLE) {
    // The owner watches the peer, or no transport to it detects failures
    // (shared memory in UCX 1.13): connect without, and leave failure
    // detection to the owner.
    detects_failure_ = false;
    status = create(worker.get(), address, UCP_ERR_HANDLING_MODE_NONE, &Endpoint::error_callback, this, &handle_);
  }
  if (status == UCS_ERR_SHMEM_SEGMENT)
    // The peer's shared-memory FIFO cannot be opened: the process that owned
    // it has exited, though /proc may not say so yet.
    throw Error(Errc::peer_failed, "ucp_ep_create to " + peer_name_ + " failed: " + ucs_status_string(status) +
                                       " (the peer's segment is gone)");
  check(status, "ucp_ep_create to " + peer_name_);
}

bool Endpoint::rma_emulated() const {
  // Printing and parsing the report costs microseconds; the lanes do not
  // change once the endpoint has them.
  const std::int8_t known = emulated_.load(std::memory_order_relaxed);
  if (known >= 0) return known != 0;
  const std::vector<Lane> lanes = lanes_of(handle_);
  if (lanes.empty()) return false;  // no report: ask again next time
  const bool all_tcp = std::all_of(lanes.begin(), lanes.end(), [](const Lane& l) { return l.transport.starts_with("tcp/"); });
  emulated_.store(all_tcp ? 1 : 0, std::memory_order_relaxed);
  return all_tcp;
}

std::string Endpoint::transports() const {
  const std::vector<Lane> lanes = lanes_of(handle_);
  if (lanes.empty()) return "no lanes reported by UCX";
  auto carrying = [&](auto&& use_matches) {
    std::vector<std::string> seen;  // a transport may have several lanes
    std::string names;
    for (const Lane& lane : lanes) {
      if (std::none_of(lane.uses.begin(), lane.uses.end(), use_matches)) continue;
      if (std::find(seen.begin(), seen.end(), lane.transport) != seen.end()) continue;
      seen.push_back(lane.transport);
      names += (names.empty() ? "" : "+") + lane.transport;
    }
    return names.empty() ? std::string("over am") : names;
  };
  const std::string am = carrying([](const std::string& u) { return u == "am" || u.starts_with("am_bw"); });
  const std::string rma = carrying([](const std::string& u) { return u.starts_with("rma"); });
  const std::string atomics = carrying([](const std::string& u) { return u.starts_with("amo"); });
  return "rma " + rma + ", am " + am + ", atomics " + atomics;
}

namespace {
std::atomic<bool> failure_seen{false};
}

bool Endpoint::any_failed() noexcept { return failure_seen.load(std::memory_order_acquire); }

void detail::abandon_until_exit(void* handle) {
  static std::mutex mutex;
  static auto* kept = new std::vector<void*>();
  std::lock_guard lock(mutex);
  kept->push_back(handle);
}

void Endpoint::mark_failed(ucs_status_t status) {
  failure_seen.store(true, std::memory_order_release);
  ucs_status_t expected = UCS_OK;
  if (failure_.compare_exchange_strong(expected, status == UCS_OK ? UCS_ERR_CONNECTION_RESET : status) && on_failure_)
    on_failure_(status);
}

void Endpoint::error_callback(void* arg, ucp_ep_h, ucs_status_t status) {
  const detail::OutOfUcx visible;  // UCX calls this from progress (TSan builds)
  static_cast<Endpoint*>(arg)->mark_failed(status);
}

void Endpoint::check_alive() const {
  ucs_status_t status = failure();
  if (status != UCS_OK)
    throw Error(Errc::peer_failed, "connection to " + peer_name_ + " failed: " + ucs_status_string(status));
}

Endpoint::~Endpoint() {
  if (handle_ == nullptr) return;
  // A graceful close needs the peer's cooperation and can hang on a peer that
  // stopped progressing; owners flush what matters first (see flush()).
  ucp_request_param_t param{};
  param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
  param.flags = UCP_EP_CLOSE_FLAG_FORCE;
  void* request = ucp_ep_close_nbx(handle_, &param);
  if (UCS_PTR_IS_PTR(request)) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    while (ucp_request_check_status(request) == UCS_INPROGRESS && std::chrono::steady_clock::now() < deadline)
      worker_->progress();
    if (ucp_request_check_status(request) != UCS_INPROGRESS) ucp_request_free(request);
  }
}

}  // namespace rdmx::transfer
