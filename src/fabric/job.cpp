#include "rdmx/core/log.hpp"
#include "rdmx/fabric/job.hpp"

#include <hwloc.h>
#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>
#include <utility>

#include "rdmx/core/env.hpp"
#include "rdmx/fabric/call.hpp"
#include "rdmx/transfer/status.hpp"
#include "rdmx/core/backoff.hpp"
#include "runtime.hpp"

namespace rdmx {
namespace fabric {
thread_local ThreadContext* current_context = nullptr;
}  // namespace fabric
namespace fabric {
thread_local ThreadContext* stand_in_home = nullptr;
}
using fabric::current_context;
namespace {

Job* current_job = nullptr;

std::string describe_exception(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& x) {
    return x.what();
  } catch (...) {
    return "an exception not derived from std::exception";
  }
}

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

}  // namespace

std::string to_string(const ThreadId& id) {
  return std::to_string(id.process) + "/" + (id.is_service() ? std::string("service") : std::to_string(id.thread));
}

Layout Layout::parse(const std::string& text, const char* what) {
  Layout l;
  unsigned m = 0, p = 0, t = 0;
  char x1 = 0, x2 = 0;
  int consumed = 0;
  if (std::sscanf(text.c_str(), "%u%c%u%c%u%n", &m, &x1, &p, &x2, &t, &consumed) != 5 || consumed != static_cast<int>(text.size()) ||
      (x1 != 'x' && x1 != 'X') || (x2 != 'x' && x2 != 'X') || m == 0 || p == 0 || t == 0)
    throw Error(Errc::invalid_argument, std::string(what) + "='" + text + "' is not a layout MxPxT (e.g. 1x2x4)");
  l.machines = m;
  l.processes_per_machine = p;
  l.threads_per_process = t;
  return l;
}

std::string Layout::to_string() const {
  return std::to_string(machines) + "x" + std::to_string(processes_per_machine) + "x" + std::to_string(threads_per_process);
}

