#include "rdmx/core/error.hpp"

#include <cxxabi.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <string>
#include <thread>

namespace rdmx {

const char* to_string(Errc code) noexcept {
  switch (code) {
    case Errc::transport: return "transport";
    case Errc::peer_failed: return "peer_failed";
    case Errc::invalid_argument: return "invalid_argument";
    case Errc::out_of_memory: return "out_of_memory";
    case Errc::message_too_large: return "message_too_large";
    case Errc::unknown_function: return "unknown_function";
    case Errc::no_such_destination: return "no_such_destination";
    case Errc::bootstrap: return "bootstrap";
    case Errc::protocol: return "protocol";
    case Errc::shut_down: return "shut_down";
    case Errc::remote_exception: return "remote_exception";
    case Errc::bad_archive: return "bad_archive";
  }
  return "unknown";
}

std::string demangle(const char* mangled) {
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> text(abi::__cxa_demangle(mangled, nullptr, nullptr, &status), std::free);
  return status == 0 && text ? std::string(text.get()) : std::string(mangled);
}

std::string type_name(const std::type_info& type) { return demangle(type.name()); }

namespace {

// What the launcher says goes in the environment of the processes it
// starts. rdmx's bootstrap is PMIx: without PMIX_NAMESPACE the job is this
// process alone.
bool same_text(const char* a, const char* b) { return a != nullptr && b != nullptr && std::strcmp(a, b) == 0; }

// Whether this process is a task of the srun job step that serves its
// PMIx: Slurm's PMIx plugin names the step's namespace
// slurm.pmix.<job>.<step>. A process that merely inherited SLURM_*
// variables (mpirun inside an allocation or a step, whose daemons srun
// started) belongs to another namespace.
bool srun_task() {
  const char* job = std::getenv("SLURM_JOB_ID");
  const char* step = std::getenv("SLURM_STEP_ID");
  if (job == nullptr || step == nullptr) return false;
  const std::string step_namespace = std::string("slurm.pmix.") + job + "." + step;
  return same_text(std::getenv("PMIX_NAMESPACE"), step_namespace.c_str());
}

// Whether every process of the job runs this program with these arguments
// and these RDMX_* settings. Open MPI's mpirun hands one application
// context (no "a : b") the same command line, and its own environment to
// the processes on its host; scripts/run forwards every RDMX_* variable to
// the other hosts as well (RDMX_SETTINGS_FORWARDED). srun hands every task
// of a step the same environment (whatever --export names, it names for
// all) and command line, except in a heterogeneous step ("a : b",
// SLURM_HET_SIZE set), which has one per component; --multi-prog, one line
// per task, leaves no trace in the tasks' environment (docs/slurm.md).
// Other launchers: not known, so each process prints its own.
bool started_alike() {
  if (std::getenv("PMIX_NAMESPACE") == nullptr) return true;
  if (srun_task()) return std::getenv("SLURM_HET_SIZE") == nullptr;
  if (!same_text(std::getenv("OMPI_NUM_APP_CTX"), "1")) return false;
  return same_text(std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE"), std::getenv("OMPI_COMM_WORLD_SIZE")) ||
         same_text(std::getenv("RDMX_SETTINGS_FORWARDED"), "1");
}

// Whether this is process 0, as the launcher says: the bootstrap may not
// have run yet (a setting refused at start), or have failed.
bool first_process() {
  if (std::getenv("PMIX_NAMESPACE") == nullptr) return true;
  return same_text(std::getenv("PMIX_RANK"), "0");
}

std::terminate_handler previous_handler = nullptr;

// Whether every process of the job is known to meet `e` alike.
bool job_wide(const std::exception& e) noexcept {
  const auto* error = dynamic_cast<const Error*>(&e);
  if (error == nullptr) return false;
  return error->reach() == Reach::every_process || (error->reach() == Reach::shared_settings && started_alike());
}

std::atomic<void (*)()> job_leaver{nullptr};

// How long a process that leaves a job-wide error to process 0, before a
// job exists to leave together, waits for the launcher to end it.
constexpr auto launcher_wait = std::chrono::seconds(30);

// The launcher ends the waiting processes with SIGTERM: they end with the
// job's status, 1, as process 0 did, rather than as killed (srun would
// report 143 for the job).
void exit_on_terminate(int) { std::_Exit(1); }

// An uncaught Error that every process meets ends the process as
// exit_on_error does. Anything else goes to the handler before (by default
// the one that prints "terminate called after throwing ...").
[[noreturn]] void on_terminate() {
  if (const std::exception_ptr thrown = std::current_exception()) {
    try {
      std::rethrow_exception(thrown);
    } catch (const Error& e) {
      if (job_wide(e)) exit_on_error(e);
    } catch (...) {
    }
  }
  if (previous_handler != nullptr) previous_handler();
  std::abort();
}

}  // namespace

void Error::report_once_if_uncaught() noexcept {
  static const bool installed = [] {
    previous_handler = std::set_terminate(&on_terminate);
    return true;
  }();
  static_cast<void>(installed);
}

void detail::set_job_leaver(void (*leave)()) noexcept { job_leaver.store(leave, std::memory_order_release); }

void exit_on_error(const std::exception& e) noexcept {
  std::fflush(nullptr);  // the program's own output first
  const bool alike = job_wide(e);
  if (!alike || first_process()) {
    // Not through rdmx::log: the process ends on this error, which is said
    // whatever RDMX_LOG (itself possibly the refused setting) asks.
    const std::string line = std::string("rdmx: ") + e.what() + "\n";
    std::fwrite(line.data(), 1, line.size(), stderr);
  }
  if (alike) {
    if (void (*leave)() = job_leaver.load(std::memory_order_acquire)) {
      // Every process is here: they leave the job together. One leaving
      // alone could fail another still in the collective that found the
      // error, whose message would then be a peer's failure instead.
      try {
        leave();
      } catch (...) {
      }
    } else if (!first_process()) {
      // No job yet: process 0 says it and ends, and the launcher then ends
      // the rest (mpirun does, and srun --kill-on-bad-exit; else they end
      // when the wait runs out). Ending first could have process 0 killed
      // before it has said anything.
      std::signal(SIGTERM, &exit_on_terminate);
      std::this_thread::sleep_for(launcher_wait);
    }
  }
  std::_Exit(1);
}

}  // namespace rdmx
