// rdmx::Error: the one exception type rdmx throws. Every failure carries an
// Errc a program can branch on and a message a person can act on.
#pragma once
#include <stdexcept>
#include <string>
#include <typeinfo>

namespace rdmx {

enum class Errc {
  transport,          // UCX reported a failure (message carries UCX's status text)
  peer_failed,        // the remote process died or its endpoint broke
  invalid_argument,   // bad input from the caller: out-of-range locator, bad layout ...
  out_of_memory,      // an arena, allocator or pool is exhausted
  message_too_large,  // a call or transfer exceeds the configured maximum
  unknown_function,   // a call names a function id this process does not know
  no_such_destination,// a process or thread id outside the job
  bootstrap,          // the launcher handshake failed
  protocol,           // a malformed message arrived
  shut_down,          // the job or destination has been shut down
  remote_exception,   // the remote function threw; the message carries what()
  bad_archive,        // a serialized archive is truncated, corrupted or of other types
};

const char* to_string(Errc code) noexcept;

// A type's name as written in C++ ("std::out_of_range"), for messages;
// demangle does the same for a name from std::type_info::name().
std::string type_name(const std::type_info& type);
std::string demangle(const char* mangled);

// Which processes of the job meet an error. A job-wide one, left uncaught,
// is printed once for the job (by process 0) rather than by each process
// in turn; the others end with the same status, quietly (exit_on_error).
enum class Reach {
  this_process,     // possibly this process's alone: each process prints its own
  shared_settings,  // follows from what every process is started with (environment, command line, program):
                    // job-wide where the launcher says it started every process alike
  every_process,    // agreed through a collective: the same on every process by construction
};

class Error : public std::runtime_error {
 public:
  Error(Errc code, const std::string& what, Reach reach = Reach::this_process)
      : std::runtime_error(what), code_(code), reach_(reach) {
    if (reach != Reach::this_process) report_once_if_uncaught();
  }
  Errc code() const noexcept { return code_; }
  Reach reach() const noexcept { return reach_; }

 private:
  // Installs the terminate handler that prints a job-wide error once.
  static void report_once_if_uncaught() noexcept;
  Errc code_;
  Reach reach_;
};

// Runs `read`, which reads only what every process is started with: an
// Error it throws becomes the job's (Reach::shared_settings).
template <class Read>
decltype(auto) shared_settings(Read&& read) {
  try {
    return read();
  } catch (const Error& e) {
    throw Error(e.code(), e.what(), Reach::shared_settings);
  }
}

// Ends the process on `e` with status 1, saying why on standard error as
// "rdmx: <what>". Each process says so, except for an Error every process
// meets alike (its reach, and for shared_settings a launcher that started
// every process alike): process 0 alone says it, and the processes leave
// the job together. What an uncaught job-wide Error does; for a program's
// own catch around its job.
[[noreturn]] void exit_on_error(const std::exception& e) noexcept;

namespace detail {
// While a job runs, how its process leaves it in order (the fabric sets
// it; nullptr: no job). exit_on_error leaves through it on a job-wide
// error: every process meets that error, so all take part.
void set_job_leaver(void (*leave)()) noexcept;
}  // namespace detail

}  // namespace rdmx
