// The settings table and its parsers: strict, range-checked, never wrapped.
#include "rdmx/core/env.hpp"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <stdexcept>
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

const Table& table_of(const char* layer) {
  for (const Table* t : tables())
    if (std::string(t->layer()) == layer) return *t;
  throw std::logic_error(layer);
}

// Every linked layer has a table; names and options are unique across
// them; every default is itself an accepted value, or the row says how it
// is derived.
TEST(Settings, TablesAreConsistent) {
  std::set<std::string> names, options, layers;
  for (const Table* t : tables()) {
    EXPECT_TRUE(layers.insert(t->layer()).second) << "twice: " << t->layer();
    for (const Variable& v : t->variables()) {
      EXPECT_TRUE(std::string(v.name).starts_with("RDMX_")) << v.name;
      EXPECT_TRUE(names.insert(v.name).second) << "twice: " << v.name;
      if (v.option) EXPECT_TRUE(options.insert(v.option).second) << "twice: " << v.option;
      if (v.kind == Kind::size || v.kind == Kind::count) EXPECT_LE(v.min, v.max) << v.name;
      if (v.kind == Kind::choice) EXPECT_NE(v.choices, nullptr) << v.name;
      EXPECT_TRUE(v.fallback != nullptr || v.derived != nullptr) << v.name << " documents no default";
      if (v.fallback != nullptr) EXPECT_NO_THROW(parse(v, v.fallback, v.name)) << v.name << "'s default " << v.fallback;
      EXPECT_EQ(find(v.name), &v);
      EXPECT_EQ(&t->at(v.name), &v);
    }
  }
  for (const char* layer : {"core", "transfer", "memory", "fabric", "serial", "invoke", "action", "dsm", "far"})
    EXPECT_EQ(layers.count(layer), 1u) << "no table of layer " << layer;
  EXPECT_EQ(layers.count("omp"), 0u) << "this test does not link rdmx_omp";
  EXPECT_EQ(find("RDMX_THREAD"), nullptr);
}

// A layer reads only its own rows: another layer's name is a bug it hears of.
TEST(Settings, ALayerReadsOnlyItsOwnRows) {
  const Table& fabric = table_of("fabric");
  EXPECT_NO_THROW(fabric.at("RDMX_THREADS"));
  EXPECT_TRUE(contains(message_of([&] { fabric.at("RDMX_DSM_HEAP"); }), "not a setting of layer fabric"));
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

TEST(Settings, ReadersTakeTheEnvironmentStrictlyElseTheDefault) {
  const Table& invoke = table_of("invoke");
  const Table& transfer = table_of("transfer");
  const Table& fabric = table_of("fabric");
  EXPECT_EQ(invoke.number("RDMX_CHUNK_SIZE"), 256u << 10);
  EXPECT_EQ(table_of("far").word("RDMX_FAR_PATH"), "one-sided");
  EXPECT_FALSE(fabric.given_number("RDMX_IDLE_SPINS"));
  EXPECT_TRUE(contains(message_of([&] { fabric.number("RDMX_THREADS"); }), "derived default"));
  {
    ScopedEnv u("RDMX_U_MAX", "0");
    EXPECT_TRUE(contains(message_of([&] { transfer.number("RDMX_U_MAX"); }), "RDMX_U_MAX"));
  }
  {
    ScopedEnv chunks("RDMX_CHUNKS", "4294967297");
    EXPECT_FALSE(message_of([&] { invoke.number("RDMX_CHUNKS"); }).empty());
  }
  {
    ScopedEnv spins("RDMX_IDLE_SPINS", "7");
    EXPECT_EQ(fabric.given_number("RDMX_IDLE_SPINS"), 7u);
  }
  {
    ScopedEnv path("RDMX_FAR_PATH", "one_sided");  // one spelling per choice
    EXPECT_TRUE(contains(message_of([&] { table_of("far").word("RDMX_FAR_PATH"); }), "one-sided or two-sided"));
  }
  {
    ScopedEnv threads("RDMX_THREADS", "4294967297");
    EXPECT_TRUE(contains(message_of([] { check_environment(); }), "RDMX_THREADS='4294967297'"));
  }
}

// An RDMX_* variable that is no setting stops the job, naming the nearest
// setting; one of a layer the program does not link is not its business.
TEST(Settings, UnknownVariablesAreRefusedAtStart) {
  {
    ScopedEnv typo("RDMX_THREDS", "2");
    const std::string m = message_of([] { check_environment(); });
    EXPECT_TRUE(contains(m, "RDMX_THREDS is set but is not an rdmx setting (did you mean RDMX_THREADS?)")) << m;
  }
  {
    ScopedEnv omp("RDMX_OMP_STACK", "16M");
    EXPECT_NO_THROW(check_environment());
  }
}

TEST(Settings, DescribeListsEveryRow) {
  const std::string text = describe(Format::text), markdown = describe(Format::markdown);
  for (const Table* t : tables()) {
    EXPECT_TRUE(contains(markdown, std::string("### ") + t->layer() + "\n")) << t->layer();
    for (const Variable& v : t->variables()) {
      EXPECT_TRUE(contains(text, std::string("  ") + v.name)) << v.name;
      EXPECT_TRUE(contains(markdown, std::string("| `") + v.name + "`")) << v.name;
    }
  }
}

TEST(Options, WellFormedOptionsAreTakenOut) {
  std::vector<std::string> args{"prog", "--rdmx-threads=4", "input", "--rdmx-pin=off", "--other"};
  auto values = take_options(args);
  EXPECT_EQ(args, (std::vector<std::string>{"prog", "input", "--other"}));
  EXPECT_EQ(values.at("RDMX_THREADS"), "4");
  EXPECT_EQ(values.at("RDMX_PIN"), "off");
  std::vector<std::string> help{"prog", "--rdmx-help=markdown"};
  EXPECT_EQ(take_options(help).at("help"), "markdown");
  EXPECT_EQ(help, std::vector<std::string>{"prog"});
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
  EXPECT_EQ(unknown_names({"RDMX_THREAD", "RDMX_THREADS", "PATH", "RDMX_ROOT", "RDMX_BENCH_NP", "RDMX_CHUNK",
                           "RDMX_OMP_STATS", "RDMX_SLURM_DIR", "RDMX_DSM_HEAPS"}),
            (std::vector<std::string>{"RDMX_THREAD", "RDMX_CHUNK", "RDMX_DSM_HEAPS"}));
}

}  // namespace
}  // namespace rdmx::env
