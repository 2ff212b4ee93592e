// rdmx's configuration: the RDMX_* environment variables and their
// --rdmx-NAME=VALUE command-line forms, with validation. One table,
// variables(), lists every setting with its kind and accepted range; the
// parsers, the start-up check and the documentation all follow it, so a
// setting cannot be accepted in one place and refused in another. A bad
// value is an error naming the variable and the accepted range, never a
// silent default or a value wrapped to fit a narrower integer.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace rdmx::env {

enum class Kind {
  size,    // bytes: a whole number with an optional K/M/G/T suffix (powers of 1024)
  count,   // a plain whole number
  flag,    // 1/0, yes/no, on/off, true/false
  choice,  // one of `choices`
  text,    // free-form, checked by its reader (RDMX_LAYOUT)
};

struct Variable {
  const char* name;      // "RDMX_THREADS"
  const char* option;    // "threads" for --rdmx-threads=VALUE; nullptr: environment only
  Kind kind;
  std::uint64_t min;     // size and count: the accepted range, inclusive
  std::uint64_t max;
  const char* choices;   // choice: the words, separated by '|'; size: words that mean 0 ("off"), or nullptr;
                         // text: its format
  const char* fallback;  // the default, as documented
  const char* meaning;
};

// Every setting rdmx reads.
std::span<const Variable> variables();
// The table's entry for `name` ("RDMX_THREADS"); nullptr when there is none.
const Variable* find(std::string_view name);
// The accepted values of `v`, for messages and docs ("1 to 1024", "auto, on or off");
// README.md's table shows exactly this text (tests/core/env_test.cpp checks it).
std::string accepted(const Variable& v);

std::optional<std::string> get(const char* name);
// A size or count setting from the environment, checked against the table's
// range (`name` must be in the table). Throws rdmx::Error on junk.
std::uint64_t get_size(const char* name, std::uint64_t fallback);
std::uint64_t get_count(const char* name, std::uint64_t fallback);
bool get_bool(const char* name, bool fallback);
// `text` as a value of `v`, range-checked; `what` names it in the error
// ("RDMX_THREADS" or "--rdmx-threads"). Choice and text settings return 0
// once checked; flags return 0 or 1.
std::uint64_t parse(const Variable& v, const std::string& text, const std::string& what);

// Takes every --rdmx-* argument out of `args` and returns its value by
// variable name ("RDMX_THREADS" -> "2"), each checked like the variable.
// A malformed one (no "=VALUE", an unknown name, a bad value) is an error
// naming it: a mistyped option must not be silently ignored.
std::map<std::string, std::string> take_options(std::vector<std::string>& args);
// Checks the value of every RDMX_* setting in the environment, and warns
// once per process on stderr about RDMX_* variables that are not settings
// (likely misspellings). Called when a Job starts, so a bad setting is
// reported then rather than when a module first reads it.
void check_environment();
// The names in `names` that look like settings but are not (for the warning).
std::vector<std::string> unknown_names(const std::vector<std::string>& names);

// Parse a size string ("64", "4K", "2M", "1G", "1T"); throws naming `what` on failure or overflow.
std::uint64_t parse_size(const std::string& text, const char* what);
// Parse a plain positive count ("8"); throws naming `what` on failure.
std::uint64_t parse_count(const std::string& text, const char* what);

}  // namespace rdmx::env
