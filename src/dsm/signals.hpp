// The DSM's SIGSEGV handler: access detection by page protection.
//
// UCX installs its own SIGSEGV handler (UCX_HANDLE_ERRORS), and when
// libucs_signal is loaded it also swallows later sigaction(SIGSEGV) calls,
// so a plain sigaction would silently leave UCX's handler in place and the
// first DSM fault would die there. The guard therefore asks UCX to give the
// signal back (ucs_debug_disable_signal), installs ours, reads the kernel's
// handler back with the raw system call and refuses to start if it is not
// ours. Faults outside the heap go to the handler that was there before, or
// get a message and the default action (the process dies of SIGSEGV).
#pragma once
#include <signal.h>

#include "engine.hpp"

namespace rdmx::dsm {

struct Engine::SignalGuard {
  explicit SignalGuard(Engine& engine);
  ~SignalGuard();
  SignalGuard(const SignalGuard&) = delete;
  SignalGuard& operator=(const SignalGuard&) = delete;
};

}  // namespace rdmx::dsm
