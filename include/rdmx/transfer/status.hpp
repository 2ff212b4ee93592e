// Turning UCX status codes into rdmx::Error with the operation named.
#pragma once
#include <ucs/type/status.h>

#include <string>

#include "rdmx/core/error.hpp"

namespace rdmx::transfer {

// Peer-failure statuses map to Errc::peer_failed, the rest to Errc::transport.
Errc errc_of(ucs_status_t status) noexcept;
[[noreturn]] void throw_status(ucs_status_t status, const std::string& operation);
inline void check(ucs_status_t status, const char* operation) {
  if (status != UCS_OK) throw_status(status, operation);
}
inline void check(ucs_status_t status, const std::string& operation) {
  if (status != UCS_OK) throw_status(status, operation);
}

}  // namespace rdmx::transfer
