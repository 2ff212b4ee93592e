#include "rdmx/core/env.hpp"
#include "rdmx/core/log.hpp"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "rdmx/core/error.hpp"

extern char** environ;

namespace rdmx::env {

namespace {

constexpr std::uint64_t KiB = 1ull << 10;
constexpr std::uint64_t MiB = 1ull << 20;
constexpr std::uint64_t GiB = 1ull << 30;
constexpr std::uint64_t TiB = 1ull << 40;

// The one table. Ranges are what the reader can honour: a count that ends
// in a 32-bit field is bounded well below 2^32, so nothing is ever wrapped.
constexpr Variable table[] = {
    {"RDMX_THREADS", "threads", Kind::count, 1, 1024, nullptr, "1 (or T of RDMX_LAYOUT)", "worker threads per process"},
    {"RDMX_LAYOUT", "layout", Kind::text, 0, 0, "MxPxT, each at least 1", "none",
     "layout to expect, MxPxT; the job fails if the launcher started another"},
    {"RDMX_PIN", "pin", Kind::choice, 0, 0, "auto|on|off", "auto",
     "pin worker threads to cores (auto: when every thread of the host gets a core)"},
    {"RDMX_HELPERS", "helpers", Kind::count, 0, 1024, nullptr, "0",
     "helper threads per process running one-sided calls addressed to workers (at most RDMX_THREADS)"},
    {"RDMX_PROGRESS", "progress", Kind::choice, 0, 0, "auto|spin|yield|block", "auto",
     "what an idle wait does after RDMX_IDLE_SPINS idle polls: keep spinning, yield its core, or sleep until "
     "its network worker has an event (auto: yield)"},
    {"RDMX_IDLE_SPINS", nullptr, Kind::count, 0, 0xffffffffull, nullptr, "65536 (1 when threads outnumber cores)",
     "idle polls before a waiting thread yields or sleeps"},
    {"RDMX_EAGER_ENDPOINTS", nullptr, Kind::flag, 0, 1, nullptr, "0", "create every endpoint at start-up"},
    {"RDMX_SERVE_IDLE", nullptr, Kind::flag, 0, 1, nullptr, "0",
     "the service thread runs worker threads' calls outside Job::run"},
    {"RDMX_LOG", nullptr, Kind::choice, 0, 0, "error|warn|info|debug|off", "warn",
     "which diagnostics rdmx writes to standard error"},
    {"RDMX_CHECK_ACCESS", nullptr, Kind::flag, 0, 1, nullptr, "0",
     "debug: every rdmx::put, get and atomic asks the owner whether its locator lies inside one allocation"},
    {"RDMX_RECEIVE_PROBE_MS", nullptr, Kind::count, 0, 3'600'000, nullptr, "10000",
     "after a process on this host fails: how long a worker waits for an answer from a live one before it takes "
     "its shared-memory receive queue for blocked and fails the host's processes (0: never checks)"},
    {"RDMX_MAX_MESSAGE", nullptr, Kind::size, 1, TiB, nullptr, "1G", "largest call_buffer payload"},
    {"RDMX_U_MAX", nullptr, Kind::count, 1, 1ull << 20, nullptr, "64",
     "one-sided operations per completion flush (Seriema's u_max)"},
    {"RDMX_ARENA_SEGMENT", nullptr, Kind::size, 4 * KiB, TiB, nullptr, "64M",
     "size of each registered arena segment (rounded up to the page size)"},
    {"RDMX_ARENA_MAX", nullptr, Kind::size, 4 * KiB, 64 * TiB, nullptr, "1G", "most registered memory one arena maps"},
    {"RDMX_ARENA_BACKING", nullptr, Kind::choice, 0, 0, "auto|ucx|hugetlb|thp", "auto", "where arena segments come from"},
    {"RDMX_CHUNK_SIZE", nullptr, Kind::size, 4 * KiB, 2 * GiB, nullptr, "256K",
     "bytes per one-sided messenger chunk, a multiple of 8; the largest one-sided call is 64 bytes less"},
    {"RDMX_CHUNKS", nullptr, Kind::count, 1, 127, nullptr, "2", "chunks a messenger sets up per destination thread"},
    {"RDMX_MAX_CHUNKS", nullptr, Kind::count, 1, 127, nullptr, "16",
     "most chunks per destination (at least RDMX_CHUNKS)"},
    {"RDMX_RING_BUDGET", nullptr, Kind::size, 0, 64 * TiB, nullptr, "512M",
     "most bytes of messenger chunks a process holds (its receivers' chunks and its senders' mirrors); past it new rings are refused and those messengers send their calls as active messages"},
    {"RDMX_PUBLISH_BYTES", nullptr, Kind::size, 1, 2 * GiB, nullptr, "4K",
     "a messenger publishes after this many unpublished bytes"},
    {"RDMX_MAPPED_CHUNKS", nullptr, Kind::flag, 0, 1, nullptr, "1",
     "over shared memory, serialize one-sided calls straight into the destination's chunk"},
    {"RDMX_ZERO_COPY_THRESHOLD", nullptr, Kind::size, 64, TiB, "0|disabled|off|none", "65536",
     "bytes from which serialized data travels as a zero-copy chunk"},
    {"RDMX_REG_CACHE_BYTES", nullptr, Kind::size, 1, 64 * TiB, nullptr, "256M",
     "most memory the serialization registration cache keeps pinned"},
    {"RDMX_PARCEL_CALLS", nullptr, Kind::choice, 0, 0, "auto|one-sided|send", "auto",
     "how action parcels travel (one-sided or send-based calls)"},
    {"RDMX_DSM_HEAP", nullptr, Kind::size, 64 * KiB, TiB, nullptr, "32M",
     "bytes of the DSM's shared heap (a multiple of RDMX_DSM_BLOCK)"},
    {"RDMX_DSM_BLOCK", nullptr, Kind::size, 4 * KiB, GiB, nullptr, "4K",
     "the DSM's coherence block, a multiple of the page size"},
    {"RDMX_DSM_HOME", nullptr, Kind::choice, 0, 0, "floating|fixed", "floating",
     "DSM home policy: floating (a block moves to its last releaser) or fixed (cyclic, remote diff merge)"},
    {"RDMX_DSM_INVALIDATION", nullptr, Kind::choice, 0, 0, "signature|directory", "signature",
     "how cached DSM blocks learn they are stale: write-notice signatures, or a directory of sharers (baseline)"},
    {"RDMX_DSM_NOTICES", nullptr, Kind::count, 0, 1ull << 20, nullptr, "1024",
     "write notices a DSM signature holds before it overflows (then acquirers fall back to logical leases; 0: leases only)"},
    {"RDMX_DSM_MUTEXES", nullptr, Kind::count, 1, 1ull << 16, nullptr, "16", "global DSM mutexes"},
    {"RDMX_DSM_LEASE", nullptr, Kind::count, 0, 1ull << 32, nullptr, "16",
     "logical lease of a fetched DSM block, used when a signature overflowed (Tardis)"},
    {"RDMX_DSM_KEEP", nullptr, Kind::count, 0, 255, nullptr, "1",
     "DSM fast release: releases a written block stays writable unchanged before it is made read-only (0: off)"},
    {"RDMX_DSM_READ_AHEAD", nullptr, Kind::count, 0, 64, nullptr, "8",
     "DSM blocks fetched after a sequential read miss, readable with it (0: off)"},
    {"RDMX_DSM_WRITE_AHEAD", nullptr, Kind::count, 0, 64, nullptr, "8",
     "DSM blocks made writable after a sequential write fault, with it (0: off)"},
    {"RDMX_DSM_CHECK_RACES", nullptr, Kind::flag, 0, 1, nullptr, "0",
     "debug: report bytes two processes wrote between the same DSM synchronizations (floating home)"},
    {"RDMX_OMP_STACK", nullptr, Kind::size, 64 * KiB, 64 * GiB, nullptr, "8M",
     "rdmx_omp: stack of the master thread (the program's main), in the DSM heap"},
    {"RDMX_OMP_WORK_SHARES", nullptr, Kind::count, 1, 1ull << 20, nullptr, "256",
     "rdmx_omp: work-sharing constructs a thread may run ahead of another (nowait loops in a row)"},
    {"RDMX_OMP_STATS", nullptr, Kind::flag, 0, 1, nullptr, "0",
     "rdmx_omp: each process prints its region, barrier and DSM counts to stderr at the end"},
    {"RDMX_FAR_SERVERS", nullptr, Kind::text, 0, 0, "comma-separated ranks", "the last process",
     "processes that serve far memory (far::Manager)"},
    {"RDMX_FAR_REGION", nullptr, Kind::size, 64 * KiB, 64 * TiB, nullptr, "16M",
     "registered bytes each far-memory server maps and publishes"},
    {"RDMX_FAR_CACHE", nullptr, Kind::size, 64 * KiB, 64 * TiB, nullptr, "4M",
     "local budget: bytes of the far-memory cache arena"},
    {"RDMX_FAR_REPLICATION", nullptr, Kind::count, 1, 16, nullptr, "1",
     "far-memory servers holding each object (the servers form groups of this many)"},
    {"RDMX_FAR_PATH", nullptr, Kind::choice, 0, 0, "one_sided|two_sided", "one_sided",
     "how far objects travel: one-sided get/put, or requests served by the server's CPU"},
    {"RDMX_FAR_EVACUATOR", nullptr, Kind::choice, 0, 0, "auto|on|off", "auto",
     "a background thread per far::Manager keeps part of the cache free (auto: where its write-backs need no service thread)"},
    {"RDMX_FAR_EVACUATOR_WATCH", nullptr, Kind::choice, 0, 0, "auto|on|off", "auto",
     "the evacuator watches for work 200 us before it sleeps (auto: where each process has two cores to spare)"},
    {"RDMX_FAR_FREE_LOW", nullptr, Kind::count, 1, 50, nullptr, "5",
     "percent of the far-memory cache kept free: below it the evacuator wakes"},
    {"RDMX_FAR_FREE_HIGH", nullptr, Kind::count, 1, 50, nullptr, "10",
     "percent of the far-memory cache the evacuator frees up to once woken"},
    {"RDMX_FAR_PREFETCH", nullptr, Kind::count, 0, 64, nullptr, "0",
     "chunks a far::Array keeps in flight ahead of a strided access pattern (0: no prefetching, the default)"},
};

// RDMX_* variables that rdmx's own scripts set or read: not settings of the
// library, so not misspellings either.
bool used_by_scripts(std::string_view name) {
  static constexpr std::string_view names[] = {"RDMX_ROOT",       "RDMX_JOBS",     "RDMX_CTEST_JOBS", "RDMX_BUILD_TYPE",
                                               "RDMX_ASAN_LEAKS", "RDMX_DEMO_TLS", "RDMX_MPI_IF"};
  return name.starts_with("RDMX_BENCH_") || std::find(std::begin(names), std::end(names), name) != std::end(names);
}

// The unsigned number at the start of `text`; `pos` is where it ends (0: none).
// Leading signs and blanks are refused (stoull would wrap "-1" and skip " ").
unsigned long long leading_number(const std::string& text, std::size_t& pos) {
  pos = 0;
  if (text.empty() || text[0] < '0' || text[0] > '9') return 0;
  try {
    return std::stoull(text, &pos);
  } catch (const std::out_of_range&) {
    pos = std::string::npos;  // digits, but more than 64 bits hold
    return 0;
  } catch (const std::exception&) {
    pos = 0;
    return 0;
  }
}

[[noreturn]] void refuse(const Variable& v, const std::string& what, const std::string& text, const std::string& why) {
  const char* unit = v.kind == Kind::size ? " (suffixes K, M, G, T: powers of 1024)" : "";
  throw Error(Errc::invalid_argument, what + "='" + text + "' " + why + "; " + v.name + " accepts " + accepted(v) + unit);
}

bool one_of(const char* words, const std::string& text) {
  if (words == nullptr) return false;
  std::string_view rest(words);
  while (!rest.empty()) {
    const std::size_t bar = rest.find('|');
    if (rest.substr(0, bar) == text) return true;
    if (bar == std::string_view::npos) break;
    rest.remove_prefix(bar + 1);
  }
  return false;
}

std::string listed(const char* words, const char* last_joint) {
  std::string out;
  std::string_view rest(words);
  while (!rest.empty()) {
    const std::size_t bar = rest.find('|');
    if (!out.empty()) out += bar == std::string_view::npos ? last_joint : ", ";
    out += rest.substr(0, bar);
    if (bar == std::string_view::npos) break;
    rest.remove_prefix(bar + 1);
  }
  return out;
}

std::string size_words(std::uint64_t n) {
  if (n >= KiB && n % TiB == 0) return std::to_string(n / TiB) + "T";
  if (n >= KiB && n % GiB == 0) return std::to_string(n / GiB) + "G";
  if (n >= KiB && n % MiB == 0) return std::to_string(n / MiB) + "M";
  if (n >= KiB && n % KiB == 0) return std::to_string(n / KiB) + "K";
  return std::to_string(n);
}

const Variable& must_find(const char* name) {
  const Variable* v = find(name);
  if (v == nullptr) throw Error(Errc::invalid_argument, std::string(name) + " is not in rdmx's table of settings");
  return *v;
}

// Edit distance, small strings only: suggests the setting a misspelling meant.
std::size_t distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

}  // namespace

std::span<const Variable> variables() { return table; }

const Variable* find(std::string_view name) {
  for (const Variable& v : table)
    if (name == v.name) return &v;
  return nullptr;
}

std::string accepted(const Variable& v) {
  switch (v.kind) {
    case Kind::size: {
      std::string range = size_words(v.min) + " to " + size_words(v.max) + " bytes";
      return v.choices ? range + "; " + listed(v.choices, " or ") + ": off" : range;
    }
    case Kind::count: return std::to_string(v.min) + " to " + std::to_string(v.max);
    case Kind::flag: return "1/0, yes/no, on/off, true/false";
    case Kind::choice: return listed(v.choices, " or ");
    case Kind::text: return v.choices;
  }
  return {};
}

std::optional<std::string> get(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return std::nullopt;
  return std::string(v);
}

std::uint64_t parse(const Variable& v, const std::string& text, const std::string& what) {
  switch (v.kind) {
    case Kind::size:
    case Kind::count: {
      if (v.kind == Kind::size && one_of(v.choices, text)) return 0;
      std::size_t pos = 0;
      std::uint64_t value = leading_number(text, pos);
      if (pos == std::string::npos) refuse(v, what, text, "does not fit in 64 bits");
      if (pos == 0) refuse(v, what, text, "is not a number");
      if (pos < text.size()) {
        if (v.kind == Kind::count) refuse(v, what, text, "is not a whole number");
        std::uint64_t scale = 0;
        switch (text[pos]) {
          case 'k': case 'K': scale = KiB; break;
          case 'm': case 'M': scale = MiB; break;
          case 'g': case 'G': scale = GiB; break;
          case 't': case 'T': scale = TiB; break;
        }
        const bool suffix_ok = pos + 1 == text.size() || (pos + 2 == text.size() && (text[pos + 1] == 'B' || text[pos + 1] == 'b'));
        if (scale == 0 || !suffix_ok) refuse(v, what, text, "has an unknown suffix");
        if (__builtin_mul_overflow(value, scale, &value)) refuse(v, what, text, "does not fit in 64 bits");
      }
      if (value < v.min || value > v.max) refuse(v, what, text, "is out of range");
      return value;
    }
    case Kind::flag:
      if (text == "1" || text == "yes" || text == "y" || text == "true" || text == "on") return 1;
      if (text == "0" || text == "no" || text == "n" || text == "false" || text == "off") return 0;
      refuse(v, what, text, "is not a boolean");
    case Kind::choice:
      if (!one_of(v.choices, text)) refuse(v, what, text, "is not one of the choices");
      return 0;
    case Kind::text:
      if (text.empty()) refuse(v, what, text, "is empty");
      return 0;
  }
  return 0;
}

std::uint64_t get_size(const char* name, std::uint64_t fallback) {
  const Variable& v = must_find(name);
  auto text = get(name);
  return text ? parse(v, *text, name) : fallback;
}

std::uint64_t get_count(const char* name, std::uint64_t fallback) { return get_size(name, fallback); }

bool get_bool(const char* name, bool fallback) {
  const Variable& v = must_find(name);
  auto text = get(name);
  return text ? parse(v, *text, name) != 0 : fallback;
}

std::map<std::string, std::string> take_options(std::vector<std::string>& args) {
  std::map<std::string, std::string> values;
  for (auto it = args.begin(); it != args.end();) {
    const std::string& arg = *it;
    if (arg.rfind("--rdmx-", 0) != 0) {
      ++it;
      continue;
    }
    const std::size_t eq = arg.find('=');
    const std::string name = arg.substr(7, eq == std::string::npos ? std::string::npos : eq - 7);
    const Variable* v = nullptr;
    std::string known;
    for (const Variable& candidate : table) {
      if (candidate.option == nullptr) continue;
      if (name == candidate.option) v = &candidate;
      known += std::string(known.empty() ? "" : ", ") + "--rdmx-" + candidate.option;
    }
    if (v == nullptr)
      throw Error(Errc::invalid_argument, "unknown option " + arg.substr(0, eq) + " (rdmx's options are " + known +
                                              ", each as --rdmx-NAME=VALUE)");
    const std::string flag = "--rdmx-" + name;
    if (eq == std::string::npos)
      throw Error(Errc::invalid_argument, "option " + flag + " needs a value: write " + flag + "=VALUE (" + flag +
                                              " accepts " + accepted(*v) + ")");
    const std::string value = arg.substr(eq + 1);
    parse(*v, value, flag);
    values[v->name] = value;
    it = args.erase(it);
  }
  return values;
}

std::vector<std::string> unknown_names(const std::vector<std::string>& names) {
  std::vector<std::string> unknown;
  for (const std::string& name : names)
    if (name.rfind("RDMX_", 0) == 0 && find(name) == nullptr && !used_by_scripts(name)) unknown.push_back(name);
  return unknown;
}

void check_environment() {
  std::vector<std::string> names;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const char* eq = std::strchr(*e, '=');
    if (eq != nullptr && std::strncmp(*e, "RDMX_", 5) == 0) names.emplace_back(*e, static_cast<std::size_t>(eq - *e));
  }
  for (const std::string& name : names) {
    const Variable* v = find(name);
    if (v == nullptr) continue;
    if (auto text = get(v->name)) parse(*v, *text, v->name);
  }
  static std::atomic<bool> warned{false};
  const std::vector<std::string> unknown = unknown_names(names);
  if (unknown.empty() || warned.exchange(true)) return;
  for (const std::string& name : unknown) {
    const Variable* nearest = nullptr;
    std::size_t best = 3;  // suggest only close names
    for (const Variable& v : table) {
      const std::size_t d = distance(name, v.name);
      if (d < best) {
        best = d;
        nearest = &v;
      }
    }
    rdmx::log(rdmx::LogLevel::warn, "warning: %s is set but is not an rdmx setting%s%s%s (see the table in README.md)\n",
                 name.c_str(), nearest ? " (did you mean " : "", nearest ? nearest->name : "", nearest ? "?)" : "");
  }
}

std::uint64_t parse_size(const std::string& text, const char* what) {
  static constexpr Variable any_size{"a size", nullptr, Kind::size, 0, ~0ull, nullptr, "", ""};
  try {
    return parse(any_size, text, what);
  } catch (const Error&) {
    throw Error(Errc::invalid_argument, std::string(what) + "='" + text +
                                            "' is not a size (examples: 4096, 64K, 2M, 1G; at most 64 bits)");
  }
}

std::uint64_t parse_count(const std::string& text, const char* what) {
  static constexpr Variable any_count{"a count", nullptr, Kind::count, 1, ~0ull, nullptr, "", ""};
  try {
    return parse(any_count, text, what);
  } catch (const Error&) {
    throw Error(Errc::invalid_argument, std::string(what) + "='" + text + "' is not a positive whole number");
  }
}

}  // namespace rdmx::env
