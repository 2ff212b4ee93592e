// The Manager's collective set-up and teardown: every process checks the
// configuration and maps what it needs, the servers their region, and one
// allgather tells every process every other's outcome, so that a bad
// configuration fails on every process instead of leaving some in a
// collective.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "layer.hpp"
#include "rdmx/core/error.hpp"
#include "rdmx/core/log.hpp"
#include "rdmx/fabric/job.hpp"
#include "rdmx/far/manager.hpp"
#include "rdmx/memory/arena.hpp"
#include "runtime.hpp"
#include "served_region.hpp"

namespace rdmx::far {
namespace {

// What a process publishes at Manager construction (every process, server or not).
struct Published {
  std::uint32_t ok = 0;
  std::uint32_t serves = 0;
  RemoteLocator region{};
  char error[512] = {};  // room for a message that says what to do
};

void check_config(const Config& c) {
  if (c.cache_bytes < 4 * slab_bytes)
    throw Error(Errc::invalid_argument, "far: a cache of " + std::to_string(c.cache_bytes) + " bytes is too small (at least " +
                                            std::to_string(4 * slab_bytes) + ", four slabs of the largest size class)");
  if (c.cache_bytes / min_object_bytes > state::frame_mask)
    throw Error(Errc::invalid_argument, "far: a cache of " + std::to_string(c.cache_bytes) + " bytes exceeds what a far pointer can name");
  if (c.evacuator != Evacuator::off && !(c.free_low > 0 && c.free_low <= c.free_high && c.free_high <= 0.5))
    throw Error(Errc::invalid_argument, "far: the evacuator's free-space marks " + std::to_string(c.free_low) + " and " +
                                            std::to_string(c.free_high) +
                                            " need 0 < low <= high <= 0.5 (RDMX_FAR_FREE_LOW, RDMX_FAR_FREE_HIGH)");
  if (c.region_bytes < slab_bytes || c.region_bytes > state::max_region_bytes)
    throw Error(Errc::invalid_argument, "far: a region of " + std::to_string(c.region_bytes) + " bytes is outside 16 KiB to 4 TiB");
}

// This process is done with Manager `number`'s regions (a server: once
// every peer is, too). Never throws: it runs in a destructor, or on the way
// out of a failed constructor.
void end_manager(Job& job, std::uint64_t number, std::span<const std::uint32_t> servers, bool serving) noexcept {
  try {
    fabric::layer<detail::FarLayer>(job).end_manager(number, servers, serving);
  } catch (const std::exception& e) {
    rdmx::log(rdmx::LogLevel::warn, "far: leaving the far-memory job: %s", e.what());
  }
}

}  // namespace

// What the set-up took from the job, given back at teardown.
struct Manager::Resources {
  Job* job = nullptr;
  memory::Block server_chunk{};
  memory::Block cache_chunk{};
  std::uint64_t number = 0;  // job-backed: the far layer's count of this Manager
  std::unique_ptr<std::byte, decltype(&std::free)> own_cache{nullptr, &std::free};  // in-process
};

Manager::Manager(Job& job, Config config) : resources_(std::make_unique<Resources>()) {
  Resources& r = *resources_;
  r.job = &job;
  auto& servers = config.servers;
  if (servers.empty()) servers.push_back(job.size() - 1);
  std::sort(servers.begin(), servers.end());
  servers.erase(std::unique(servers.begin(), servers.end()), servers.end());

  // Everything that can fail locally happens before the allgather, and its
  // outcome travels with it: either every process goes on or every one throws.
  Published mine{};
  try {
    detail::check_no_runtime(&job);
    check_config(config);
    if (servers.back() >= job.size())
      throw Error(Errc::invalid_argument, "far: server rank " + std::to_string(servers.back()) + " is not in the job of " +
                                              std::to_string(job.size()) + " processes (RDMX_FAR_SERVERS)");
    // Servers only serve: a job they all are would end having done nothing.
    if (servers.size() == job.size())
      throw Error(Errc::invalid_argument,
                  job.size() == 1
                      ? std::string("far: this job has one process, and it serves (the default server is the last "
                                    "process), so no process computes: start the program with at least 2 processes "
                                    "(scripts/run -np 2 PROGRAM, or mpirun), or in one process use an in-process "
                                    "device (Manager(make_local_device(...), config))")
                      : "far: every process of this job of " + std::to_string(job.size()) +
                            " is a server (RDMX_FAR_SERVERS, Config::servers), so no process computes: name fewer "
                            "servers, or start more processes than servers");
    if (servers.size() > state::max_servers)
      throw Error(Errc::invalid_argument, "far: " + std::to_string(servers.size()) + " servers, but a far pointer names at most " +
                                              std::to_string(state::max_servers));
    if (config.replication == 0 || servers.size() % config.replication != 0)
      throw Error(Errc::invalid_argument, "far: replication " + std::to_string(config.replication) +
                                              " needs a number of servers that divides by it (" + std::to_string(servers.size()) +
                                              " servers; RDMX_FAR_SERVERS, RDMX_FAR_REPLICATION)");
    r.cache_chunk = job.arena().allocate_chunk(config.cache_bytes, min_object_bytes);
    if (std::binary_search(servers.begin(), servers.end(), job.rank())) {
      r.server_chunk = job.arena().allocate_chunk(config.region_bytes, min_object_bytes);
      mine.serves = 1;
      mine.region = r.server_chunk.locator(job.rank());
      mine.region.length = config.region_bytes;
      detail::serve(r.server_chunk.data, config.region_bytes);
    }
    mine.ok = 1;
  } catch (const std::exception& e) {
    std::strncpy(mine.error, e.what(), sizeof mine.error - 1);
  }
  auto all = job.allgather(std::as_bytes(std::span(&mine, 1)));
  std::vector<Published> published(all.size());
  for (std::uint32_t p = 0; p < all.size(); ++p) {
    std::memcpy(&published[p], all[p].data(), std::min(sizeof(Published), all[p].size()));
    published[p].error[sizeof published[p].error - 1] = '\0';
  }
  const auto give_back = [&] {
    detail::stop_serving();
    if (r.server_chunk) job.arena().release_chunk(r.server_chunk);
    if (r.cache_chunk) job.arena().release_chunk(r.cache_chunk);
  };
  auto give_up = [&](const std::string& why, Reach reach) {
    give_back();
    throw Error(Errc::invalid_argument, why, reach);
  };
  // Every process sees a failure in the same gathered data: the job's error,
  // printed once (said once, too, when every process failed alike).
  auto failed = [](const Published& p) { return p.ok == 0; };
  if (auto first = std::find_if(published.begin(), published.end(), failed); first != published.end()) {
    const bool alike = std::all_of(published.begin(), published.end(),
                                   [&](const Published& p) { return failed(p) && std::strcmp(p.error, first->error) == 0; });
    give_up(alike ? std::string(first->error)
                  : "far::Manager failed on process " + std::to_string(first - published.begin()) + ": " + first->error,
            Reach::every_process);
  }
  // Which processes were named servers is this process's view: its own error.
  std::vector<RemoteLocator> regions;
  for (std::uint32_t p = 0; p < published.size(); ++p) {
    const bool named = std::binary_search(servers.begin(), servers.end(), p);
    if (named != (published[p].serves != 0))
      give_up("far: process " + std::to_string(p) +
                  (named ? " was named a server here but does not serve" : " serves but was not named a server here") +
                  " (every process needs the same RDMX_FAR_SERVERS)",
              Reach::this_process);
    if (named) regions.push_back(published[p].region);
  }
  // Every process got here, or every one threw: the count stays the same everywhere.
  r.number = fabric::layer<detail::FarLayer>(job).begin_manager();
  const std::vector<std::uint32_t> named = servers;  // config moves into the runtime
  try {
    auto device = make_device(config.path, regions);
    runtime_ = std::make_unique<detail::Runtime>(std::move(config), &job, std::move(device), std::move(regions), job.rank(),
                                                 job.size(), r.cache_chunk.data, static_cast<bool>(r.server_chunk));
    detail::attach(*runtime_, &job);
  } catch (...) {
    // Perhaps on this process alone: servers whose Managers go on must not
    // wait for this one to end.
    runtime_.reset();
    end_manager(job, r.number, named, false);
    give_back();
    throw;
  }
}

Manager::Manager(std::unique_ptr<Device> device, Config config) : resources_(std::make_unique<Resources>()) {
  Resources& r = *resources_;
  check_config(config);
  if (device == nullptr || device->servers() == 0) throw Error(Errc::invalid_argument, "far: a Manager needs a device with a server");
  Job* job = detail::job_if_any();
  detail::check_no_runtime(job);
  config.servers.clear();
  for (std::size_t s = 0; s < device->servers(); ++s) config.servers.push_back(device->rank_of(s));
  r.own_cache.reset(static_cast<std::byte*>(std::aligned_alloc(min_object_bytes, config.cache_bytes / slab_bytes * slab_bytes)));
  if (r.own_cache == nullptr) throw Error(Errc::out_of_memory, "far: cannot allocate the cache");
  runtime_ = std::make_unique<detail::Runtime>(std::move(config), nullptr, std::move(device), std::vector<RemoteLocator>{}, 0, 1,
                                               r.own_cache.get(), false);
  detail::attach(*runtime_, job);
}

Manager::~Manager() {
  runtime_->cache().evacuator().stop();
  Resources& r = *resources_;
  if (r.job != nullptr && runtime_->layer.load() == nullptr) {
    // Its Job was destroyed first (FarLayer::leaving said so): the cache's
    // memory, the transports and the peers went with it, and the servers
    // stopped waiting for this process. Nothing is left to tell or give
    // back, and destroying the runtime would touch what is gone: it is let
    // go, once, as the process ends.
    static_cast<void>(runtime_.release());
    return;
  }
  detail::detach(*runtime_);
  if (r.job == nullptr) return;
  // A server waits here until every client is done with its region.
  end_manager(*r.job, r.number, runtime_->config().servers, runtime_->serving());
  detail::stop_serving();
  runtime_.reset();
  try {
    if (r.server_chunk) r.job->arena().release_chunk(r.server_chunk);
    r.job->arena().release_chunk(r.cache_chunk);
  } catch (const std::exception& e) {
    rdmx::log(rdmx::LogLevel::error, "far: %s", e.what());
  }
}

}  // namespace rdmx::far
