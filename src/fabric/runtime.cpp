// Runtime: configuration, address exchange, topology and placement, the
// remote-access table, and binding threads to workers.
#include <hwloc.h>
#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <string>
#include <utility>

#include "rdmx/core/backoff.hpp"
#include "rdmx/core/env.hpp"
#include "rdmx/core/error.hpp"
#include "rdmx/core/log.hpp"
#include "rdmx/core/registry.hpp"
#include "rdmx/fabric/call.hpp"
#include "rdmx/fabric/job.hpp"
#include "rdmx/transfer/endpoint.hpp"
#include "rdmx/transfer/status.hpp"
#include "collectives.hpp"
#include "runtime.hpp"
#include "settings.hpp"

namespace rdmx::fabric {

namespace {

void put_u32(std::vector<std::byte>& out, std::uint32_t v) {
  auto* p = reinterpret_cast<const std::byte*>(&v);
  out.insert(out.end(), p, p + sizeof v);
}

std::uint32_t get_u32(const std::vector<std::byte>& in, std::size_t& at) {
  if (at + 4 > in.size()) throw Error(Errc::bootstrap, "truncated bootstrap record");
  std::uint32_t v;
  std::memcpy(&v, in.data() + at, 4);
  at += 4;
  return v;
}

// --rdmx-help: every setting of every layer this program links, printed by
// one process of the job (the first), then every process leaves.
[[noreturn]] void print_help_and_exit(const std::string& format) {
  const char* rank = std::getenv("PMIX_RANK");
  if (rank == nullptr || std::strcmp(rank, "0") == 0) {
    if (format == "markdown") {
      std::fputs(env::describe(env::Format::markdown).c_str(), stdout);
    } else {
      std::fputs("rdmx settings: RDMX_NAME=VALUE in the environment, or --rdmx-NAME=VALUE on the command line where\n"
                 "shown (the option wins). Sizes take K, M, G or T (powers of 1024). A bad value, or an RDMX_*\n"
                 "variable that is no setting, stops the job with an error naming it.\n\n",
                 stdout);
      std::fputs(env::describe(env::Format::text).c_str(), stdout);
    }
    std::fflush(stdout);
  }
  std::exit(0);
}

}  // namespace

// ---- Runtime ----

Runtime::Runtime(Job::Options options, std::vector<std::string>& args) {
  // The constructing thread becomes worker thread 0 and may be pinned; it
  // gets its affinity back when the Job ends.
  CPU_ZERO(&main_affinity_);
  main_affinity_saved_ = pthread_getaffinity_np(pthread_self(), sizeof main_affinity_, &main_affinity_) == 0;
  // Configuration: explicit options, then command line, then environment.
  // Every setting is checked here, when the job starts, not when a module
  // first reads it: a mistyped option or an out-of-range value stops the
  // job with a message naming it.
  // Both read only what every process is started with: a refusal here is
  // the job's, and is printed once.
  const auto given = shared_settings([&] { return env::take_options(args); });
  if (auto help = given.find("help"); help != given.end()) print_help_and_exit(help->second);
  shared_settings([] { env::check_environment(); });
  const env::Table& table = rdmx_fabric_settings;
  auto setting = [&](const char* name) -> std::optional<std::string> {
    if (auto it = given.find(name); it != given.end()) return it->second;
    return table.given(name);
  };
  auto number = [](const char* name, const std::string& text) {  // already checked: fits its range
    return static_cast<std::uint32_t>(env::parse(rdmx_fabric_settings.at(name), text, name));
  };
  auto layout_text = setting("RDMX_LAYOUT");
  auto threads_text = setting("RDMX_THREADS");
  auto helpers_text = setting("RDMX_HELPERS");
  auto pin_text = given.count("RDMX_PIN") ? setting("RDMX_PIN") : options.pin ? options.pin : table.given("RDMX_PIN");
  threads_ = options.threads;
  std::optional<Layout> requested;
  if (layout_text) requested = shared_settings([&] { return Layout::parse(*layout_text, "RDMX_LAYOUT / --rdmx-layout"); });
  if (threads_ == 0 && threads_text) threads_ = number("RDMX_THREADS", *threads_text);  // range-checked: 1 to 1024
  if (threads_ == 0 && requested) threads_ = requested->threads_per_process;
  if (threads_ == 0) threads_ = 1;
  if (threads_ > 1024) throw Error(Errc::invalid_argument, "at most 1024 worker threads per process");
  if (options.helpers) {
    helpers_ = *options.helpers;
  } else if (helpers_text) {
    helpers_ = number("RDMX_HELPERS", *helpers_text);
  }
  if (helpers_ > threads_)
    throw Error(Errc::invalid_argument, "RDMX_HELPERS=" + std::to_string(helpers_) + ": at most one helper thread per worker thread (" +
                                            std::to_string(threads_) + ")");
  max_message_ = options.max_message != 0 ? options.max_message : table.number("RDMX_MAX_MESSAGE");
  receive_probe_ms_ = static_cast<std::uint32_t>(table.number("RDMX_RECEIVE_PROBE_MS"));

  bootstrap_ = Bootstrap::create();
  rank_ = bootstrap_->rank();
  size_ = bootstrap_->size();
  failed_ = std::make_unique<std::atomic<bool>[]>(size_);
  emulated_ = std::make_unique<std::atomic<std::int8_t>[]>(size_);
  for (std::uint32_t p = 0; p < size_; ++p) emulated_[p].store(-1, std::memory_order_relaxed);
  survivor_flushed_ = std::make_unique<std::atomic<std::uint64_t>[]>(size_);
  survivor_voted_ = std::make_unique<std::atomic<std::uint64_t>[]>(size_);
  transports_reported_ = std::make_unique<std::atomic<bool>[]>(size_);

  for (std::uint32_t worker = 0; worker < workers(); ++worker)
    contexts_.push_back(std::make_unique<ThreadContext>(*this, worker, transfer::Worker::Sharing::single_thread));
  // The service worker is shared: short-lived threads send through it.
  contexts_.push_back(std::make_unique<ThreadContext>(*this, workers(), transfer::Worker::Sharing::shared));

  max_closure_ = 4096;
  for (auto& c : contexts_) {
    ucp_worker_attr_t attr{};
    attr.field_mask = UCP_WORKER_ATTR_FIELD_MAX_AM_HEADER;
    if (ucp_worker_query(c->worker().get(), &attr) == UCS_OK)
      max_closure_ = std::min<std::size_t>(max_closure_, attr.max_am_header - sizeof(CallHeader));
  }

  // Exchange: hostname, thread count, then every worker's address.
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  std::vector<std::byte> mine;
  std::string hostname(host);
  // The kernel's boot id names the cores a process shares: hosts simulated
  // by network namespaces have hostnames of their own but one set of cores.
  std::string kernel = hostname;
  if (std::ifstream boot("/proc/sys/kernel/random/boot_id"); boot) std::getline(boot, kernel);
  for (const std::string* text : {&hostname, &kernel}) {
    put_u32(mine, static_cast<std::uint32_t>(text->size()));
    mine.insert(mine.end(), reinterpret_cast<const std::byte*>(text->data()),
                reinterpret_cast<const std::byte*>(text->data()) + text->size());
  }
  put_u32(mine, threads_);
  put_u32(mine, helpers_);
  put_u32(mine, static_cast<std::uint32_t>(getpid()));
  for (auto& c : contexts_) {
    const auto& a = c->worker().address();
    put_u32(mine, static_cast<std::uint32_t>(a.size()));
    mine.insert(mine.end(), a.begin(), a.end());
  }
  auto all = bootstrap_->allgather(mine);
  addresses_.resize(std::size_t{size_} * contexts());
  std::map<std::string, std::uint32_t> machines;
  std::map<std::string, std::uint32_t> per_machine;
  std::map<std::string, std::uint32_t> per_kernel;  // processes sharing one set of cores
  std::uint32_t core_sharers = 0, core_rank = 0;
  infos_.resize(size_);
  for (std::uint32_t r = 0; r < size_; ++r) {
    std::size_t at = 0;
    auto text = [&] {
      std::uint32_t len = get_u32(all[r], at);
      if (at + len > all[r].size()) throw Error(Errc::bootstrap, "truncated bootstrap record");
      std::string t(reinterpret_cast<const char*>(all[r].data() + at), len);
      at += len;
      return t;
    };
    const std::string host_name = text();
    const std::string kernel_of = text();
    if (r == rank_) core_rank = per_kernel[kernel_of];
    ++per_kernel[kernel_of];
    std::uint32_t t = get_u32(all[r], at);
    std::uint32_t h = get_u32(all[r], at);
    if (t != threads_ || h != helpers_)
      throw Error(Errc::invalid_argument, "process " + std::to_string(r) + " runs " + std::to_string(t) + " worker and " +
                                              std::to_string(h) + " helper threads but process " + std::to_string(rank_) +
                                              " runs " + std::to_string(threads_) + " and " + std::to_string(helpers_) +
                                              ": every process needs the same counts");
    pids_.push_back(get_u32(all[r], at));
    for (std::uint32_t s = 0; s < contexts(); ++s) {
      std::uint32_t len = get_u32(all[r], at);
      if (at + len > all[r].size()) throw Error(Errc::bootstrap, "truncated bootstrap record");
      addresses_[std::size_t{r} * contexts() + s].assign(all[r].begin() + at, all[r].begin() + at + len);
      at += len;
    }
    auto [it, fresh] = machines.try_emplace(host_name, static_cast<std::uint32_t>(machines.size()));
    infos_[r] = ProcessInfo{r, it->second, per_machine[host_name]++, 0, host_name};
  }
  std::uint32_t most = 0;
  for (auto& info : infos_) {
    info.local_processes = per_machine[info.hostname];
    most = std::max(most, info.local_processes);
  }
  layout_ = Layout{static_cast<std::uint32_t>(machines.size()), most, threads_};
  if (requested && (requested->machines != layout_.machines || requested->processes_per_machine != layout_.processes_per_machine))
    throw Error(Errc::invalid_argument, "layout " + requested->to_string() + " was requested but the launcher started " +
                                            layout_.to_string() + " (machines x processes per machine x threads)");

  // Pinning: only when every thread of the machine gets a core of its own.
  const std::string pin_mode = pin_text.value_or("auto");
  if (pin_mode != "auto" && pin_mode != "on" && pin_mode != "off")
    throw Error(Errc::invalid_argument, "RDMX_PIN='" + pin_mode + "' must be auto, on or off");
  const long cores = sysconf(_SC_NPROCESSORS_ONLN);
  core_sharers = per_kernel[kernel];
  const long wanted = static_cast<long>(core_sharers) * workers();  // helpers poll too
  pin_ = pin_mode == "on" || (pin_mode == "auto" && wanted <= cores);
  oversubscribed_ = wanted > cores;
  spare_cores_ = static_cast<std::uint32_t>(std::max(0L, cores - wanted));
  // Progress: threads that share cores yield soon, so that the thread with
  // work gets the core (a spinning waiter would hold it for its time slice).
  const std::string progress_mode = setting("RDMX_PROGRESS").value_or("auto");  // checked: one of the choices
  Backoff::set_mode(progress_mode == "spin" ? Progress::spin : progress_mode == "block" ? Progress::block : Progress::yield);
  const unsigned spins = progress_mode == "auto" && oversubscribed_ ? Backoff::shared_core_spins : Backoff::default_spins;
  Backoff::set_idle_spins(static_cast<unsigned>(table.given_number("RDMX_IDLE_SPINS").value_or(spins)));  // < 2^32
  check_access_ = table.flag("RDMX_CHECK_ACCESS");
  pin_reason_ = pin_ ? "pinned" : (pin_mode == "off" ? "not pinned (RDMX_PIN=off)"
                                                   : "not pinned (" + std::to_string(wanted) + " threads on " +
                                                         std::to_string(cores) + " cores)");

  // Placement: the k-th process of a kernel takes cores [k*t, (k+1)*t) in
  // hwloc's order, which keeps a process's threads in one NUMA zone when they
  // fit. Each thread's core and zone are worked out once, here.
  thread_numa_.assign(workers(), -1);
  if (pin_) {
    hwloc_topology_t topo;
    if (hwloc_topology_init(&topo) == 0) {
      if (hwloc_topology_load(topo) == 0) {
        const int cores = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_CORE);
        const bool zones = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_NUMANODE) > 1;
        for (std::uint32_t s = 0; s < workers() && cores > 0; ++s) {
          hwloc_obj_t core = hwloc_get_obj_by_type(topo, HWLOC_OBJ_CORE, (core_rank * workers() + s) % cores);
          std::vector<int> cpus;
          for (int cpu = hwloc_bitmap_first(core->cpuset); cpu >= 0; cpu = hwloc_bitmap_next(core->cpuset, cpu)) cpus.push_back(cpu);
          thread_cpus_.push_back(std::move(cpus));
          if (zones) {
            hwloc_nodeset_t nodes = hwloc_bitmap_alloc();
            hwloc_cpuset_to_nodeset(topo, core->cpuset, nodes);
            thread_numa_[s] = hwloc_bitmap_first(nodes);
            hwloc_bitmap_free(nodes);
          }
        }
      }
      hwloc_topology_destroy(topo);
    }
  }

  if (const std::string conflicts = registry_conflicts(); !conflicts.empty())
    throw Error(Errc::invalid_argument, conflicts.substr(0, conflicts.size() - 1));

  serve_idle_ = table.flag("RDMX_SERVE_IDLE");
  on_thread_exception_ = options.on_thread_exception;
  if (bootstrap_->launcher() != "none") launcher_pid_ = getppid();
  if (options.eager_endpoints.value_or(table.flag("RDMX_EAGER_ENDPOINTS")))
    for (auto& c : contexts_)
      for (std::uint32_t p = 0; p < size_; ++p)
        for (std::uint32_t s = 0; s < contexts(); ++s) c->endpoint(p, s);
  for (const env::Table* t : env::tables())
    for (const env::Variable& v : t->variables()) {
      const auto option = given.find(v.name);
      const auto text = option != given.end() ? std::optional<std::string>(option->second) : env::get(v.name);
      if (!text) continue;
      given_settings_ += std::string(given_settings_.empty() ? "" : ", ") + v.name + "=" + *text +
                         (option != given.end() ? std::string(" (--rdmx-") + v.option + ")" : "");
    }
}

