// rdmx::Job: the facade over the fabric's Runtime.
#include "rdmx/fabric/job.hpp"

#include <cstdio>
#include <exception>
#include <string>
#include <thread>
#include <vector>

#include "rdmx/core/backoff.hpp"
#include "rdmx/core/error.hpp"
#include "rdmx/core/log.hpp"
#include "rdmx/fabric/call.hpp"
#include "collectives.hpp"
#include "runtime.hpp"

namespace rdmx {
using fabric::current_context;

// The Runtime behind the Job, private to this file: job.hpp names only Impl.
struct Job::Impl {
  fabric::Runtime runtime;
};

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

}  // namespace

// ---- Job ----

namespace {
std::vector<std::string> arguments(int argc, char** argv) { return std::vector<std::string>(argv, argv + argc); }
}  // namespace

Job::Job() : Job(Options{}) {}

Job::Job(Options options) {
  if (current_job != nullptr) throw Error(Errc::invalid_argument, "only one rdmx::Job may exist per process");
  std::vector<std::string> none;
  impl_.reset(new Impl{fabric::Runtime(options, none)});
  size_ = impl_->runtime.size();
  failed_ = impl_->runtime.failure_flags();
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
  size_ = impl_->runtime.size();
  failed_ = impl_->runtime.failure_flags();
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

bool Job::oversubscribed() const noexcept { return impl_->runtime.oversubscribed(); }
std::uint32_t Job::spare_cores() const noexcept { return impl_->runtime.spare_cores(); }

namespace fabric {
Runtime& runtime_of(Job& job) noexcept { return job.impl_->runtime; }
}  // namespace fabric

Job& Job::current() {
  if (current_job == nullptr) throw Error(Errc::invalid_argument, "no rdmx::Job exists in this process (create one in main)");
  return *current_job;
}

std::uint32_t Job::rank() const noexcept { return impl_->runtime.rank(); }
std::uint32_t Job::threads_per_process() const noexcept { return impl_->runtime.threads(); }
std::uint32_t Job::helpers_per_process() const noexcept { return impl_->runtime.helpers(); }
const ProcessInfo& Job::process_info(std::uint32_t rank) const { return impl_->runtime.info(rank); }
Layout Job::layout() const { return impl_->runtime.layout(); }
void Job::check_destination(ThreadId id) const { impl_->runtime.validate(id); }
bool Job::process_left(std::uint32_t process) const noexcept { return impl_->runtime.job_collectives().left(process); }
std::size_t Job::max_message() const noexcept { return impl_->runtime.max_message(); }

int Job::numa_zone(std::uint32_t thread) const {
  impl_->runtime.validate(ThreadId{rank(), thread});
  return impl_->runtime.numa_node_of(thread);
}
std::string Job::launcher() const { return impl_->runtime.bootstrap().launcher(); }

std::string Job::describe() const { return impl_->runtime.describe(); }

void Job::run(const std::function<void(ThreadId)>& fn) {
  auto& rt = impl_->runtime;
  rt.run_begins();
  struct Ends {
    fabric::Runtime& rt;
    ~Ends() { rt.run_ends(); }
  } ends{rt};
  std::vector<std::thread> threads;
  std::exception_ptr first_error;
  std::mutex error_mutex;
  std::atomic<std::uint32_t> finished{0};
  auto body = [&](std::uint32_t thread) {
    rt.bind_current_thread(thread);
    std::string left = "had returned from Job::run's function";
    try {
      fn(ThreadId{rank(), thread});
    } catch (...) {
      const std::string what = describe_exception(std::current_exception());
      left = "had left Job::run's function with an exception (" + what.substr(0, 100) + ")";
      rdmx::log(rdmx::LogLevel::error, "process %u, thread %u: exception escaped Job::run: %s\n", rank(), thread, what.c_str());
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
    // A collective another thread enters now is one this thread never
    // will: it stands in, so that the collective fails everywhere, saying
    // why, instead of waiting for ever.
    finished.fetch_add(1, std::memory_order_acq_rel);
    Backoff backoff;
    while (finished.load(std::memory_order_acquire) < rt.threads()) {
      std::size_t ran = 0;
      try {
        rt.collectives().stand_in(thread, left);
        ran = progress();
      } catch (const std::exception& e) {  // e.g. a corrupted channel: reported, serving goes on
        rdmx::log(rdmx::LogLevel::error, "process %u, thread %u: %s\n", rank(), thread, e.what());
      }
      backoff(ran != 0);
    }
  };
  for (std::uint32_t thread = 1; thread < rt.threads(); ++thread)
    threads.emplace_back([&, thread] {
      body(thread);
      // Calls that arrive later wait for the next Job::run, or are run by
      // waits outside it (collectives, teardown): serve_idle_workers.
      rt.unbind_current_thread();
    });
  body(0);
  for (auto& t : threads) t.join();
  if (first_error) std::rethrow_exception(first_error);
}

void Job::barrier() { impl_->runtime.barrier(); }

std::vector<std::vector<std::byte>> Job::allgather(std::span<const std::byte> mine) {
  return impl_->runtime.allgather(mine);
}

transfer::Context& Job::context() { return impl_->runtime.context(); }

void Job::throw_mismatched_allgather(std::size_t process, std::size_t got, std::size_t expected) {
  throw Error(Errc::protocol, "allgather: process " + std::to_string(process) + " gave " + std::to_string(got) +
                                  " bytes where " + std::to_string(expected) + " were expected (a different type?)");
}

memory::Arena& Job::arena() {
  return arena_near(current_context != nullptr ? current_context->id().thread : service_thread);
}

memory::Arena& Job::arena_near(std::uint32_t thread) {
  auto& rt = impl_->runtime;
  return rt.arena_for(rt.numa_node_of(thread));
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

namespace fabric {
ProgressHook progress_hook() noexcept {
  return ProgressHook{[](void*) { return rdmx::progress() != 0; }, nullptr};
}
}  // namespace fabric

}  // namespace rdmx
