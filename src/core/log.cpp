#include "rdmx/core/log.hpp"

#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <string>

#include "settings.hpp"

namespace rdmx {

namespace {
LogLevel read_level() noexcept {
  try {
    // A bad value reads as the default here; the job's start-up check
    // refuses it, naming it.
    const auto value = rdmx_core_settings.word("RDMX_LOG");
    if (value == "off") return LogLevel::off;
    if (value == "error") return LogLevel::error;
    if (value == "info") return LogLevel::info;
    if (value == "debug") return LogLevel::debug;
  } catch (...) {
  }
  return LogLevel::warn;
}
}  // namespace

LogLevel log_level() noexcept {
  static const LogLevel level = read_level();
  return level;
}

void log(LogLevel level, const char* format, ...) noexcept {
  if (!log_enabled(level)) return;
  char text[1024];
  std::memcpy(text, "rdmx: ", 6);
  va_list args;
  va_start(args, format);
  const int n = std::vsnprintf(text + 6, sizeof text - 7, format, args);
  va_end(args);
  if (n < 0) return;
  std::size_t length = std::strlen(text);
  if (length > 0 && text[length - 1] != '\n') text[length++] = '\n';
  // One write per line: stderr is unbuffered, and one fwrite of a whole line
  // keeps lines from different threads apart.
  std::fwrite(text, 1, length, stderr);
}

}  // namespace rdmx
