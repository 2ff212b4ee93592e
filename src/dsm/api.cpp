// The public face of the DSM: Space, allocate, fences, Mutex, counters.
#include <cstdio>
#include <string>
#include <utility>

#include "engine.hpp"
#include "layer.hpp"
#include "rdmx/core/log.hpp"
#include "settings.hpp"
#include "rdmx/core/error.hpp"
#include "rdmx/dsm/counters.hpp"
#include "rdmx/dsm/fence.hpp"
#include "rdmx/dsm/mutex.hpp"
#include "rdmx/dsm/space.hpp"
#include "rdmx/fabric/job.hpp"
#include "rdmx/fabric/layer.hpp"

namespace rdmx::dsm {

const char* to_string(HomePolicy policy) noexcept { return policy == HomePolicy::fixed ? "fixed" : "floating"; }
const char* to_string(Invalidation invalidation) noexcept {
  return invalidation == Invalidation::directory ? "directory" : "signature";
}

namespace {
// A setting that names one of two values (the table checks the word).
template <class E>
E choice(const char* name, const std::pair<const char*, E> (&values)[2]) {
  return rdmx_dsm_settings.word(name) == values[0].first ? values[0].second : values[1].second;
}
}  // namespace

Config Config::from_env() {
  Config c;
  c.heap_bytes = rdmx_dsm_settings.number("RDMX_DSM_HEAP");
  c.block_bytes = rdmx_dsm_settings.number("RDMX_DSM_BLOCK");
  c.home = choice<HomePolicy>("RDMX_DSM_HOME", {{"floating", HomePolicy::floating}, {"fixed", HomePolicy::fixed}});
  c.invalidation = choice<Invalidation>("RDMX_DSM_INVALIDATION",
                                      {{"signature", Invalidation::signature}, {"directory", Invalidation::directory}});
  c.notices = static_cast<std::uint32_t>(rdmx_dsm_settings.number("RDMX_DSM_NOTICES"));
  c.mutexes = static_cast<std::uint32_t>(rdmx_dsm_settings.number("RDMX_DSM_MUTEXES"));
  c.lease = rdmx_dsm_settings.number("RDMX_DSM_LEASE");
  c.keep = static_cast<std::uint32_t>(rdmx_dsm_settings.number("RDMX_DSM_KEEP"));
  c.check_races = rdmx_dsm_settings.flag("RDMX_DSM_CHECK_RACES");
  c.read_ahead = static_cast<std::uint32_t>(rdmx_dsm_settings.number("RDMX_DSM_READ_AHEAD"));
  c.write_ahead = static_cast<std::uint32_t>(rdmx_dsm_settings.number("RDMX_DSM_WRITE_AHEAD"));
  return c;
}

Space::Space(Job& job, const Config& config)
    : engine_(std::make_unique<Engine>(job, fabric::layer<Layer>(job), config)) {}

Space::~Space() {
  // A peer still waiting in a barrier this process will not enter fails,
  // naming it, instead of meeting the job barrier below.
  engine_->tell_ended();
  // Peers may still fetch from our home copies until they, too, are done.
  try {
    Job::current().barrier();
  } catch (const std::exception& e) {
    rdmx::log(rdmx::LogLevel::warn, "dsm: leaving the space: %s", e.what());
  }
}

std::span<std::byte> Space::heap() const noexcept { return {engine_->base(), engine_->bytes()}; }
const Config& Space::config() const noexcept { return engine_->config(); }

void* allocate(std::size_t bytes, std::size_t alignment) { return Layer::require("allocate").allocate(bytes, alignment); }
void release() { Layer::require("release").release(); }
void barrier() { Layer::require("barrier").barrier(true); }
void process_barrier() { Layer::require("process_barrier").barrier(false); }

Mutex::Mutex(std::uint32_t index) : index_(index) {}
void Mutex::lock() { Layer::require("Mutex::lock").lock(index_); }
bool Mutex::try_lock() { return Layer::require("Mutex::try_lock").try_lock(index_); }
void Mutex::unlock() { Layer::require("Mutex::unlock").unlock(index_); }
void Mutex::unlock_only(const void* address, std::size_t bytes) {
  Layer::require("Mutex::unlock_only").unlock(index_, address, bytes);
}

Counters counters() { return Layer::require("counters").counters(); }

std::string to_string(const Counters& c) {
  return "read_faults " + std::to_string(c.read_faults) + ", write_faults " + std::to_string(c.write_faults) +
         ", fast_reads " + std::to_string(c.fast_reads) + ", read_ahead " + std::to_string(c.read_ahead) +
         ", write_ahead " + std::to_string(c.write_ahead) +
         ", migrations " + std::to_string(c.migrations) + ", links_followed " + std::to_string(c.links_followed) +
         ", merges " + std::to_string(c.merges) + ", fast_releases " + std::to_string(c.fast_releases) +
         ", invalidations " + std::to_string(c.invalidations) +
         ", overflows " + std::to_string(c.overflows) + ", bytes_fetched " + std::to_string(c.bytes_fetched) +
         ", races " + std::to_string(c.races) + ", protects " + std::to_string(c.protects) + ", barriers " +
         std::to_string(c.barriers) + ", locks " + std::to_string(c.locks) +
         ", causal_misses " + std::to_string(c.causal_misses);
}

}  // namespace rdmx::dsm
