// The settings table and its parsers: strict, range-checked, never wrapped.
#include "rdmx/core/env.hpp"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <fstream>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "rdmx/core/error.hpp"

namespace rdmx::env {
namespace {

std::string message_of(auto&& f) {
  try {
    f();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::invalid_argument) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "no rdmx::Error thrown";
  return {};
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    ::setenv(name, value, 1);
  }
  ~ScopedEnv() {
    if (old_)
      ::setenv(name_, old_->c_str(), 1);
    else
      ::unsetenv(name_);
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

TEST(Settings, TableIsConsistent) {
  std::set<std::string> names, options;
  for (const Variable& v : variables()) {
    EXPECT_TRUE(std::string(v.name).starts_with("RDMX_")) << v.name;
    EXPECT_TRUE(names.insert(v.name).second) << "twice: " << v.name;
    if (v.option) EXPECT_TRUE(options.insert(v.option).second) << "twice: " << v.option;
    if (v.kind == Kind::size || v.kind == Kind::count) EXPECT_LE(v.min, v.max) << v.name;
    if (v.kind == Kind::choice) EXPECT_NE(v.choices, nullptr) << v.name;
    EXPECT_EQ(find(v.name), &v);
  }
  EXPECT_EQ(find("RDMX_THREAD"), nullptr);
}

// 4294967297 is 2^32 + 1: cast to 32 bits it used to run one thread.
TEST(Settings, CountsAreCheckedAgainstTheirRangeInSixtyFourBits) {
  const Variable& threads = *find("RDMX_THREADS");
  EXPECT_EQ(parse(threads, "8", "RDMX_THREADS"), 8u);
  EXPECT_EQ(parse(threads, "1024", "RDMX_THREADS"), 1024u);
  for (const char* bad : {"4294967297", "0", "1025", "-1", "+2", " 2", "2 ", "4K", "two", "", "99999999999999999999999"}) {
    const std::string m = message_of([&] { parse(threads, bad, "RDMX_THREADS"); });
    EXPECT_TRUE(contains(m, "RDMX_THREADS")) << m;
    EXPECT_TRUE(contains(m, "1 to 1024")) << m;
  }
  for (const char* name : {"RDMX_HELPERS", "RDMX_CHUNKS", "RDMX_MAX_CHUNKS"})
    EXPECT_FALSE(message_of([&] { parse(*find(name), "4294967297", name); }).empty()) << name;
}

TEST(Settings, SizesTakeSuffixesAndRefuseOverflow) {
  const Variable& spins = *find("RDMX_IDLE_SPINS");
  EXPECT_EQ(parse(spins, "0", "RDMX_IDLE_SPINS"), 0u);
  EXPECT_EQ(parse(spins, "4294967295", "RDMX_IDLE_SPINS"), 4294967295u);
  EXPECT_TRUE(contains(message_of([&] { parse(spins, "4294967296", "RDMX_IDLE_SPINS"); }), "RDMX_IDLE_SPINS"));
  const Variable& segment = *find("RDMX_ARENA_SEGMENT");
  EXPECT_EQ(parse(segment, "64K", "S"), 65536u);
  EXPECT_EQ(parse(segment, "2MB", "S"), 2u << 20);
  EXPECT_TRUE(contains(message_of([&] { parse(segment, "2T", "S"); }), "out of range"));
  EXPECT_TRUE(contains(message_of([&] { parse(segment, "12Q", "S"); }), "4K to 1T bytes"));
  const Variable& max = *find("RDMX_MAX_MESSAGE");
  EXPECT_TRUE(contains(message_of([&] { parse(max, "17179869184G", "RDMX_MAX_MESSAGE"); }), "64 bits"));
  EXPECT_TRUE(contains(message_of([] { parse_size("17179869184G", "x"); }), "x="));
  const Variable& u_max = *find("RDMX_U_MAX");
  EXPECT_TRUE(contains(message_of([&] { parse(u_max, "0", "RDMX_U_MAX"); }), "RDMX_U_MAX"));
  const Variable& threshold = *find("RDMX_ZERO_COPY_THRESHOLD");
  EXPECT_EQ(parse(threshold, "disabled", "T"), 0u);
  EXPECT_EQ(parse(threshold, "0", "T"), 0u);
  EXPECT_FALSE(message_of([&] { parse(threshold, "10", "T"); }).empty());
}

TEST(Settings, FlagsAndChoices) {
  const Variable& eager = *find("RDMX_EAGER_ENDPOINTS");
  EXPECT_EQ(parse(eager, "yes", "E"), 1u);
  EXPECT_EQ(parse(eager, "off", "E"), 0u);
  EXPECT_FALSE(message_of([&] { parse(eager, "2", "E"); }).empty());
  const Variable& pin = *find("RDMX_PIN");
  EXPECT_EQ(parse(pin, "on", "RDMX_PIN"), 0u);
  EXPECT_TRUE(contains(message_of([&] { parse(pin, "always", "RDMX_PIN"); }), "auto, on or off"));
}

TEST(Settings, GettersReadTheEnvironmentStrictly) {
  {
    ScopedEnv u("RDMX_U_MAX", "0");
    EXPECT_TRUE(contains(message_of([] { get_size("RDMX_U_MAX", 64); }), "RDMX_U_MAX"));
  }
  {
    ScopedEnv chunks("RDMX_CHUNKS", "4294967297");
    EXPECT_FALSE(message_of([] { get_count("RDMX_CHUNKS", 2); }).empty());
  }
  {
    ScopedEnv threads("RDMX_THREADS", "4294967297");
    EXPECT_TRUE(contains(message_of([] { check_environment(); }), "RDMX_THREADS='4294967297'"));
  }
}

TEST(Options, WellFormedOptionsAreTakenOut) {
  std::vector<std::string> args{"prog", "--rdmx-threads=4", "input", "--rdmx-pin=off", "--other"};
  auto values = take_options(args);
  EXPECT_EQ(args, (std::vector<std::string>{"prog", "input", "--other"}));
  EXPECT_EQ(values.at("RDMX_THREADS"), "4");
  EXPECT_EQ(values.at("RDMX_PIN"), "off");
}

TEST(Options, MalformedOptionsAreErrorsNamingThem) {
  struct Case {
    std::vector<std::string> args;
    const char* expect;
  };
  for (const Case& c : std::vector<Case>{{{"p", "--rdmx-thread=4"}, "--rdmx-thread"},
                                         {{"p", "--rdmx-threads"}, "--rdmx-threads needs a value"},
                                         {{"p", "--rdmx-threads", "2"}, "--rdmx-threads needs a value"},
                                         {{"p", "--rdmx-threads=4294967297"}, "--rdmx-threads='4294967297'"},
                                         {{"p", "--rdmx-threads="}, "--rdmx-threads=''"},
                                         {{"p", "--rdmx-pin=maybe"}, "auto, on or off"},
                                         {{"p", "--rdmx-"}, "unknown option"}}) {
    std::vector<std::string> args = c.args;
    const std::string m = message_of([&] { take_options(args); });
    EXPECT_TRUE(contains(m, c.expect)) << m;
  }
}

TEST(Settings, UnknownNamesAreThoseThatLookLikeSettingsButAreNot) {
  EXPECT_EQ(unknown_names({"RDMX_THREAD", "RDMX_THREADS", "PATH", "RDMX_ROOT", "RDMX_BENCH_NP", "RDMX_CHUNK"}),
            (std::vector<std::string>{"RDMX_THREAD", "RDMX_CHUNK"}));
}

// README.md's table of settings shows every variable with exactly the
// range the parser enforces.
TEST(Settings, ReadmeTableMatchesTheParser) {
  std::ifstream readme(RDMX_README);
  ASSERT_TRUE(readme) << RDMX_README;
  std::vector<std::string> lines;
  for (std::string line; std::getline(readme, line);) lines.push_back(line);
  for (const Variable& v : variables()) {
    const std::string start = std::string("| `") + v.name + "`";
    auto row = std::find_if(lines.begin(), lines.end(), [&](const std::string& l) { return l.starts_with(start); });
    ASSERT_NE(row, lines.end()) << v.name << " is missing from README.md";
    EXPECT_TRUE(contains(*row, "| " + accepted(v) + " |")) << "README.md's row for " << v.name << " should say: " << accepted(v);
    if (v.option) EXPECT_TRUE(contains(*row, std::string("--rdmx-") + v.option + "=")) << v.name;
  }
}

}  // namespace
}  // namespace rdmx::env
