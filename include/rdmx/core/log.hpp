// rdmx's diagnostics on standard error, levelled and set by RDMX_LOG
// (error, warn, info, debug; off silences them). A message is logged once,
// by the code that decides what happens next (drops a call, gives up on a
// peer, ends the process); code that throws leaves it to whoever catches.
#pragma once

namespace rdmx {

enum class LogLevel { off, error, warn, info, debug };

// RDMX_LOG, read on first use; warn when unset.
LogLevel log_level() noexcept;
inline bool log_enabled(LogLevel level) noexcept { return level != LogLevel::off && level <= log_level(); }

// One line: "rdmx: " + the formatted message (+ '\n' when it has none).
// Whole lines: threads logging at once do not interleave within a line.
void log(LogLevel level, const char* format, ...) noexcept __attribute__((format(printf, 2, 3)));

}  // namespace rdmx
