#include "rdmx/serial/signature.hpp"

#include "rdmx/core/registry.hpp"

namespace rdmx::serial {

std::uint64_t signature_hash(std::string_view names) noexcept {
  return name_id(names);  // the hash every remotely invoked name gets
}

}  // namespace rdmx::serial
