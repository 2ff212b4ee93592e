#include "rdmx/serial/options.hpp"

#include "settings.hpp"
#include "rdmx/core/error.hpp"

namespace rdmx::serial {

std::size_t parse_zero_copy_threshold(const std::string& text, const char* what) {
  if (text == "disabled" || text == "off" || text == "none") return 0;
  const std::uint64_t value = env::parse_size(text, what);
  if (value != 0 && value < min_zero_copy_threshold)
    throw Error(Errc::invalid_argument, std::string(what) + "='" + text + "' is below the smallest zero-copy threshold (" +
                                            std::to_string(min_zero_copy_threshold) +
                                            " bytes); use 0 or 'disabled' to turn zero copy off");
  return static_cast<std::size_t>(value);
}

std::size_t zero_copy_threshold_from_env() {
  const auto text = rdmx_serial_settings.given("RDMX_ZERO_COPY_THRESHOLD");
  return text ? parse_zero_copy_threshold(*text, "RDMX_ZERO_COPY_THRESHOLD") : default_zero_copy_threshold;
}

std::size_t env_zero_copy_threshold() {
  static const std::size_t threshold = zero_copy_threshold_from_env();
  return threshold;
}

}  // namespace rdmx::serial
