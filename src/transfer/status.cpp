#include "rdmx/transfer/status.hpp"

namespace rdmx::transfer {

Errc errc_of(ucs_status_t status) noexcept {
  switch (status) {
    case UCS_ERR_ENDPOINT_TIMEOUT:
    case UCS_ERR_CONNECTION_RESET:
    case UCS_ERR_UNREACHABLE:
    case UCS_ERR_REJECTED:
    case UCS_ERR_CANCELED:
      return Errc::peer_failed;
    case UCS_ERR_NO_MEMORY:
      return Errc::out_of_memory;
    case UCS_ERR_MESSAGE_TRUNCATED:
    case UCS_ERR_EXCEEDS_LIMIT:
      return Errc::message_too_large;
    default:
      return Errc::transport;
  }
}

void throw_status(ucs_status_t status, const std::string& operation) {
  throw Error(errc_of(status), operation + " failed: " + ucs_status_string(status));
}

}  // namespace rdmx::transfer
