#include "rdmx/core/registry.hpp"

#include <cstdio>

namespace rdmx {

namespace {
std::mutex conflicts_mutex;
std::string& conflicts() {
  static std::string text;  // registration runs before main, in any order
  return text;
}
}  // namespace

std::uint64_t name_id(std::string_view name) noexcept {
  std::uint64_t hash = 1469598103934665603ull;
  for (char c : name) hash = (hash ^ static_cast<unsigned char>(c)) * 1099511628211ull;
  return hash == 0 ? 1 : hash;
}

std::string registry_conflicts() {
  std::lock_guard lock(conflicts_mutex);
  return conflicts();
}

namespace detail {
void record_conflict(const std::string& first, const std::string& second) {
  std::lock_guard lock(conflicts_mutex);
  conflicts() += "two remotely invoked names share one id (rename one): '" + demangle(first.c_str()) + "' and '" +
                 demangle(second.c_str()) + "'\n";
}

std::string describe_id(std::uint64_t id) {
  char text[40];
  std::snprintf(text, sizeof text, "unknown id %#llx", static_cast<unsigned long long>(id));
  return text;
}
}  // namespace detail

}  // namespace rdmx
