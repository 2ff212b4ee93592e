#include "rdmx/far/config.hpp"

#include <algorithm>
#include <charconv>

#include "rdmx/core/error.hpp"
#include "settings.hpp"

namespace rdmx::far {

const char* to_string(Path path) noexcept { return path == Path::one_sided ? "one-sided" : "two-sided"; }

Path parse_path(const std::string& text, const char* what) {
  if (text == "one-sided") return Path::one_sided;
  if (text == "two-sided") return Path::two_sided;
  throw Error(Errc::invalid_argument, std::string(what) + "='" + text + "': expected one-sided or two-sided");
}

std::vector<std::uint32_t> Config::env_servers() {
  std::vector<std::uint32_t> ranks;
  auto text = rdmx_far_settings.given("RDMX_FAR_SERVERS");
  if (!text || text->empty()) return ranks;
  const char* p = text->data();
  const char* end = p + text->size();
  while (p <= end) {
    const char* comma = std::find(p, end, ',');
    std::uint32_t rank = 0;
    auto [stop, ec] = std::from_chars(p, comma, rank);
    if (ec != std::errc{} || stop != comma || p == comma)
      throw Error(Errc::invalid_argument, "RDMX_FAR_SERVERS='" + *text + "': expected comma-separated process ranks, e.g. 1,2");
    ranks.push_back(rank);
    p = comma + 1;
  }
  return ranks;
}

std::size_t Config::env_region_bytes() { return rdmx_far_settings.number("RDMX_FAR_REGION"); }
std::size_t Config::env_cache_bytes() { return rdmx_far_settings.number("RDMX_FAR_CACHE"); }
Path Config::env_path() {
  return parse_path(rdmx_far_settings.word("RDMX_FAR_PATH"), "RDMX_FAR_PATH");
}

std::size_t Config::env_replication() { return rdmx_far_settings.number("RDMX_FAR_REPLICATION"); }
namespace {
// Evacuator and Watch: the settings that read auto, on or off.
template <class E>
const char* auto_on_off(E e) noexcept {
  return e == E::on ? "on" : e == E::off ? "off" : "auto";
}
template <class E>
E env_auto_on_off(const char* name) {
  const std::string word = rdmx_far_settings.word(name);
  return word == "on" ? E::on : word == "off" ? E::off : E::automatic;
}
}  // namespace

const char* to_string(Evacuator evacuator) noexcept { return auto_on_off(evacuator); }
Evacuator Config::env_evacuator() { return env_auto_on_off<Evacuator>("RDMX_FAR_EVACUATOR"); }
const char* to_string(Watch watch) noexcept { return auto_on_off(watch); }
Watch Config::env_evacuator_watch() { return env_auto_on_off<Watch>("RDMX_FAR_EVACUATOR_WATCH"); }
double Config::env_free_low() { return static_cast<double>(rdmx_far_settings.number("RDMX_FAR_FREE_LOW")) / 100; }
std::size_t Config::env_prefetch_depth() { return rdmx_far_settings.number("RDMX_FAR_PREFETCH"); }
bool Config::env_check() { return rdmx_far_settings.flag("RDMX_FAR_CHECK"); }
double Config::env_free_high() { return static_cast<double>(rdmx_far_settings.number("RDMX_FAR_FREE_HIGH")) / 100; }

std::uint32_t size_class_of(std::size_t bytes) {
  if (bytes > max_object_bytes)
    throw Error(Errc::invalid_argument, "far object of " + std::to_string(bytes) + " bytes exceeds the largest size class (" +
                                            std::to_string(max_object_bytes) + " bytes)");
  std::uint32_t c = 0;
  while (class_bytes(c) < bytes) ++c;
  return c;
}

}  // namespace rdmx::far
