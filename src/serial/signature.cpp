#include "rdmx/serial/signature.hpp"

namespace rdmx::serial {

std::uint64_t signature_hash(std::string_view names) noexcept {
  std::uint64_t hash = 1469598103934665603ull;  // FNV-1a, as the fabric's function ids
  for (char c : names) hash = (hash ^ static_cast<unsigned char>(c)) * 1099511628211ull;
  return hash == 0 ? 1 : hash;
}

}  // namespace rdmx::serial