namespace fabric {

// ---- ThreadContext ----

ThreadContext::ThreadContext(Runtime& runtime, std::uint32_t slot, transfer::Worker::Sharing sharing)
    : runtime_(runtime),
      id_{runtime.rank(), slot == runtime.workers() ? service_thread : slot},
      shared_(sharing == transfer::Worker::Sharing::shared),
      worker_(runtime.context(), sharing) {
  for (auto [id, handler] : {std::pair{am_call, &ThreadContext::on_call}, std::pair{am_reply, &ThreadContext::on_reply}}) {
    ucp_am_handler_param_t p{};
    p.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB | UCP_AM_HANDLER_PARAM_FIELD_ARG |
                   UCP_AM_HANDLER_PARAM_FIELD_FLAGS;
    p.id = id;
    p.cb = handler;
    p.arg = this;
    p.flags = UCP_AM_FLAG_PERSISTENT_DATA;
    transfer::check(ucp_worker_set_am_recv_handler(worker_.get(), &p), "ucp_worker_set_am_recv_handler");
  }
}

ThreadContext::~ThreadContext() {
  for (auto& r : ready_)
    if (r.ucx_data != nullptr) ucp_am_data_release(worker_.get(), r.ucx_data);
  ready_.clear();
  transmitters_.clear();
  endpoints_.clear();
}

transfer::Endpoint& ThreadContext::endpoint(std::uint32_t process, std::uint32_t slot) {
  if (runtime_.process_failed(process))
    throw Error(Errc::peer_failed, "process " + std::to_string(process) + " has failed");
  std::size_t index = std::size_t{process} * runtime_.slots() + slot;
  if (endpoint_index_.empty()) {
    std::lock_guard lock(endpoints_mutex_);
    if (endpoint_index_.empty()) {
      std::vector<std::atomic<transfer::Endpoint*>> fresh(std::size_t{runtime_.size()} * runtime_.slots());
      endpoint_index_.swap(fresh);
    }
  }
  transfer::Endpoint* ep = endpoint_index_[index].load(std::memory_order_acquire);
  if (ep == nullptr) {
    std::lock_guard lock(endpoints_mutex_);
    ep = endpoint_index_[index].load(std::memory_order_acquire);
    if (ep == nullptr) {
      ThreadId peer{process, slot == runtime_.workers() ? service_thread : slot};
      std::unique_ptr<transfer::Endpoint> owned;
      try {
        owned = std::make_unique<transfer::Endpoint>(worker_, runtime_.worker_address(process, slot),
                                                     "thread " + rdmx::to_string(peer));
      } catch (const Error& e) {
        // Over shared memory, connecting to a process that died fails in
        // UCX (its segments are gone): that is the peer's failure.
        if (!runtime_.gone(process)) throw;
        throw Error(Errc::peer_failed, "cannot reach thread " + rdmx::to_string(peer) + ": " + runtime_.failure_of(process));
      }
      Runtime* rt = &runtime_;
      owned->on_failure([rt, process](ucs_status_t status) {
        rt->peer_failed(process, "process " + std::to_string(process) + " failed: " + ucs_status_string(status));
      });
      ep = owned.get();
      endpoints_.push_back(std::move(owned));
      endpoint_index_[index].store(ep, std::memory_order_release);
    }
  }
  ep->check_alive();
  return *ep;
}

std::vector<ThreadId> ThreadContext::contacted_workers() const {
  std::vector<ThreadId> out;
  const std::uint32_t slots = runtime_.slots();
  std::lock_guard lock(endpoints_mutex_);
  for (std::size_t i = 0; i < endpoint_index_.size(); ++i)
    if (i % slots < runtime_.threads() && endpoint_index_[i].load(std::memory_order_acquire) != nullptr)
      out.push_back(ThreadId{static_cast<std::uint32_t>(i / slots), static_cast<std::uint32_t>(i % slots)});
  return out;
}

transfer::Transmitter& ThreadContext::transmitter(std::uint32_t process) {
  transfer::Endpoint& ep = endpoint(process, runtime_.workers());  // one-sided traffic targets the service worker
  std::lock_guard lock(endpoints_mutex_);
  if (transmitters_.size() < runtime_.size()) transmitters_.resize(runtime_.size());
  auto& tx = transmitters_[process];
  if (!tx) {
    // Waiting drives this context: the owning thread progresses it itself;
    // a short-lived thread using the shared service context wakes the
    // service thread instead (only it may run this worker's callbacks).
    ProgressHook hook{[](void* self) {
      auto* ctx = static_cast<ThreadContext*>(self);
      if (current_context == ctx) return ctx->poll(nullptr);
      ctx->worker().signal();
      std::this_thread::yield();
      return false;
    }, this};
    tx = std::make_unique<transfer::Transmitter>(ep, 0, hook);
  }
  return *tx;
}

void ThreadContext::flush(const std::function<void()>& also) {
  // Flush what is still outgoing so nothing sent before teardown is lost.
  // Endpoint by endpoint: a worker-wide flush can end as soon as one
  // endpoint has failed (a dead peer), leaving what is queued towards live
  // peers behind (a reply, say, which its caller then never gets).
  ucp_request_param_t param{};
  std::vector<void*> requests;
  {
    std::lock_guard lock(endpoints_mutex_);
    for (auto& ep : endpoints_) {
      if (!ep || ep->failed()) continue;
      void* request = ucp_ep_flush_nbx(ep->get(), &param);
      if (UCS_PTR_IS_PTR(request)) requests.push_back(request);
    }
  }
  auto busy = [&] {
    for (void* r : requests)
      if (ucp_request_check_status(r) == UCS_INPROGRESS) return true;
    return false;
  };
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (busy() && std::chrono::steady_clock::now() < deadline) {
    poll(nullptr);
    if (also) also();
  }
  std::size_t unfinished = 0;
  for (void* r : requests) {
    if (ucp_request_check_status(r) != UCS_INPROGRESS)
      ucp_request_free(r);
    else
      ++unfinished;
  }
  if (unfinished != 0)
    rdmx::log(rdmx::LogLevel::warn, "%s: gave up flushing %zu endpoints after 5 s\n", rdmx::to_string(id_).c_str(), unfinished);
}

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
  const auto given = env::take_options(args);
  env::check_environment();
  auto setting = [&](const char* name) -> std::optional<std::string> {
    if (auto it = given.find(name); it != given.end()) return it->second;
    return env::get(name);
  };
  auto number = [](const char* name, const std::string& text) {  // already checked: fits its range
    return static_cast<std::uint32_t>(env::parse(*env::find(name), text, name));
  };
  auto layout_text = setting("RDMX_LAYOUT");
  auto threads_text = setting("RDMX_THREADS");
  auto helpers_text = setting("RDMX_HELPERS");
  auto pin_text = given.count("RDMX_PIN") ? setting("RDMX_PIN") : options.pin ? options.pin : env::get("RDMX_PIN");
  threads_ = options.threads;
  std::optional<Layout> requested;
  if (layout_text) requested = Layout::parse(*layout_text, "RDMX_LAYOUT / --rdmx-layout");
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
  max_message_ = options.max_message != 0 ? options.max_message : env::get_size("RDMX_MAX_MESSAGE", 1ull << 30);

  bootstrap_ = Bootstrap::create();
  rank_ = bootstrap_->rank();
  size_ = bootstrap_->size();
  failed_ = std::make_unique<std::atomic<bool>[]>(size_);
  survivor_flushed_ = std::make_unique<std::atomic<std::uint64_t>[]>(size_);
  survivor_voted_ = std::make_unique<std::atomic<std::uint64_t>[]>(size_);

