// Who is who in a job (Seriema's DSfabric naming): machines, processes,
// NUMA zones and long-lived threads. A ThreadId names a thread network-wide;
// every process also has a service thread that handles no-setup service calls.
#pragma once
#include <compare>
#include <cstdint>
#include <string>

namespace rdmx {

inline constexpr std::uint32_t service_thread = 0xFFFFFFFFu;

struct ThreadId {
  std::uint32_t process = 0;
  std::uint32_t thread = 0;  // index of a worker thread in its process, or service_thread
  bool is_service() const noexcept { return thread == service_thread; }
  friend auto operator<=>(const ThreadId&, const ThreadId&) = default;
};

// Where a process sits, resolved at bootstrap.
struct ProcessInfo {
  std::uint32_t rank = 0;
  std::uint32_t machine = 0;          // index of its host among the job's hosts
  std::uint32_t local_rank = 0;       // index among the processes on its host
  std::uint32_t local_processes = 1;  // processes on its host
  std::string hostname;
};

// m machines x p processes per machine x t worker threads per process.
struct Layout {
  std::uint32_t machines = 1;
  std::uint32_t processes_per_machine = 1;
  std::uint32_t threads_per_process = 1;
  // Parses "MxPxT" (e.g. "2x4x8"); throws rdmx::Error naming `what` on junk.
  static Layout parse(const std::string& text, const char* what);
  std::string to_string() const;
};

std::string to_string(const ThreadId& id);

}  // namespace rdmx
