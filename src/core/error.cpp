#include "rdmx/core/error.hpp"

#include <cxxabi.h>

#include <cstdlib>
#include <memory>

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

}  // namespace rdmx