  for (std::uint32_t slot = 0; slot < workers(); ++slot)
    contexts_.push_back(std::make_unique<ThreadContext>(*this, slot, transfer::Worker::Sharing::single_thread));
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
  put_u32(mine, static_cast<std::uint32_t>(hostname.size()));
  mine.insert(mine.end(), reinterpret_cast<const std::byte*>(hostname.data()),
              reinterpret_cast<const std::byte*>(hostname.data()) + hostname.size());
  put_u32(mine, threads_);
  put_u32(mine, helpers_);
  put_u32(mine, static_cast<std::uint32_t>(getpid()));
  for (auto& c : contexts_) {
    const auto& a = c->worker().address();
    put_u32(mine, static_cast<std::uint32_t>(a.size()));
    mine.insert(mine.end(), a.begin(), a.end());
  }
  auto all = bootstrap_->allgather(mine);
  addresses_.resize(std::size_t{size_} * slots());
  std::map<std::string, std::uint32_t> machines;
  std::map<std::string, std::uint32_t> per_machine;
  infos.resize(size_);
  for (std::uint32_t r = 0; r < size_; ++r) {
    std::size_t at = 0;
    std::uint32_t hl = get_u32(all[r], at);
    if (at + hl > all[r].size()) throw Error(Errc::bootstrap, "truncated bootstrap record");
    std::string host_name(reinterpret_cast<const char*>(all[r].data() + at), hl);
    at += hl;
    std::uint32_t t = get_u32(all[r], at);
    std::uint32_t h = get_u32(all[r], at);
    if (t != threads_ || h != helpers_)
      throw Error(Errc::invalid_argument, "process " + std::to_string(r) + " runs " + std::to_string(t) + " worker and " +
                                              std::to_string(h) + " helper threads but process " + std::to_string(rank_) +
                                              " runs " + std::to_string(threads_) + " and " + std::to_string(helpers_) +
                                              ": every process needs the same counts");
    pids_.push_back(get_u32(all[r], at));
    for (std::uint32_t s = 0; s < slots(); ++s) {
      std::uint32_t len = get_u32(all[r], at);
      if (at + len > all[r].size()) throw Error(Errc::bootstrap, "truncated bootstrap record");
      addresses_[std::size_t{r} * slots() + s].assign(all[r].begin() + at, all[r].begin() + at + len);
      at += len;
    }
    auto [it, fresh] = machines.try_emplace(host_name, static_cast<std::uint32_t>(machines.size()));
    infos[r] = ProcessInfo{r, it->second, per_machine[host_name]++, 0, host_name};
  }
  std::uint32_t most = 0;
  for (auto& info : infos) {
    info.local_processes = per_machine[info.hostname];
    most = std::max(most, info.local_processes);
  }
  layout = Layout{static_cast<std::uint32_t>(machines.size()), most, threads_};
  if (requested && (requested->machines != layout.machines || requested->processes_per_machine != layout.processes_per_machine))
    throw Error(Errc::invalid_argument, "layout " + requested->to_string() + " was requested but the launcher started " +
                                            layout.to_string() + " (machines x processes per machine x threads)");

  // Pinning: only when every thread of the machine gets a core of its own.
  const std::string pin_mode = pin_text.value_or("auto");
  if (pin_mode != "auto" && pin_mode != "on" && pin_mode != "off")
    throw Error(Errc::invalid_argument, "RDMX_PIN='" + pin_mode + "' must be auto, on or off");
  const long cores = sysconf(_SC_NPROCESSORS_ONLN);
  const long wanted = static_cast<long>(infos[rank_].local_processes) * workers();  // helpers poll too
  pin = pin_mode == "on" || (pin_mode == "auto" && wanted <= cores);
  oversubscribed_ = wanted > cores;
  // Progress: threads that share cores yield soon, so that the thread with
  // work gets the core (a spinning waiter would hold it for its time slice).
  const std::string progress_mode = setting("RDMX_PROGRESS").value_or("auto");  // checked: one of the choices
  Backoff::set_mode(progress_mode == "spin" ? Progress::spin : progress_mode == "block" ? Progress::block : Progress::yield);
  const unsigned spins = progress_mode == "auto" && oversubscribed_ ? Backoff::shared_core_spins : Backoff::default_spins;
  Backoff::set_idle_spins(static_cast<unsigned>(env::get_count("RDMX_IDLE_SPINS", spins)));  // < 2^32
  check_access_ = env::get_bool("RDMX_CHECK_ACCESS", false);
  pin_reason = pin ? "pinned" : (pin_mode == "off" ? "not pinned (RDMX_PIN=off)"
                                                   : "not pinned (" + std::to_string(wanted) + " threads on " +
                                                         std::to_string(cores) + " cores)");

