// rdmx's configuration: the RDMX_* environment variables and their
// --rdmx-NAME=VALUE command-line forms, with validation. Each layer owns the
// table of its settings (src/<layer>/settings.cpp) and reads it through that
// table; the tables register themselves, so the start-up check, --rdmx-help
// and the generated list in docs/settings.md all follow the same rows, and a
// setting cannot be accepted in one place and refused in another. A bad
// value, or an RDMX_* variable that is no setting, is an error naming the
// variable and what it accepts, never a silent default or a value wrapped
// to fit a narrower integer.
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
  const char* fallback;  // the default, written as a value would be ("256K", "auto"); nullptr where the
                         // reader derives it from the job, and `derived` says how
  const char* derived;   // how a derived default is chosen, for the docs; nullptr otherwise
  const char* meaning;
};

// One layer's settings. A layer defines its table once, in its own
// src/<layer>/settings.cpp, as
//   extern "C" const rdmx::env::Table rdmx_<layer>_settings{"<layer>", rows};
// and reads its settings through it. The build lists every layer's table in
// the library's settings index (src/CMakeLists.txt), so the start-up check
// and --rdmx-help know every setting of every layer the program links, even
// of a layer the program never calls.
class Table {
 public:
  constexpr Table(const char* layer, std::span<const Variable> variables) noexcept : layer_(layer), variables_(variables) {}
  Table(const Table&) = delete;
  Table& operator=(const Table&) = delete;

  const char* layer() const noexcept { return layer_; }
  std::span<const Variable> variables() const noexcept { return variables_; }
  // The row of `name`; a name that is not in this layer's table is a bug in
  // the layer, reported as Errc::invalid_argument naming it.
  const Variable& at(std::string_view name) const;

  // Readers, each checked against the row: the environment's value, else
  // the row's default (which must exist: see `given` for derived ones).
  std::uint64_t number(std::string_view name) const;  // size, count; a flag reads 0 or 1
  bool flag(std::string_view name) const { return number(name) != 0; }
  std::string word(std::string_view name) const;  // choice
  // The environment's value alone, checked (nullopt when unset or empty):
  // for settings whose default the reader derives, and for text settings.
  std::optional<std::string> given(std::string_view name) const;
  std::optional<std::uint64_t> given_number(std::string_view name) const;

 private:
  const char* layer_;
  std::span<const Variable> variables_;
};

namespace detail {
// An entry of the library's settings index, which the build generates
// (src/CMakeLists.txt): a layer and its table, nullptr for a layer of a
// library of its own that the program does not link.
struct IndexEntry {
  const char* layer;
  const Table* table;
};
}  // namespace detail

// Every table of the layers this program links, lowest layer first.
std::vector<const Table*> tables();
// The row for `name` ("RDMX_THREADS") in any table; nullptr when there is none.
const Variable* find(std::string_view name);
// The accepted values of `v`, for messages and docs ("1 to 1024", "auto, on or off").
std::string accepted(const Variable& v);
// The documented default of `v`: its fallback, or how it is derived.
std::string default_text(const Variable& v);

std::optional<std::string> get(const char* name);
// `text` as a value of `v`, range-checked; `what` names it in the error
// ("RDMX_THREADS" or "--rdmx-threads"). Choice and text settings return 0
// once checked; flags return 0 or 1.
std::uint64_t parse(const Variable& v, const std::string& text, const std::string& what);

// Takes every --rdmx-* argument out of `args` and returns its value by
// variable name ("RDMX_THREADS" -> "2"), each checked like the variable.
// A malformed one (no "=VALUE", an unknown name, a bad value) is an error
// naming it: a mistyped option must not be silently ignored. --rdmx-help
// and --rdmx-help=markdown are taken out too and reported as "help" ->
// "text" or "markdown".
std::map<std::string, std::string> take_options(std::vector<std::string>& args);
// Checks the value of every RDMX_* variable in the environment. An RDMX_*
// variable that is no setting of a layer this program links (a misspelling,
// most likely) is refused, naming the nearest setting. Called when a Job
// starts, so a bad setting stops the job before anything is paid for it.
void check_environment();
// The names in `names` that look like settings but are none (for the check).
std::vector<std::string> unknown_names(const std::vector<std::string>& names);

// Every setting of every registered table, for people: --rdmx-help's text,
// or docs/settings.md's tables (markdown).
enum class Format { text, markdown };
std::string describe(Format format);

// Parse a size string ("64", "4K", "2M", "1G", "1T"); throws naming `what` on failure or overflow.
std::uint64_t parse_size(const std::string& text, const char* what);
// Parse a plain positive count ("8"); throws naming `what` on failure.
std::uint64_t parse_count(const std::string& text, const char* what);

}  // namespace rdmx::env