std::string Runtime::describe() const {
  const char* tls = std::getenv("UCX_TLS");
  return "rdmx job: layout " + layout_.to_string() + " (" + std::to_string(size_) + (size_ == 1 ? " process" : " processes") +
         ", launcher " + bootstrap_->launcher() + "), UCX_TLS=" + (tls != nullptr ? tls : "(UCX default)") +
         (helpers_ != 0 ? ", " + std::to_string(helpers_) + " helper threads per process" : "") + ", threads " +
         pin_reason_ + ", progress " + to_string(Backoff::mode()) + " after " + std::to_string(Backoff::idle_spins()) +
         " idle polls";
}

Runtime* Runtime::current_ = nullptr;

Runtime& Runtime::current() {
  if (current_ == nullptr) throw Error(Errc::invalid_argument, "no rdmx::Job exists in this process (create one in main)");
  return *current_;
}

void Runtime::start() {
  // Once per job: what was chosen, and the settings given and where.
  if (rank_ == 0 && log_enabled(LogLevel::info))
    rdmx::log(LogLevel::info, "%s; settings given: %s\n", describe().c_str(),
              given_settings_.empty() ? "none" : given_settings_.c_str());
  collectives_ = std::make_unique<detail::Collectives>(threads_);
  job_collectives_ = std::make_unique<detail::JobCollectives>(size_);
  current_ = this;
  rdmx::detail::set_job_leaver([] { current().shutdown(); });
  // Only once the Job is published: service calls use Job::current().
  service_thread_ = std::thread([this] { service_loop(); });
  for (std::uint32_t h = 0; h < helpers_; ++h) helper_threads_.emplace_back([this, h] { helper_loop(threads_ + h); });
}

