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

class Error : public std::runtime_error {
 public:
  Error(Errc code, const std::string& what) : std::runtime_error(what), code_(code) {}
  Errc code() const noexcept { return code_; }

 private:
  Errc code_;
};

}  // namespace rdmx
