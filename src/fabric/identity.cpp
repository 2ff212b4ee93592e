// Thread and layout identity: names and the MxPxT layout format.
#include "rdmx/fabric/identity.hpp"

#include <cstdio>
#include <string>

#include "rdmx/core/error.hpp"

namespace rdmx {

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


}  // namespace rdmx
