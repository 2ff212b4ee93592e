#include "rdmx/core/env.hpp"

#include <cstdlib>

#include "rdmx/core/error.hpp"

namespace rdmx::env {

std::optional<std::string> get(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return std::nullopt;
  return std::string(v);
}

namespace {
// The unsigned number at the start of `text`; `pos` is where it ends (0: none).
unsigned long long leading_number(const std::string& text, std::size_t& pos) {
  pos = 0;
  if (text.empty() || text[0] == '-') return 0;  // stoull would wrap negatives
  try {
    return std::stoull(text, &pos);
  } catch (const std::exception&) {
    pos = 0;
    return 0;
  }
}
}  // namespace

std::uint64_t parse_size(const std::string& text, const char* what) {
  std::size_t pos = 0;
  const unsigned long long value = leading_number(text, pos);
  if (pos == 0) throw Error(Errc::invalid_argument, std::string(what) + "='" + text + "' is not a size (examples: 4096, 64K, 2M, 1G)");
  std::uint64_t scale = 1;
  if (pos < text.size()) {
    switch (text[pos]) {
      case 'k': case 'K': scale = 1ull << 10; break;
      case 'm': case 'M': scale = 1ull << 20; break;
      case 'g': case 'G': scale = 1ull << 30; break;
      default: scale = 0;
    }
    const bool suffix_ok = pos + 1 == text.size() || (pos + 2 == text.size() && (text[pos + 1] == 'B' || text[pos + 1] == 'b'));
    if (scale == 0 || !suffix_ok)
      throw Error(Errc::invalid_argument, std::string(what) + "='" + text + "' has an unknown suffix (use K, M or G)");
  }
  return value * scale;
}

std::uint64_t parse_count(const std::string& text, const char* what) {
  std::size_t pos = 0;
  const unsigned long long value = leading_number(text, pos);
  if (pos == 0 || pos != text.size() || value == 0)
    throw Error(Errc::invalid_argument, std::string(what) + "='" + text + "' is not a positive whole number");
  return value;
}

std::uint64_t get_size(const char* name, std::uint64_t fallback) {
  auto v = get(name);
  return v ? parse_size(*v, name) : fallback;
}

bool get_bool(const char* name, bool fallback) {
  auto v = get(name);
  if (!v) return fallback;
  if (*v == "1" || *v == "yes" || *v == "y" || *v == "true" || *v == "on") return true;
  if (*v == "0" || *v == "no" || *v == "n" || *v == "false" || *v == "off") return false;
  throw Error(Errc::invalid_argument, std::string(name) + "='" + *v + "' is not a boolean (use 1/0, yes/no, on/off)");
}

}  // namespace rdmx::env
