// One JSON object per line: the result format every rdmx benchmark prints
// (docs/DESIGN "Benchmarks": fields bench, variant, size, metric, value, plus
// the configuration). Header-only and dependency-free on purpose: a
// benchmark builds a JsonLine with the fields it shares across results, copies
// it per result, adds the measured fields and prints it.
//
//   rdmx::bench::JsonLine common;
//   common.field("bench", "transfer").field("tls", tls);
//   common.with("variant", "raw").field("size", 8).field("value", 1.5e7).print();
//
// A job that spans several hosts (scripts/bench hosts sets RDMX_BENCH_HOSTS)
// prints "hosts" in every line, after the benchmark's own fields, unless the
// benchmark set it itself.
#pragma once
#include <charconv>
#include <cmath>
#include <concepts>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <utility>

namespace rdmx::bench {

class JsonLine {
 public:
  JsonLine& field(std::string_view key, std::string_view value) {
    key_(key);
    quoted_(value);
    return *this;
  }
  JsonLine& field(std::string_view key, const char* value) { return field(key, std::string_view(value)); }
  JsonLine& field(std::string_view key, const std::string& value) { return field(key, std::string_view(value)); }
  JsonLine& field(std::string_view key, bool value) {
    key_(key);
    body_ += value ? "true" : "false";
    return *this;
  }
  template <std::integral T>
    requires(!std::same_as<T, bool>)
  JsonLine& field(std::string_view key, T value) {
    key_(key);
    body_ += std::to_string(value);
    return *this;
  }
  // Shortest text that reads back to the same double; NaN and infinities
  // (no JSON spelling) become null.
  JsonLine& field(std::string_view key, double value) {
    key_(key);
    if (!std::isfinite(value)) {
      body_ += "null";
      return *this;
    }
    char text[64];
    auto [end, ec] = std::to_chars(text, text + sizeof text, value);
    body_.append(text, ec == std::errc{} ? end : text);
    return *this;
  }

  // A copy of this line with one more field: common fields first, then the result's.
  template <class V>
  JsonLine with(std::string_view key, V&& value) const {
    JsonLine copy = *this;
    copy.field(key, std::forward<V>(value));
    return copy;
  }

  std::string str() const {
    if (hosts_set_) return "{" + body_ + "}";
    const char* hosts = std::getenv("RDMX_BENCH_HOSTS");
    if (hosts == nullptr || *hosts == '\0') return "{" + body_ + "}";
    JsonLine copy = *this;
    std::uint64_t n = 0;
    auto [end, ec] = std::from_chars(hosts, hosts + std::char_traits<char>::length(hosts), n);
    if (ec == std::errc{} && *end == '\0')
      copy.field("hosts", n);
    else
      copy.field("hosts", hosts);  // not a number: shown as given
    return "{" + copy.body_ + "}";
  }
  // One line, flushed at once so results survive a later crash or a killed job.
  void print(std::FILE* out = stdout) const {
    std::string line = str();
    line += '\n';
    std::fwrite(line.data(), 1, line.size(), out);
    std::fflush(out);
  }

 private:
  void key_(std::string_view key) {
    if (key == "hosts") hosts_set_ = true;
    if (!body_.empty()) body_ += ',';
    quoted_(key);
    body_ += ':';
  }
  void quoted_(std::string_view text) {
    body_ += '"';
    for (char c : text) {
      switch (c) {
        case '"': body_ += "\\\""; break;
        case '\\': body_ += "\\\\"; break;
        case '\n': body_ += "\\n"; break;
        case '\r': body_ += "\\r"; break;
        case '\t': body_ += "\\t"; break;
        default:
          if (static_cast<unsigned char>(c) < 0x20) {
            char escaped[8];
            std::snprintf(escaped, sizeof escaped, "\\u%04x", static_cast<unsigned>(static_cast<unsigned char>(c)));
            body_ += escaped;
          } else {
            body_ += c;
          }
      }
    }
    body_ += '"';
  }

  std::string body_;
  bool hosts_set_ = false;
};

}  // namespace rdmx::bench