  // Placement: the k-th process of a host takes cores [k*t, (k+1)*t) in
  // hwloc's order, which keeps a process's threads in one NUMA zone when they
  // fit. Each thread's core and zone are worked out once, here.
  thread_numa_.assign(workers(), -1);
  if (pin) {
    hwloc_topology_t topo;
    if (hwloc_topology_init(&topo) == 0) {
      if (hwloc_topology_load(topo) == 0) {
        const int cores = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_CORE);
        const bool zones = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_NUMANODE) > 1;
        for (std::uint32_t s = 0; s < workers() && cores > 0; ++s) {
          hwloc_obj_t core = hwloc_get_obj_by_type(topo, HWLOC_OBJ_CORE, (infos[rank_].local_rank * workers() + s) % cores);
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

  if (!FunctionRegistry::instance().conflict().empty())
    throw Error(Errc::invalid_argument, FunctionRegistry::instance().conflict());

  serve_idle_ = env::get_bool("RDMX_SERVE_IDLE", false);
  on_thread_exception_ = options.on_thread_exception;
  if (bootstrap_->launcher() != "none") launcher_pid_ = getppid();
  if (options.eager_endpoints.value_or(env::get_bool("RDMX_EAGER_ENDPOINTS", false)))
    for (auto& c : contexts_)
      for (std::uint32_t p = 0; p < size_; ++p)
        for (std::uint32_t s = 0; s < slots(); ++s) c->endpoint(p, s);
}

Runtime* Runtime::current_ = nullptr;

Runtime& Runtime::current() {
  if (current_ == nullptr) throw Error(Errc::invalid_argument, "no rdmx::Job exists in this process (create one in main)");
  return *current_;
}

void Runtime::start() {
  collectives_ = std::make_unique<detail::Collectives>(threads_);
  current_ = this;
  // Only once the Job is published: service calls use Job::current().
  service_thread_ = std::thread([this] { service_loop(); });
  for (std::uint32_t h = 0; h < helpers_; ++h) helper_threads_.emplace_back([this, h] { helper_loop(threads_ + h); });
}

void Runtime::helper_loop(std::uint32_t slot) {
  // A helper is a worker slot of its own (its UCX worker, its messengers):
  // it runs the one-sided calls of the worker threads the invoke layer gave
  // it, and answers them as itself, so it never touches their workers.
  bind_current_thread(slot);
  ThreadContext& ctx = context(slot);
  Backoff backoff;
  while (!stop_helpers_.load(std::memory_order_acquire)) {
    bool active = true;
    try {
      active = ctx.poll(nullptr);
    } catch (const std::exception& e) {  // e.g. a corrupted channel: reported, the helper goes on
      rdmx::log(rdmx::LogLevel::error, "process %u, helper thread %u: %s\n", rank_, slot - threads_, e.what());
    }
    backoff(active);
  }
  unbind_current_thread();
}

void Runtime::stop_helpers() {
  // Teardown drives the helpers' slots itself (quiesce), so what they
  // consume for the workers is still consumed.
  stop_helpers_.store(true, std::memory_order_release);
  for (auto& t : helper_threads_) t.join();
  helper_threads_.clear();
}

namespace {
// A process that exited, or is a zombie waiting to be reaped, is gone.
bool process_alive(std::uint32_t pid) {
  std::FILE* f = std::fopen(("/proc/" + std::to_string(pid) + "/stat").c_str(), "r");
  if (f == nullptr) return false;
  char state = '?';
  int matched = std::fscanf(f, "%*d (%*[^)]) %c", &state);
  std::fclose(f);
  return matched == 1 && state != 'Z' && state != 'X';
}
}  // namespace

void Runtime::drive(std::uint32_t slot, const std::function<void(ThreadContext&)>& what) {
  // Teardown acts as each worker in turn, holding its driver lock.
  std::lock_guard lock(contexts_[slot]->driver);
  set_current_context(contexts_[slot].get());
  what(*contexts_[slot]);
  set_current_context(nullptr);
}

void Runtime::flush_all(std::size_t layers) {
  for (std::uint32_t s = 0; s < workers(); ++s)
    drive(s, [&](ThreadContext& c) {
      for (std::size_t m = 0; m < layers; ++m) layer_list_[m].load()->flush(s);
      c.flush();
    });
}

bool Runtime::quiesce() {
  // Deliver what is still in flight. Each round: flush every slot's sends and
  // its layers' pending calls, wait for every process (then all of them
  // have landed), and run what arrived. Running calls may send more, so
  // rounds repeat until no process ran anything. The service thread keeps
  // serving meanwhile. A dead member would hold the launcher's fence
  // forever: give up on it as soon as any failure is known.
  auto any_failed = [this] { return any_process_failed(); };
  unbind_current_thread();
  try {
    for (int round = 0;; ++round) {
      const std::size_t layers = layer_count_.load(std::memory_order_acquire);
      flush_all(layers);
      // A launcher that tolerates failures may complete the fence without a
      // dead member, so failures are checked after it too, and while draining
      // (a worker towards a dead peer can stay busy for ever).
      // While the fence waits for slower processes, this process's workers
      // keep running what peers send them: a peer still in its program may
      // be waiting for one of those calls before it can come here at all.
      // What runs then counts for this round, as what the drain runs does.
      std::uint64_t ran = 0;
      const bool fenced = bootstrap_->barrier([&] {
        ran += serve_idle_workers();
        return any_failed();
      });
      if (!fenced || any_failed()) return quiesce_survivors();
      bool gave_up = false;
      bool unsettled = false;
      for (std::uint32_t s = 0; s < workers() && !gave_up; ++s)
        drive(s, [&](ThreadContext& c) {
          std::size_t n = 0;
          for (int idle = 0; idle < 100;) {
            if (any_failed()) {
              gave_up = true;
              return;
            }
            bool active = true;
            n = 0;
            try {
              active = c.poll(&n);
            } catch (const Error& e) {  // e.g. a corrupted channel: reported, the rest still drains
              rdmx::log(rdmx::LogLevel::warn, "teardown: %s\n", e.what());
            }
            ran += n;
            idle = active ? 0 : idle + 1;
          }
          for (std::size_t m = 0; m < layers; ++m) unsettled = unsettled || !layer_list_[m].load()->settled(s);
        });
      if (gave_up) return quiesce_survivors();
      // A call still waiting on the network (its argument read from a
      // caller) keeps every process in the rounds: the next fence progresses
      // the caller, whose worker answers the read.
      const std::byte mine[1] = {static_cast<std::byte>(ran != 0 || unsettled)};
      bool any = false;
      // Every process is in here now, so nothing waits on this exchange;
      // what arrives meanwhile is run by the next round's drain.
      std::vector<std::vector<std::byte>> votes;
      try {
        votes = bootstrap_->allgather(mine, any_failed);
      } catch (const Error&) {
        if (!any_failed()) throw;
        return quiesce_survivors();
      }
      for (const auto& v : votes) any = any || v.at(0) != std::byte{0};
      if (!any) return true;
      if (round == 1000) {
        rdmx::log(rdmx::LogLevel::warn, "teardown: calls still running after %d rounds; giving up on them\n", round);
        return true;
      }
    }
  } catch (const Error& e) {
    if (any_failed()) return quiesce_survivors();  // the launcher's collectives fail with a dead member
    rdmx::log(rdmx::LogLevel::warn, "teardown collective failed: %s\n", e.what());
  }
  return false;
}

void Runtime::survivor_note(bool vote, std::uint32_t from, std::uint64_t round, bool busy) {
  if (from >= size_) return;
  auto& mark = (vote ? survivor_voted_ : survivor_flushed_)[from];
  const std::uint64_t value = round * 2 + (busy ? 1 : 0);
  // Rounds only move forward; a late duplicate must not move one back.
  for (std::uint64_t seen = mark.load(std::memory_order_acquire); seen < value;)
    if (mark.compare_exchange_weak(seen, value, std::memory_order_acq_rel)) break;
}

bool Runtime::survivors_reach(const std::unique_ptr<std::atomic<std::uint64_t>[]>& marks, std::uint64_t round,
                              std::uint64_t& served) {
  Backoff backoff;
  for (;;) {
    bool all = true, busy = false;
    for (std::uint32_t p = 0; p < size_; ++p) {
      if (p == rank_ || process_failed(p)) continue;
      const std::uint64_t m = marks[p].load(std::memory_order_acquire);
      if (m / 2 < round) all = false;
      else if (m / 2 == round && (m & 1) != 0) busy = true;
    }
    if (all) return busy;
    // Serve meanwhile: a live peer may still be in its program, calling us.
    bool active = false;
    served += serve_idle_workers(&active);
    backoff(active);
  }
}

bool Runtime::quiesce_survivors() {
  // Each round: flush, tell every live process "flushed", wait for theirs
  // (what they sent us has landed then), drain, vote, wait for the votes.
  // The notes are send-based calls to the service threads, which keep
  // running; a process that fails meanwhile drops out of the waits.
  rdmx::log(rdmx::LogLevel::info, "process %u: leaving with the processes still alive\n", rank_);
  auto tell = [&](bool vote, std::uint64_t round, bool busy) {
    const std::uint32_t me = rank_;
    for (std::uint32_t p = 0; p < size_; ++p) {
      if (p == rank_ || process_failed(p)) continue;
      try {
        call(ThreadId{p, service_thread},
             [vote, me, round, busy] { Runtime::current().survivor_note(vote, me, round, busy); });
      } catch (const Error&) {  // it failed just now: it drops out of the waits
      }
    }
  };
  const std::size_t layers = layer_count_.load(std::memory_order_acquire);
  for (std::uint64_t round = 1; round <= 1000; ++round) {
    flush_all(layers);
    tell(false, round, false);
    std::uint64_t ran = 0;
    survivors_reach(survivor_flushed_, round, ran);  // what they sent us before their note has landed
    bool unsettled = false;
    for (std::uint32_t s = 0; s < workers(); ++s)
      drive(s, [&](ThreadContext& c) {
        // Bounded: a worker whose calls go to a dead peer may stay busy.
        for (int idle = 0, polls = 0; idle < 100 && polls < 1000000; ++polls) {
          std::size_t n = 0;
          bool active = true;
          try {
            active = c.poll(&n);
          } catch (const Error& e) {
            rdmx::log(rdmx::LogLevel::warn, "teardown: %s\n", e.what());
          }
          ran += n;
          idle = active ? 0 : idle + 1;
        }
        for (std::size_t m = 0; m < layers; ++m) unsettled = unsettled || !layer_list_[m].load()->settled(s);
      });
    // Every survivor decides from the same votes. A call whose argument is
    // still being read keeps the rounds going, for a while: one read from a
    // process that died may never settle.
    const bool mine = ran != 0 || (unsettled && round < 20);
    tell(true, round, mine);
    const bool busy = survivors_reach(survivor_voted_, round, ran) || mine;
    if (!busy) return false;
  }
  rdmx::log(rdmx::LogLevel::warn, "teardown: calls still running after 1000 rounds; giving up on them\n");
  return false;
}

void Runtime::shutdown() {
  if (shut_down_) return;
  shut_down_ = true;
  stop_helpers();
  const bool clean = quiesce();
  // Nothing is in flight any more. Peers now close their endpoints, which
  // is not a failure; and none closes before all have got here, else one
  // still waiting in the last collective would take the closing for a death.
  shutting_down_.store(true, std::memory_order_release);
  if (clean) {
    // Failures are no longer reported now, but a peer that left without this
    // barrier (it saw a failure we did not) must not hold us: look for it.
    auto next_look = std::chrono::steady_clock::now();
    bootstrap_->barrier([&] {
      if (std::chrono::steady_clock::now() < next_look) return false;
      next_look = std::chrono::steady_clock::now() + std::chrono::milliseconds(100);
      for (std::uint32_t p = 0; p < size_; ++p)
        if (p != rank_ && infos[p].hostname == infos[rank_].hostname && !process_alive(pids_[p])) return true;
      return false;
    });
  }
  if (main_affinity_saved_) pthread_setaffinity_np(pthread_self(), sizeof main_affinity_, &main_affinity_);
  stop_.store(true, std::memory_order_release);
  service().worker().signal();
  if (service_thread_.joinable()) service_thread_.join();
}

Runtime::~Runtime() {
  shutdown();
  layer_count_.store(0, std::memory_order_release);
  layers_.clear();  // before the contexts and arenas their state lives in
  contexts_.clear();
  if (current_ == this) current_ = nullptr;
}

std::span<const std::byte> Runtime::worker_address(std::uint32_t process, std::uint32_t slot) const {
  return addresses_.at(std::size_t{process} * slots() + slot);
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

void Runtime::peer_failed(std::uint32_t process, const std::string& why) {
  if (process >= size_ || shutting_down_.load(std::memory_order_acquire) || failed_[process].exchange(true)) return;
  rdmx::log(rdmx::LogLevel::warn, "process %u: %s\n", rank_, why.c_str());
  {
    std::lock_guard lock(failures_mutex_);
    failures_.resize(size_);
    failures_[process] = why;
  }
  pending_.fail_process(process, why);
  const std::size_t count = layer_count_.load(std::memory_order_acquire);
  for (std::size_t i = 0; i < count; ++i) layer_list_[i].load(std::memory_order_relaxed)->process_failed(process, why);
}

std::string Runtime::failure_of(std::uint32_t process) const {
  std::lock_guard lock(failures_mutex_);
  if (process < failures_.size() && !failures_[process].empty()) return failures_[process];
  return "process " + std::to_string(process) + " has failed";
}

bool Runtime::gone(std::uint32_t process) {
  if (process >= size_) return false;
  if (process_failed(process)) return true;
  if (process == rank_ || infos[process].hostname != infos[rank_].hostname || process_alive(pids_[process])) return false;
  peer_failed(process, "process " + std::to_string(process) + " (pid " + std::to_string(pids_[process]) + ") has exited");
  return true;
}

bool Runtime::any_process_failed() const {
  for (std::uint32_t p = 0; p < size_; ++p)
    if (process_failed(p)) return true;
  return false;
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

void Runtime::bind_current_thread(std::uint32_t slot) {
  if (current_context == &context(slot)) return;
  if (current_context != nullptr) unbind_current_thread();
  context(slot).driver.lock();
  set_current_context(&context(slot));
  std::string name = slot == workers()  ? "rdmx-service"
                     : slot >= threads_ ? "rdmx-h" + std::to_string(slot - threads_)
                                        : "rdmx-w" + std::to_string(slot);
  pthread_setname_np(pthread_self(), name.substr(0, 15).c_str());
  if (!pin || slot >= thread_cpus_.size()) return;
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int cpu : thread_cpus_[slot]) CPU_SET(cpu, &set);
  pthread_setaffinity_np(pthread_self(), sizeof set, &set);
}

void Runtime::unbind_current_thread() {
  if (current_context == nullptr) return;
  ThreadContext* ctx = current_context;
  set_current_context(nullptr);
  ctx->driver.unlock();
}

std::size_t Runtime::serve_worker(ThreadContext& ctx, bool* active) {
  // Act as the worker: its calls, one-sided ones included, run here and
  // answer as it; its retry_async queues drain; the caller's own binding is
  // restored afterwards.
  ThreadContext* const saved = current_context;
  ThreadContext* const saved_home = std::exchange(stand_in_home, saved);
  set_current_context(&ctx);
  std::size_t ran = 0;
  try {
    if (ctx.poll(&ran) && active != nullptr) *active = true;
  } catch (const std::exception& e) {  // e.g. a corrupted channel: reported, the caller goes on
    rdmx::log(rdmx::LogLevel::error, "process %u, serving thread %u: %s\n", rank_, ctx.id().thread, e.what());
  }
  stand_in_home = saved_home;
  set_current_context(saved);
  return ran;
}

std::size_t Runtime::serve_idle_workers(bool* active) {
  std::size_t ran = 0;
  for (std::uint32_t s = 0; s < workers(); ++s) {
    ThreadContext& ctx = context(s);
    if (&ctx == current_context || !ctx.driver.try_lock()) continue;
    ran += serve_worker(ctx, active);
    ctx.driver.unlock();
  }
  return ran;
}

bool Runtime::stand_in_for_idle_threads() {
  // RDMX_SERVE_IDLE: the service thread acts as every idle worker.
  // Otherwise it only receives for them (UCX must be progressed), and their
  // calls wait, in order, for their thread to come back.
  bool active = false;
  if (serve_idle_) {
    serve_idle_workers(&active);
    return active;
  }
  for (std::uint32_t s = 0; s < workers(); ++s) {
    ThreadContext& ctx = context(s);
    if (!ctx.driver.try_lock()) continue;
    while (ctx.receive_only()) active = true;
    ctx.driver.unlock();
  }
  return active;
}

void Runtime::watch_local_peers() {
  // Shared-memory transports cannot tell us a peer died (UCX 1.13); peers on
  // this host are watched through /proc instead. Remote peers are reached
  // over transports with UCX peer-failure detection.
  for (std::uint32_t p = 0; p < size_; ++p)
    if (p != rank_ && !process_failed(p) && infos[p].hostname == infos[rank_].hostname && !process_alive(pids_[p]))
      peer_failed(p, "process " + std::to_string(p) + " (pid " + std::to_string(pids_[p]) + ") has exited");
}

void Runtime::watch_launcher() {
  // The launcher is our parent: when it is killed we are re-parented. The
  // job is over then (nobody can start, bootstrap or reap its processes
  // again), and a process left spinning in a poll loop would hold a core
  // for ever: end it, whatever its threads are doing.
  if (launcher_pid_ == 0 || getppid() == launcher_pid_) return;
  rdmx::log(rdmx::LogLevel::error, "process %u: the launcher (pid %d) has gone; ending this process\n", rank_,
               static_cast<int>(launcher_pid_));
  std::fflush(stderr);
  std::_Exit(1);
}

void Runtime::service_loop() {
  bind_current_thread(workers());
  ThreadContext& ctx = service();
  int idle = 0;
  auto next_watch = std::chrono::steady_clock::now();
  while (!stop_.load(std::memory_order_acquire)) {
    if (auto now = std::chrono::steady_clock::now(); now >= next_watch) {
      watch_launcher();
      watch_local_peers();
      next_watch = now + std::chrono::milliseconds(100);
    }
    bool active = ctx.poll(nullptr);
    active = stand_in_for_idle_threads() || active;
    if (active) {
      idle = 0;
    } else if (++idle > 256) {
      // Sleep in the kernel until UCX has an event: an idle service thread
      // must not take a core from busy-polling workers. Idle workers have no
      // wake-up fd here, hence the short timeout.
      ctx.worker().wait(2);
      idle = 0;
    }
  }
  ctx.flush([this] { stand_in_for_idle_threads(); });
  unbind_current_thread();
}

}  // namespace fabric

// ---- Job ----

namespace {
std::vector<std::string> arguments(int argc, char** argv) { return std::vector<std::string>(argv, argv + argc); }
}  // namespace

Job::Job() : Job(Options{}) {}

Job::Job(Options options) {
  if (current_job != nullptr) throw Error(Errc::invalid_argument, "only one rdmx::Job may exist per process");
  std::vector<std::string> none;
  impl_.reset(new Impl{fabric::Runtime(options, none)});
  current_job = this;
  impl_->runtime.start();
  impl_->runtime.bind_current_thread(0);
}

Job::Job(int& argc, char**& argv, Options options) {
  if (current_job != nullptr) throw Error(Errc::invalid_argument, "only one rdmx::Job may exist per process");
  auto args = arguments(argc, argv);
  impl_.reset(new Impl{fabric::Runtime(options, args)});
  // Hand back argv without the --rdmx-* options (pointers into the original strings).
  int out = 0;
  for (int i = 0; i < argc; ++i) {
    std::string a = argv[i];
    if (a.rfind("--rdmx-", 0) != 0) argv[out++] = argv[i];
  }
  argv[out] = nullptr;
  argc = out;
  current_job = this;
  impl_->runtime.start();
  impl_->runtime.bind_current_thread(0);
}

Job::~Job() {
  // Teardown runs calls, and they reach the runtime through Job::current():
  // it must stay reachable until teardown has finished.
  impl_->runtime.shutdown();
  impl_.reset();
  current_job = nullptr;
}

bool Job::oversubscribed() const noexcept { return impl_->runtime.oversubscribed_; }

namespace fabric {
Runtime& runtime_of(Job& job) noexcept { return job.impl_->runtime; }
}  // namespace fabric

Job& Job::current() {
  if (current_job == nullptr) throw Error(Errc::invalid_argument, "no rdmx::Job exists in this process (create one in main)");
  return *current_job;
}

std::uint32_t Job::rank() const noexcept { return impl_->runtime.rank(); }
std::uint32_t Job::size() const noexcept { return impl_->runtime.size(); }
std::uint32_t Job::threads_per_process() const noexcept { return impl_->runtime.threads(); }
std::uint32_t Job::helpers_per_process() const noexcept { return impl_->runtime.helpers(); }
const ProcessInfo& Job::process_info(std::uint32_t rank) const { return impl_->runtime.infos.at(rank); }
Layout Job::layout() const { return impl_->runtime.layout; }
int Job::numa_zone(std::uint32_t thread) const {
  impl_->runtime.validate(ThreadId{rank(), thread});
  return impl_->runtime.numa_node_of(thread);
}
std::string Job::launcher() const { return impl_->runtime.bootstrap().launcher(); }

std::string Job::describe() const {
  auto& rt = impl_->runtime;
  const char* tls = std::getenv("UCX_TLS");
  return "rdmx job: layout " + rt.layout.to_string() + " (" + std::to_string(size()) + (size() == 1 ? " process" : " processes") + ", launcher " +
         launcher() + "), UCX_TLS=" + (tls != nullptr ? tls : "(UCX default)") +
         (rt.helpers() != 0 ? ", " + std::to_string(rt.helpers()) + " helper threads per process" : "") + ", threads " +
         rt.pin_reason + ", progress " + to_string(Backoff::mode()) + " after " + std::to_string(Backoff::idle_spins()) +
         " idle polls";
}

void Job::run(const std::function<void(ThreadId)>& fn) {
  auto& rt = impl_->runtime;
  std::vector<std::thread> threads;
  std::exception_ptr first_error;
  std::mutex error_mutex;
  std::atomic<std::uint32_t> finished{0};
  auto body = [&](std::uint32_t slot) {
    rt.bind_current_thread(slot);
    try {
      fn(ThreadId{rank(), slot});
    } catch (...) {
      const std::string what = describe_exception(std::current_exception());
      rdmx::log(rdmx::LogLevel::error, "process %u, thread %u: exception escaped Job::run: %s\n", rank(), slot, what.c_str());
      if (rt.on_thread_exception() == ThreadException::end_process) {
        rdmx::log(rdmx::LogLevel::error, "process %u: ending the process (JobOptions::on_thread_exception)\n", rank());
        std::fflush(stderr);
        std::_Exit(1);
      }
      std::lock_guard lock(error_mutex);
      if (!first_error) first_error = std::current_exception();
    }
    // Done, but the other threads of this process and its peers may still
    // call this thread and wait for it: keep serving until all are done.
    finished.fetch_add(1, std::memory_order_acq_rel);
    Backoff backoff;
    while (finished.load(std::memory_order_acquire) < rt.threads()) {
      std::size_t ran = 0;
      try {
        ran = progress();
      } catch (const std::exception& e) {  // e.g. a corrupted channel: reported, serving goes on
        rdmx::log(rdmx::LogLevel::error, "process %u, thread %u: %s\n", rank(), slot, e.what());
      }
      backoff(ran != 0);
    }
  };
  for (std::uint32_t slot = 1; slot < rt.threads(); ++slot)
    threads.emplace_back([&, slot] {
      body(slot);
      // Calls that arrive later wait for the next Job::run, or are run by
      // waits outside it (collectives, teardown): serve_idle_workers.
      rt.unbind_current_thread();
    });
  body(0);
  for (auto& t : threads) t.join();
  if (first_error) std::rethrow_exception(first_error);
}

void Job::barrier() {
  // Built from calls rather than the launcher's fence so that waiting keeps
  // serving calls: a peer blocked on a call to us must not deadlock. Process
  // 0's service thread counts arrivals and releases everyone.
  auto& rt = impl_->runtime;
  const std::uint64_t epoch = ++rt.barrier_epoch;
  call(ThreadId{0, service_thread}, [epoch] {
    auto& r = fabric::Runtime::current();
    if (r.barrier_arrived.fetch_add(1, std::memory_order_acq_rel) + 1 == epoch * r.size())
      for (std::uint32_t p = 0; p < r.size(); ++p)
        call(ThreadId{p, service_thread}, [epoch] {
          fabric::Runtime::current().barrier_released.store(epoch, std::memory_order_release);
        });
  });
  Backoff backoff;
  while (rt.barrier_released.load(std::memory_order_acquire) < epoch) {
    for (std::uint32_t p = 0; p < rt.size(); ++p)
      if (rt.process_failed(p)) throw Error(Errc::peer_failed, "barrier: process " + std::to_string(p) + " has failed");
    // Peers may be waiting on this process's other threads, which have left Job::run.
    backoff(progress() + rt.serve_idle_workers() != 0);
  }
}

std::vector<std::vector<std::byte>> Job::allgather(std::span<const std::byte> mine) {
  // Serve calls while the launcher gathers: a peer may be waiting on us.
  auto& rt = impl_->runtime;
  return rt.bootstrap().allgather(mine, [&rt] {
    progress();
    rt.serve_idle_workers();
    return rt.any_process_failed();
  });
}

transfer::Context& Job::context() { return impl_->runtime.context(); }

memory::Arena& Job::arena() {
  auto& rt = impl_->runtime;
  ThreadId me = current_context != nullptr ? current_context->id() : ThreadId{rank(), service_thread};
  return rt.arena_for(rt.numa_node_of(me.thread));
}

ThreadId this_thread() {
  if (current_context == nullptr)
    throw Error(Errc::invalid_argument, "this thread is not an rdmx worker thread (start it with Job::run)");
  return current_context->id();
}

std::size_t progress() {
  if (current_context == nullptr) return 0;
  return current_context->progress();
}

}  // namespace rdmx
