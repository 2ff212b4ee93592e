// Reading RDMX_* configuration from the environment with validation: a bad
// value is an error that names the variable, never a silent default.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

namespace rdmx::env {

std::optional<std::string> get(const char* name);
// Integer with optional K/M/G suffix (powers of 1024). Throws rdmx::Error on junk.
std::uint64_t get_size(const char* name, std::uint64_t fallback);
bool get_bool(const char* name, bool fallback);
// Parse a size string ("64", "4K", "2M", "1G"); throws naming `what` on failure.
std::uint64_t parse_size(const std::string& text, const char* what);
// Parse a plain positive count ("8"); throws naming `what` on failure.
std::uint64_t parse_count(const std::string& text, const char* what);

}  // namespace rdmx::env