std::span<const std::byte> Runtime::worker_address(std::uint32_t process, std::uint32_t worker) const {
  return addresses_.at(std::size_t{process} * contexts() + worker);
}

void Runtime::validate(ThreadId id) const {
  if (id.process >= size_)
    throw Error(Errc::no_such_destination, "process " + std::to_string(id.process) + " does not exist (the job has " +
                                               std::to_string(size_) + ")");
  if (!id.is_service() && id.thread >= workers())
    throw Error(Errc::no_such_destination, "thread " + std::to_string(id.thread) + " does not exist (processes run " +
                                               std::to_string(threads_) + " worker threads" +
                                               (helpers_ != 0 ? " and " + std::to_string(helpers_) + " helper threads)" : ")"));
}

ThreadContext& Runtime::calling_context() {
  if (current_context != nullptr) return *current_context;
  return service();  // short-lived threads send through the shared service worker
}

int Runtime::numa_node_of(std::uint32_t thread) const {
  return thread < workers() ? thread_numa_[thread] : -1;
}

void Runtime::remember_allocation(const memory::Block& block) {
  std::lock_guard lock(arenas_mutex_);
  allocations_[{block.region, block.offset}] = block;
}

void Runtime::remember_grant(const RemoteLocator& where) {
  if (!check_access_) return;
  std::lock_guard lock(arenas_mutex_);
  auto& length = grants_[{where.region, where.offset}];
  length = std::max<std::uint64_t>(length, where.length);
}

