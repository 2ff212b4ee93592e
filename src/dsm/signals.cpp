#include "signals.hpp"

#include <dlfcn.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <ucs/debug/debug.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>

#include "engine.hpp"
#include "rdmx/core/error.hpp"

namespace rdmx::dsm {

namespace {

struct sigaction previous_action;

// The engine whose guard installed the handler: the handler reaches it with
// one load, no lookup, lock or allocation (a fault may interrupt anything,
// malloc included).
std::atomic<Engine*> served{nullptr};

// The kernel's struct for rt_sigaction (not glibc's, whose mask is larger).
struct KernelSigaction {
  void* handler;
  unsigned long flags;
  void* restorer;
  unsigned long mask;
};

// The handler the kernel has for SIGSEGV now (whatever sigaction wrappers say).
void* installed_handler() {
  KernelSigaction installed{};
  if (::syscall(SYS_rt_sigaction, SIGSEGV, nullptr, &installed, sizeof installed.mask) != 0) return nullptr;
  return installed.handler;
}

// Whether `handler` is code of UCX's libucs.
bool in_libucs(void* handler) {
  Dl_info info{};
  return handler != nullptr && ::dladdr(handler, &info) != 0 && info.dli_fname != nullptr &&
         std::strstr(info.dli_fname, "libucs") != nullptr;
}

void say(const char* text) {
  std::size_t n = std::strlen(text);
  while (n > 0) {
    const ssize_t w = ::write(STDERR_FILENO, text, n);
    if (w <= 0) return;
    text += w;
    n -= static_cast<std::size_t>(w);
  }
}

bool is_write(void* context) {
#if defined(__x86_64__)
  // The page-fault error code: bit 1 is set for a write access.
  return (static_cast<ucontext_t*>(context)->uc_mcontext.gregs[REG_ERR] & 2) != 0;
#else
  (void)context;
  return false;  // elsewhere a write to a clean block faults a second time
#endif
}

void pass_on(int signal, siginfo_t* info, void* context) {
  if ((previous_action.sa_flags & SA_SIGINFO) != 0 && previous_action.sa_sigaction != nullptr) {
    previous_action.sa_sigaction(signal, info, context);
    return;
  }
  if (previous_action.sa_handler != SIG_DFL && previous_action.sa_handler != SIG_IGN &&
      previous_action.sa_handler != nullptr) {
    previous_action.sa_handler(signal);
    return;
  }
  char text[160];
  std::snprintf(text, sizeof text, "rdmx dsm: segmentation fault at %p, outside the shared heap\n", info->si_addr);
  say(text);
  // Returning re-runs the access, which now takes the default action.
  ::signal(signal, SIG_DFL);
}

void on_fault(int signal, siginfo_t* info, void* context) {
  const int saved_errno = errno;
  Engine* engine = served.load(std::memory_order_acquire);
  if (engine == nullptr || !engine->contains(info->si_addr)) {
    pass_on(signal, info, context);
    errno = saved_errno;
    return;
  }
  try {
    engine->fault(info->si_addr, is_write(context));
  } catch (const std::exception& e) {
    say("rdmx dsm: a fault on the shared heap could not be served: ");
    say(e.what());
    say("\n");
    std::abort();
  }
  errno = saved_errno;
}

}  // namespace

Engine::SignalGuard::SignalGuard(Engine& engine) {
  // UCX gives SIGSEGV back: it restores what was there before its handler.
  // Only when it has it: asked otherwise, UCX warns that it does not.
  if (in_libucs(installed_handler())) ucs_debug_disable_signal(SIGSEGV);
  struct sigaction ours {};
  ours.sa_sigaction = on_fault;
  // SA_ONSTACK: a thread whose stack lies in the heap (rdmx_omp's master)
  // faults on its own stack; the kernel needs somewhere else to put the
  // signal frame, the alternate stack that thread sets up.
  ours.sa_flags = SA_SIGINFO | SA_NODEFER | SA_RESTART | SA_ONSTACK;
  sigemptyset(&ours.sa_mask);
  served.store(&engine, std::memory_order_release);
  if (::sigaction(SIGSEGV, &ours, &previous_action) != 0) {
    served.store(nullptr, std::memory_order_release);
    throw Error(Errc::invalid_argument, std::string("dsm: installing the SIGSEGV handler failed: ") +
                                            std::strerror(errno));
  }
  if (previous_action.sa_sigaction == on_fault) previous_action = {};
  if (installed_handler() != reinterpret_cast<void*>(&on_fault)) {
    served.store(nullptr, std::memory_order_release);
    throw Error(Errc::invalid_argument,
                "dsm: the SIGSEGV handler installed is not the DSM's (another library intercepts sigaction, "
                "e.g. libucs_signal with UCX_HANDLE_ERRORS, or a sanitizer); the shared heap cannot detect "
                "accesses. Run without it, or set UCX_HANDLE_ERRORS=none");
  }
}

Engine::SignalGuard::~SignalGuard() {
  ::sigaction(SIGSEGV, &previous_action, nullptr);
  served.store(nullptr, std::memory_order_release);
}

}  // namespace rdmx::dsm
