#include "layer.hpp"

#include <thread>

#include "rdmx/core/backoff.hpp"
#include "rdmx/core/error.hpp"
#include "rdmx/core/log.hpp"
#include "rdmx/fabric/call.hpp"
#include "rdmx/fabric/job.hpp"
#include "runtime.hpp"

namespace rdmx::far::detail {
namespace {

// The runtime of a Manager made where the process has no Job.
std::atomic<Runtime*> in_process{nullptr};

[[noreturn]] void throw_one_already() {
  throw Error(Errc::invalid_argument, "far: this process already has a far::Manager");
}

// Off the hot path: the calling thread acts as no worker, or its worker's
// word is not set yet.
Runtime& runtime_of_job() {
  if (Job* job = job_if_any()) {
    FarLayer& layer = fabric::layer<FarLayer>(*job);
    if (void** word = fabric::acting_word<FarLayer>()) *word = &layer;
    if (Runtime* r = layer.runtime()) return *r;
  }
  throw Error(Errc::invalid_argument, "far: no far::Manager exists in this process (construct one first)");
}

}  // namespace

FarLayer::FarLayer(Job& job) : job_(job), done_(std::make_unique<std::atomic<std::uint64_t>[]>(job.size())) {}

FarLayer::~FarLayer() {
  if (Runtime* r = runtime_.load()) r->layer.store(nullptr);
}

void FarLayer::attach(Runtime& runtime) {
  Runtime* expected = nullptr;
  if (!runtime_.compare_exchange_strong(expected, &runtime)) throw_one_already();
  runtime.layer.store(this);
}

// A hook counts itself before it reads the runtime, and detach clears the
// runtime before it reads the count (both sequentially consistent): either
// the hook sees no runtime, or detach waits for it.
void FarLayer::detach(Runtime& runtime) noexcept {
  Runtime* expected = &runtime;
  runtime_.compare_exchange_strong(expected, nullptr, std::memory_order_seq_cst);
  while (hooks_running_.load(std::memory_order_seq_cst) != 0) std::this_thread::yield();
}

template <class F>
void FarLayer::with_runtime(F&& f) {
  hooks_running_.fetch_add(1, std::memory_order_seq_cst);
  struct Done {
    std::atomic<std::uint32_t>& running;
    ~Done() { running.fetch_sub(1, std::memory_order_release); }
  } done{hooks_running_};
  if (Runtime* r = runtime_.load(std::memory_order_seq_cst)) f(*r);
}

void FarLayer::quiet(std::uint32_t) {
  with_runtime([](Runtime& r) { r.cache().quiet([] { rdmx::progress(); }); });
}

void FarLayer::process_failed(std::uint32_t process, const std::string&) {
  with_runtime([&](Runtime& r) { r.process_failed(process); });
}

void FarLayer::leaving() {
  with_runtime([&](Runtime& r) {
    rdmx::log(LogLevel::warn,
              "far: process %u leaves the job with its far::Manager alive (end the Manager before its Job): its "
              "servers stop waiting for it, and its objects are gone with the job",
              job_.rank());
    r.cache().evacuator().stop();
  });
}

void FarLayer::end_manager(std::uint64_t manager, std::span<const std::uint32_t> servers, bool serving) {
  const std::uint32_t me = job_.rank();
  for (const std::uint32_t server : servers) {
    if (server == me || job_.process_failed(server)) continue;
    try {
      // Consumed, not only sent: a server that fails meanwhile is known
      // here, and nothing is left for ~Job to deliver.
      Synchronizer sync;
      call(ThreadId{server, service_thread}, [me, manager] { fabric::layer<FarLayer>().peer_done(me, manager); }, when_run(sync));
      sync.wait();
    } catch (const Error& e) {
      // A dead server waits for nobody; any other failure leaves this
      // server waiting for this process's failure, so say so.
      if (e.code() != Errc::peer_failed)
        rdmx::log(LogLevel::warn, "far: process %u could not tell server process %u that it is done with its region: %s", me, server,
                  e.what());
    }
  }
  if (!serving) return;
  // A process that left the job without ending its Manager never says it
  // is done; it runs none of its program any more, so it is done.
  const auto done = [&](std::uint32_t p) { return done_[p].load(std::memory_order_acquire) >= manager; };
  const auto waiting_for = [&](std::uint32_t p) {
    return p != me && !done(p) && !job_.process_failed(p) && !job_.process_left(p);
  };
  Backoff backoff;
  for (std::uint32_t p = 0; p < job_.size(); ++p)
    while (waiting_for(p)) backoff(fabric::serve_while_waiting(job_) != 0);
  std::string failed, left;
  for (std::uint32_t p = 0; p < job_.size(); ++p) {
    if (p == me || done(p)) continue;
    std::string& list = job_.process_failed(p) ? failed : left;
    list += (list.empty() ? "" : ", ") + std::to_string(p);
  }
  if (!failed.empty())
    rdmx::log(LogLevel::warn, "far: process %u stops serving its far-memory region: process(es) %s failed before they were done with it",
              me, failed.c_str());
  if (!left.empty())
    rdmx::log(LogLevel::warn,
              "far: process %u stops serving its far-memory region: process(es) %s left the job without ending their "
              "far::Manager (a Manager must end before its Job)",
              me, left.c_str());
}

void FarLayer::peer_done(std::uint32_t process, std::uint64_t manager) noexcept {
  // A process's notes come in order: it waits for each to be consumed,
  // and makes its next Manager after that.
  if (process < job_.size()) done_[process].store(manager, std::memory_order_release);
}

void Runtime::process_failed(std::uint32_t process) noexcept {
  // An in-process device's servers are no processes of the job.
  if (job_ == nullptr) return;
  for (std::size_t s = 0; s < config_.servers.size(); ++s)
    if (config_.servers[s] == process) lost_[s].store(true, std::memory_order_release);
  device_->process_failed(process);
}

Job* job_if_any() noexcept {
  try {
    return &Job::current();
  } catch (const Error&) {
    return nullptr;
  }
}

void check_no_runtime(Job* job) {
  if (in_process.load() != nullptr || (job != nullptr && fabric::layer<FarLayer>(*job).runtime() != nullptr)) throw_one_already();
}

void attach(Runtime& runtime, Job* job) {
  if (job != nullptr) return fabric::layer<FarLayer>(*job).attach(runtime);
  Runtime* expected = nullptr;
  if (!in_process.compare_exchange_strong(expected, &runtime)) throw_one_already();
}

void detach(Runtime& runtime) noexcept {
  if (FarLayer* layer = runtime.layer.load()) return layer->detach(runtime);
  Runtime* expected = &runtime;
  in_process.compare_exchange_strong(expected, nullptr);
}

// The hot path of every scope, allocation and free: a worker thread finds
// its worker's word set after its first lookup.
Runtime& runtime() {
  if (void** word = fabric::acting_word<FarLayer>(); word != nullptr && *word != nullptr) [[likely]] {
    if (Runtime* r = static_cast<FarLayer*>(*word)->runtime()) [[likely]]
      return *r;
  }
  if (Runtime* r = in_process.load(std::memory_order_acquire)) return *r;
  return runtime_of_job();
}

}  // namespace rdmx::far::detail