bool Runtime::access_allowed(std::uint32_t region, std::uint64_t offset, std::uint64_t length) const {
  std::lock_guard lock(arenas_mutex_);
  // The piece that starts last at or before `offset`, in either table.
  auto inside = [&](std::uint64_t start, std::uint64_t size) {
    return offset >= start && offset - start <= size && length <= size - (offset - start);
  };
  if (auto it = allocations_.upper_bound({region, offset}); it != allocations_.begin()) {
    --it;
    if (it->first.first == region && inside(it->first.second, it->second.size)) return true;
  }
  for (auto it = grants_.upper_bound({region, offset}); it != grants_.begin();) {
    --it;
    if (it->first.first != region) break;
    if (inside(it->first.second, it->second)) return true;  // grants may overlap: look further back
  }
  return false;
}

bool Runtime::forget_allocation(const RemoteLocator& where) {
  memory::Block block;
  {
    std::lock_guard lock(arenas_mutex_);
    auto it = allocations_.find({where.region, where.offset});
    if (it == allocations_.end()) return false;
    block = it->second;
    allocations_.erase(it);
  }
  for (auto& [node, arena] : arenas_) {
    try {
      arena->release_chunk(block);
      return true;
    } catch (const Error&) {
      // not this arena's chunk
    }
  }
  return false;
}

