// The public face of the DSM: Space, allocate, fences, Mutex, counters.
#include <cstdio>
#include <string>
#include <utility>

#include "engine.hpp"
#include "rdmx/core/log.hpp"
#include "rdmx/core/env.hpp"
#include "rdmx/core/error.hpp"
#include "rdmx/dsm/counters.hpp"
#include "rdmx/dsm/fence.hpp"
#include "rdmx/dsm/mutex.hpp"
#include "rdmx/dsm/space.hpp"
#include "rdmx/fabric/job.hpp"

namespace rdmx::dsm {

const char* to_string(HomePolicy policy) noexcept { return policy == HomePolicy::fixed ? "fixed" : "floating"; }
const char* to_string(Invalidation invalidation) noexcept {
  return invalidation == Invalidation::directory ? "directory" : "signature";
}

namespace {
// A setting that names one of two values; the first is the default. (The
// Job refuses any other word at start-up; a Config read without one, too.)
template <class E>
E choice(const char* name, const std::pair<const char*, E> (&values)[2]) {
  const std::string word = env::get(name).value_or(values[0].first);
  for (const auto& [text, value] : values)
    if (word == text) return value;
  throw Error(Errc::invalid_argument,
              std::string(name) + "='" + word + "' is not " + values[0].first + " or " + values[1].first);
}
}  // namespace

Config Config::from_env() {
  Config c;
  c.heap_bytes = env::get_size("RDMX_DSM_HEAP", 32ull << 20);
  c.block_bytes = env::get_size("RDMX_DSM_BLOCK", 4096);
  c.home = choice<HomePolicy>("RDMX_DSM_HOME", {{"floating", HomePolicy::floating}, {"fixed", HomePolicy::fixed}});
  c.invalidation = choice<Invalidation>("RDMX_DSM_INVALIDATION",
                                      {{"signature", Invalidation::signature}, {"directory", Invalidation::directory}});
  c.notices = static_cast<std::uint32_t>(env::get_count("RDMX_DSM_NOTICES", 1024));
  c.mutexes = static_cast<std::uint32_t>(env::get_count("RDMX_DSM_MUTEXES", 16));
  c.lease = env::get_count("RDMX_DSM_LEASE", 16);
  c.keep = static_cast<std::uint32_t>(env::get_count("RDMX_DSM_KEEP", 1));
  c.check_races = env::get_bool("RDMX_DSM_CHECK_RACES", false);
  c.read_ahead = static_cast<std::uint32_t>(env::get_count("RDMX_DSM_READ_AHEAD", 8));
  c.write_ahead = static_cast<std::uint32_t>(env::get_count("RDMX_DSM_WRITE_AHEAD", 8));
  return c;
}

Space::Space(Job& job, const Config& config) : engine_(std::make_unique<Engine>(job, config)) {}

Space::~Space() {
  // Peers may still fetch from our home copies until they, too, are done.
  try {
    Job::current().barrier();
  } catch (const std::exception& e) {
    rdmx::log(rdmx::LogLevel::warn, "dsm: leaving the space: %s", e.what());
  }
}

std::span<std::byte> Space::heap() const noexcept { return {engine_->base(), engine_->bytes()}; }
const Config& Space::config() const noexcept { return engine_->config(); }

void* allocate(std::size_t bytes, std::size_t alignment) { return Engine::require("allocate").allocate(bytes, alignment); }
void release() { Engine::require("release").release(); }
void barrier() { Engine::require("barrier").barrier(false); }
void thread_barrier() { Engine::require("thread_barrier").barrier(true); }

Mutex::Mutex(std::uint32_t index) : index_(index) {}
void Mutex::lock() { Engine::require("Mutex::lock").lock(index_); }
bool Mutex::try_lock() { return Engine::require("Mutex::try_lock").try_lock(index_); }
void Mutex::unlock() { Engine::require("Mutex::unlock").unlock(index_); }
void Mutex::unlock_only(const void* address, std::size_t bytes) {
  Engine::require("Mutex::unlock_only").unlock(index_, address, bytes);
}

Counters counters() { return Engine::require("counters").counters(); }

std::string to_string(const Counters& c) {
  return "read_faults " + std::to_string(c.read_faults) + ", write_faults " + std::to_string(c.write_faults) +
         ", fast_reads " + std::to_string(c.fast_reads) + ", read_ahead " + std::to_string(c.read_ahead) +
         ", write_ahead " + std::to_string(c.write_ahead) +
         ", migrations " + std::to_string(c.migrations) + ", links_followed " + std::to_string(c.links_followed) +
         ", merges " + std::to_string(c.merges) + ", fast_releases " + std::to_string(c.fast_releases) +
         ", invalidations " + std::to_string(c.invalidations) +
         ", overflows " + std::to_string(c.overflows) + ", bytes_fetched " + std::to_string(c.bytes_fetched) +
         ", races " + std::to_string(c.races) + ", protects " + std::to_string(c.protects) + ", barriers " +
         std::to_string(c.barriers) + ", locks " + std::to_string(c.locks);
}

}  // namespace rdmx::dsm
