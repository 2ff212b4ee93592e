// size_text: byte counts the way a person reads them in an error message or
// describe() line ("64 MiB", "1.5 KiB", "100 B").
#pragma once
#include <cstddef>
#include <cstdio>
#include <string>

namespace rdmx::memory::detail {

inline std::string size_text(std::size_t bytes) {
  static constexpr const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int unit = 0;
  std::size_t scale = 1;
  while (unit < 4 && bytes >= scale * 1024) {
    scale *= 1024;
    ++unit;
  }
  char text[48];
  if (bytes % scale == 0) {
    std::snprintf(text, sizeof text, "%zu %s", bytes / scale, units[unit]);
  } else {
    std::snprintf(text, sizeof text, "%.1f %s", static_cast<double>(bytes) / static_cast<double>(scale), units[unit]);
  }
  return text;
}

}  // namespace rdmx::memory::detail
