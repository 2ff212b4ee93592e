// The program's own exit handlers: its atexit calls and the destructors of
// its globals (which the compiler registers with __cxa_atexit), renamed to
// these functions in the program's objects (cmake/rdmx_omp_object). libc
// would run them after main returned, when the DSM that holds the globals is
// gone, and on every process, each destroying objects it never built there.
// The master runs them as the program ends instead, in reverse order, with
// the DSM up; other processes, which never ran main, drop theirs.
#include <mutex>
#include <vector>

#include "runtime.hpp"

namespace rdmx::omp {
namespace {

struct Handler {
  void (*with_argument)(void*) = nullptr;
  void (*plain)() = nullptr;
  void* argument = nullptr;
};
std::mutex handlers_mutex;
std::vector<Handler> handlers;

int add(const Handler& h) {
  std::lock_guard lock(handlers_mutex);
  handlers.push_back(h);
  return 0;
}

}  // namespace

void run_exit_handlers() {
  for (;;) {
    Handler h;
    {
      std::lock_guard lock(handlers_mutex);
      if (handlers.empty()) return;
      h = handlers.back();
      handlers.pop_back();
    }
    if (h.plain != nullptr)
      h.plain();
    else
      h.with_argument(h.argument);
  }
}

}  // namespace rdmx::omp

extern "C" int rdmx_omp_cxa_atexit(void (*fn)(void*), void* argument, void* /*dso*/) {
  return rdmx::omp::add({fn, nullptr, argument});
}
extern "C" int rdmx_omp_atexit(void (*fn)()) { return rdmx::omp::add({nullptr, fn, nullptr}); }