void Runtime::report_dropped(const CallHeader& header, const std::string& why) {
  rdmx::log(rdmx::LogLevel::error, "process %u dropped a call from %u/%u: %s\n", rank_, header.source_process,
               header.source_thread, why.c_str());
}

void Runtime::report_transports(std::uint32_t process, const transfer::Endpoint& endpoint) {
  if (process == rank_ || !log_enabled(LogLevel::info) || transports_reported_[process].exchange(true)) return;
  const std::string where = same_host(process) ? "same host" : "host " + hostname_of(process);
  rdmx::log(LogLevel::info, "process %u -> process %u (%s): %s\n", rank_, process, where.c_str(),
            endpoint.transports().c_str());
}

void Runtime::bind_current_thread(std::uint32_t worker) {
  if (current_context == &context(worker)) return;
  if (current_context != nullptr) unbind_current_thread();
  context(worker).driver.lock();
  set_current_context(&context(worker));
  std::string name = worker == workers()  ? "rdmx-service"
                     : worker >= threads_ ? "rdmx-h" + std::to_string(worker - threads_)
                                        : "rdmx-w" + std::to_string(worker);
  pthread_setname_np(pthread_self(), name.substr(0, 15).c_str());
  if (!pin_ || worker >= thread_cpus_.size()) return;
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int cpu : thread_cpus_[worker]) CPU_SET(cpu, &set);
  pthread_setaffinity_np(pthread_self(), sizeof set, &set);
}

void Runtime::unbind_current_thread() {
  if (current_context == nullptr) return;
  ThreadContext* ctx = current_context;
  set_current_context(nullptr);
  ctx->driver.unlock();
}

void Runtime::barrier() { job_collectives_->enter(*this, detail::JobCollectives::Kind::barrier, {}); }

std::vector<std::vector<std::byte>> Runtime::allgather(std::span<const std::byte> mine) {
  return job_collectives_->enter(*this, detail::JobCollectives::Kind::allgather, mine);
}

}  // namespace rdmx::fabric
