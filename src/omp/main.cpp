// What starts a program built with rdmx_omp_executable or rdmxcc: the link
// wraps main (-Wl,--wrap=main), so the C start-up code calls __wrap_main
// here, and the program's own main, untouched, is __real_main. Untouched
// matters: a C or C++ main that ends without `return` returns 0 only as
// main, under its own name.
//
// Every process starts the Job and the DSM, and runs every worker thread in
// Job::run. Worker thread 0 of process 0 runs the program's main on a stack in
// the shared heap (the master), so that the shared locals it hands to
// parallel regions are heap addresses every process can read; every other
// thread serves the master's parallel regions until it publishes the exit.
// The program's globals (globals.cpp) are linked at a fixed address and the
// heap is placed so that its last blocks are theirs.
#include <signal.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <new>
#include <string>
#include <utility>
#include <vector>

#include "rdmx/core/env.hpp"
#include "rdmx/core/error.hpp"
#include "rdmx/dsm/counters.hpp"
#include "rdmx/dsm/fence.hpp"
#include "rdmx/dsm/space.hpp"
#include "rdmx/fabric/job.hpp"
#include "rdmx/fabric/rma.hpp"
#include "runtime.hpp"
#include "settings.hpp"

// The program's main. C++ gives main C linkage too, and a main declared
// without parameters ignores the two it is passed, as under crt1.
extern "C" int __real_main(int argc, char** argv);

extern "C" [[noreturn]] void __real_exit(int status);

namespace rdmx::omp {
namespace {

std::size_t round_up(std::size_t n, std::size_t unit) { return (n + unit - 1) / unit * unit; }

struct Master {
  ucontext_t scheduler{}, program{};
  std::span<std::byte> stack;
  int argc = 0;
  char** argv = nullptr;
  int status = 0;
  std::exception_ptr error;
};
Master master;
thread_local bool on_master_stack = false;

// off_heap's private stack and the call it runs there.
struct OffHeap {
  std::vector<std::byte> stack = std::vector<std::byte>(1 << 20);
  ucontext_t caller{}, callee{};
  void (*fn)(void*) = nullptr;
  void* arg = nullptr;
  std::exception_ptr error;
};
OffHeap off;

void off_heap_entry() {
  try {
    off.fn(off.arg);
  } catch (...) {
    off.error = std::current_exception();
  }
}

void master_entry() {
  try {
    master.status = __real_main(master.argc, master.argv);
    run_exit_handlers();
  } catch (...) {
    master.error = std::current_exception();
  }
  on_master_stack = false;
  // uc_link resumes the scheduler.
}

// Runs the program's main on `stack` (in the heap); returns its status.
int run_master(std::span<std::byte> stack) {
  // Faults on the master's own stack need a signal frame elsewhere (the
  // DSM's handler runs with SA_ONSTACK), with room for the fault path.
  std::vector<std::byte> alternate(1 << 20);
  stack_t alt{}, previous{};
  alt.ss_sp = alternate.data();
  alt.ss_size = alternate.size();
  if (::sigaltstack(&alt, &previous) != 0) fatal("sigaltstack: %s", std::strerror(errno));
  // Fault the stack's top in now (clean, readable), where main and the
  // calls it makes run: a first fault there later could come from inside
  // malloc. Not all of it: each block is a fetch from its home, remote for
  // most blocks under the fixed home.
  const std::size_t page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  const std::size_t warm = std::min(stack.size(), std::size_t{256} << 10);
  for (std::size_t off = stack.size() - warm; off < stack.size(); off += page)
    static_cast<void>(*reinterpret_cast<volatile char*>(stack.data() + off));
  ::getcontext(&master.program);
  master.stack = stack;
  master.program.uc_stack.ss_sp = stack.data();
  master.program.uc_stack.ss_size = stack.size();
  master.program.uc_link = &master.scheduler;
  ::makecontext(&master.program, master_entry, 0);
  on_master_stack = true;
  ::swapcontext(&master.scheduler, &master.program);
  on_master_stack = false;
  alt.ss_flags = SS_DISABLE;
  ::sigaltstack(previous.ss_sp != nullptr ? &previous : &alt, nullptr);
  if (master.error) std::rethrow_exception(master.error);
  return master.status;
}

}  // namespace

bool on_master_stack_now() noexcept {
  if (!on_master_stack) return false;
  const auto* frame = static_cast<const std::byte*>(__builtin_frame_address(0));
  return frame >= master.stack.data() && frame < master.stack.data() + master.stack.size();
}

void off_heap(void (*fn)(void*), void* arg) {
  if (!on_master_stack) {
    fn(arg);
    return;
  }
  off.fn = fn;
  off.arg = arg;
  off.error = nullptr;
  ::getcontext(&off.callee);
  off.callee.uc_stack.ss_sp = off.stack.data();
  off.callee.uc_stack.ss_size = off.stack.size();
  off.callee.uc_link = &off.caller;
  ::makecontext(&off.callee, off_heap_entry, 0);
  on_master_stack = false;
  ::swapcontext(&off.caller, &off.callee);
  on_master_stack = true;
  if (off.error) std::rethrow_exception(std::exchange(off.error, nullptr));
}

namespace {

// OMP_SCHEDULE: [monotonic:|nonmonotonic:]kind[,chunk], as libgomp reads
// it. Anything else stops the job naming the variable, the value and what
// it accepts: never a default in its place, nor a chunk wrapped to fit.
LoopSpec schedule_from_env() {
  LoopSpec s{Schedule::fixed, 0, 0, 1, 0};
  const auto given = env::get("OMP_SCHEDULE");
  if (!given) return s;
  constexpr long most = 2147483647;  // libgomp's limit: an int
  const auto refuse = [&](const std::string& why) {
    return Error(Errc::invalid_argument,
                 "OMP_SCHEDULE='" + *given + "' " + why +
                     "; OMP_SCHEDULE accepts [monotonic:|nonmonotonic:]static|dynamic|guided|auto[,chunk] with a "
                     "chunk of 0 (the default) to " + std::to_string(most));
  };
  const auto trim = [](std::string t) {
    const auto first = t.find_first_not_of(" \t");
    if (first == std::string::npos) return std::string();
    return t.substr(first, t.find_last_not_of(" \t") - first + 1);
  };
  std::string text = *given;
  if (const auto colon = text.find(':'); colon != std::string::npos) {
    const std::string modifier = trim(text.substr(0, colon));
    if (modifier != "monotonic" && modifier != "nonmonotonic")
      throw refuse("has modifier '" + modifier + "', not monotonic or nonmonotonic");
    text.erase(0, colon + 1);
  }
  const auto comma = text.find(',');
  const std::string kind = trim(text.substr(0, comma));
  if (kind == "dynamic")
    s.schedule = Schedule::dynamic;
  else if (kind == "guided")
    s.schedule = Schedule::guided;
  else if (kind != "static" && kind != "auto")
    throw refuse("names schedule '" + kind + "', not static, dynamic, guided or auto");
  if (comma == std::string::npos) return s;
  const std::string chunk = trim(text.substr(comma + 1));
  if (chunk.empty() || chunk.find_first_not_of("0123456789") != std::string::npos)
    throw refuse("has chunk '" + chunk + "', not a whole number");
  // At most 10 digits after leading zeros: no conversion can overflow.
  const auto digits = chunk.find_first_not_of('0');
  if (digits == std::string::npos) return s;  // 0: the default chunk, as libgomp takes it
  if (chunk.size() - digits > 10) throw refuse("has chunk " + chunk + ", too large");
  long value = 0;
  for (const char c : chunk.substr(digits)) value = value * 10 + (c - '0');
  if (value > most) throw refuse("has chunk " + chunk + ", too large");
  s.chunk = value;
  return s;
}

// OMP_NUM_THREADS, nthreads-var: the first number of its list (libgomp's
// form, one count per nesting level; inner regions run on one thread here).
// 0 when unset. A count above the job's threads is refused once the job's
// size is known (check_num_threads), rather than cut down silently.
std::uint32_t num_threads_from_env() {
  const auto given = env::get("OMP_NUM_THREADS");
  if (!given) return 0;
  const std::string first = given->substr(0, given->find(','));
  const auto begin = first.find_first_not_of(" \t"), end = first.find_last_not_of(" \t");
  const std::string digits = begin == std::string::npos ? "" : first.substr(begin, end - begin + 1);
  std::uint32_t count = 0;
  // At most 9 digits: no conversion can overflow.
  const bool whole = !digits.empty() && digits.size() <= 9 && digits.find_first_not_of("0123456789") == std::string::npos;
  if (whole)
    for (const char c : digits) count = count * 10 + static_cast<std::uint32_t>(c - '0');
  if (count == 0)
    throw Error(Errc::invalid_argument, "OMP_NUM_THREADS='" + *given +
                                            "' does not start with a positive whole number; OMP_NUM_THREADS accepts "
                                            "a count (or a comma-separated list of counts, one per nesting level)");
  return count;
}
void check_num_threads(std::uint32_t wanted, const Job& job) {
  if (wanted <= job.total_threads()) return;
  // Every process reads the same variable and job size: the job's error.
  throw Error(Errc::invalid_argument,
              "OMP_NUM_THREADS='" + env::get("OMP_NUM_THREADS").value_or("") + "' asks for more threads than the " +
                  std::to_string(job.total_threads()) + " of the job (" + std::to_string(job.size()) +
                  " processes x " + std::to_string(job.threads_per_process()) +
                  ", --rdmx-threads); OMP_NUM_THREADS accepts 1 to " + std::to_string(job.total_threads()),
              Reach::shared_settings);
}

// The end of the highest mapping below `limit` (the program's image below
// section rdmx_shared): the DSM heap, which ends with the section, must start
// above it. At least the kernel's lowest mappable address.
std::uintptr_t highest_mapped_below(std::uintptr_t limit) {
  std::uintptr_t highest = 1u << 16;  // vm.mmap_min_addr's usual value
  if (std::FILE* f = std::fopen("/proc/sys/vm/mmap_min_addr", "r")) {
    unsigned long long min = 0;
    if (std::fscanf(f, "%llu", &min) == 1) highest = std::max<std::uintptr_t>(highest, min);
    std::fclose(f);
  }
  if (std::FILE* f = std::fopen("/proc/self/maps", "r")) {
    char line[512];
    while (std::fgets(line, sizeof line, f) != nullptr) {
      unsigned long long begin = 0, end = 0;
      if (std::sscanf(line, "%llx-%llx", &begin, &end) == 2 && end <= limit)
        highest = std::max<std::uintptr_t>(highest, end);
      // A line longer than the buffer: skip its rest.
      while (std::strchr(line, '\n') == nullptr && std::fgets(line, sizeof line, f) != nullptr) {
      }
    }
    std::fclose(f);
  }
  return highest;
}

std::string size_text(std::size_t bytes) {
  if (bytes % (std::size_t{1} << 20) == 0) return std::to_string(bytes >> 20) + "M";
  if (bytes % (std::size_t{1} << 10) == 0) return std::to_string(bytes >> 10) + "K";
  return std::to_string(bytes) + " bytes";
}

// A heap that ends with section rdmx_shared lies below it, above the
// program's image: one larger than that room is refused here, before the
// job starts and any process maps or fills it, naming the setting it came
// from (RDMX_DSM_HEAP, else RDMX_OMP_STACK, which sizes the derived heap).
// `rest`: the derived heap's bytes besides the stack.
void check_heap_fits(std::uintptr_t section, std::uintptr_t section_end, std::size_t heap_bytes, std::size_t block,
                     std::size_t rest) {
  const std::uintptr_t low = round_up(highest_mapped_below(section), block);
  const std::size_t room = section_end > low ? section_end - low : 0;
  if (heap_bytes <= room) return;
  char range[128];
  std::snprintf(range, sizeof range, "0x%llx to 0x%llx", static_cast<unsigned long long>(low),
                static_cast<unsigned long long>(section_end));
  const std::string because =
      " does not fit: the DSM heap ends with the program's globals and starts above the rest of its image, in " +
      std::string(range) + " (" + size_text(room) + "); ";
  if (const auto heap = env::get("RDMX_DSM_HEAP"))
    throw Error(Errc::invalid_argument, "RDMX_DSM_HEAP='" + *heap + "'" + because + "RDMX_DSM_HEAP accepts at most " +
                                            size_text(room / block * block) + " here");
  const std::string stack = env::get("RDMX_OMP_STACK").value_or("8M");
  const std::size_t most = room > rest ? (room - rest) / block * block : 0;
  throw Error(Errc::invalid_argument, "RDMX_OMP_STACK='" + stack + "' makes a DSM heap of " + size_text(heap_bytes) +
                                          " (the stack, the program's globals and 32M for its heap), which" +
                                          because + "RDMX_OMP_STACK accepts at most " + size_text(most) + " here");
}

// The DSM registers its home copies as one chunk of the heap's size (a
// segment of its own when larger than the others): let the arena grow to
// hold it beside the runtime's own chunks, unless the user set a maximum.
// Before the Job, which builds the arena.
void size_arena(std::size_t heap_bytes) {
  const std::size_t slack = std::size_t{64} << 20;  // metadata and the runtime's own chunks
  if (!env::get("RDMX_ARENA_MAX") && 2 * (heap_bytes + slack) > (std::size_t{1} << 30))
    ::setenv("RDMX_ARENA_MAX", std::to_string(2 * (heap_bytes + slack)).c_str(), 0);
}

// The program's arguments, copied into the shared heap: main may hand them
// (or a global may keep them) to threads of other processes, where process
// 0's stack is not.
char** shared_arguments(int argc, char** argv) {
  auto** copy = static_cast<char**>(shared_block(sizeof(char*) * (static_cast<std::size_t>(argc) + 1)));
  if (copy == nullptr) return argv;
  for (int i = 0; i < argc; ++i) {
    const std::size_t bytes = std::strlen(argv[i]) + 1;
    copy[i] = static_cast<char*>(shared_block(bytes));
    if (copy[i] == nullptr) return argv;
    std::memcpy(copy[i], argv[i], bytes);
  }
  return copy;
}

// Until the settings are read, an error comes from what every process is
// started with (its environment, its program's image): the job's error.
bool settings_read = false;

int run(int argc, char** argv) {
  // Every setting is checked before anything is mapped or the job starts.
  const LoopSpec runtime_schedule = schedule_from_env();
  const std::uint32_t num_threads = num_threads_from_env();
  const auto slots = static_cast<std::uint32_t>(rdmx_omp_settings.number("RDMX_OMP_WORK_SHARES"));
  const bool stats = rdmx_omp_settings.flag("RDMX_OMP_STATS");
  dsm::Config config = dsm::Config::from_env();
  // 16 KiB, not the DSM's page-sized default: the kernels rewrite whole
  // arrays between barriers, and a block 4 pages long takes a quarter of
  // the faults and fits the write notices in the signature (docs/omp.md).
  if (!env::get("RDMX_DSM_BLOCK")) config.block_bytes = 16u << 10;
  const std::size_t block = config.block_bytes;
  if (program_flushes()) config.causal_mutex = atomic_mutex;
  if (block == 0) throw Error(Errc::invalid_argument, "RDMX_DSM_BLOCK is 0");
  // The program's globals as its start-up left them, before anything else
  // runs: a refusal there is the same on every process.
  const Globals globals = program_globals();
  const Image image = save_globals(globals, end_premain());
  auto* section = globals.begin;
  const std::size_t section_bytes = globals.bytes();
  const std::size_t shared = round_up(section_bytes, block);
  const std::size_t stack = round_up(rdmx_omp_settings.number("RDMX_OMP_STACK"), block);
  const std::size_t own = stack + block;  // the master's stack, then the Region
  if (!env::get("RDMX_DSM_HEAP")) config.heap_bytes = round_up(own + shared + (32u << 20), block);
  if (config.heap_bytes < own + shared)
    throw Error(Errc::out_of_memory, "RDMX_DSM_HEAP=" + std::to_string(config.heap_bytes) + " is too small: " +
                                         std::to_string(shared) + " bytes of the program's globals and " +
                                         std::to_string(own) + " for the master's stack (RDMX_OMP_STACK)");
  if (config.mutexes < 3)
    throw Error(Errc::invalid_argument, "RDMX_DSM_MUTEXES='" + std::to_string(config.mutexes) +
                                            "': rdmx_omp needs at least 3 (atomics, critical, named criticals)");
  if (shared != 0) {
    check_heap_fits(reinterpret_cast<std::uintptr_t>(section), reinterpret_cast<std::uintptr_t>(section) + shared,
                    config.heap_bytes, block, block + shared + (32u << 20));
    // Its last block must not reach into the brk heap, which may start
    // where the globals end (cmake/rdmx_omp.cmake pads them to 64 KiB).
    if (reinterpret_cast<std::uintptr_t>(section) % block != 0 || section_bytes % block != 0)
      throw Error(Errc::invalid_argument, "the program's globals (" + std::to_string(section_bytes) +
                                              " bytes) do not begin and end on a DSM block boundary (RDMX_DSM_BLOCK=" +
                                              std::to_string(block) + "; up to 64K fits): see RDMX_OMP_SHARED_ADDRESS");
    config.address = reinterpret_cast<std::uintptr_t>(section) + shared - config.heap_bytes;
  }
  size_arena(config.heap_bytes);
  settings_read = true;
  Job job(argc, argv);
  check_num_threads(num_threads, job);
  release_globals(globals);
  dsm::Space space(job, config);
  auto* heap = static_cast<std::byte*>(dsm::allocate(config.heap_bytes - shared, block));
  if (shared != 0 && dsm::allocate(shared, block) != section)
    throw Error(Errc::invalid_argument, "the DSM heap does not end with the program's globals");

  Runtime rt;
  rt.processes = job.size();
  rt.threads = job.threads_per_process();
  rt.total = job.total_threads();
  rt.heap = space.heap();
  rt.region = reinterpret_cast<Region*>(heap + stack);  // zeroed memory: no Region yet
  if (job.rank() == 0) new (rt.region) Region{};
  rt.slots = slots;  // at least 1: the table's range
  rt.mutexes = config.mutexes;
  rt.max_threads.store(num_threads != 0 ? num_threads : rt.total);
  rt.runtime_schedule = runtime_schedule;
  RemoteLocator ring{};
  if (job.rank() == 0) {
    // Each slot starts as if every thread had finished a construct of
    // generation 0 in it (loop.cpp): the claim word 0, the finished word
    // the team's size. The turn word starts at the first ordered loop's
    // first iteration: 0.
    ring = allocate_remote(0, std::size_t{rt.slots} * 16 + 8);
    auto* words = reinterpret_cast<std::uint64_t*>(resolve(ring).address);
    for (std::uint32_t i = 0; i < rt.slots; ++i) {
      words[2 * i] = 0;
      words[2 * i + 1] = rt.total;
    }
    words[2 * rt.slots] = 0;
  }
  rt.ring = job.allgather(ring)[0];
  rt.ring_team = rt.total;
  reset_shared_heap({heap + own, config.heap_bytes - shared - own});
  if (job.rank() == 0) {
    publish_globals(globals, image);
    argv = shared_arguments(argc, argv);
  }
  set_runtime(&rt);
  setup_threadprivate(job, *rt.region);
  dsm::process_barrier();  // the Region's initial state, before anyone reads it

  master.argc = argc;
  master.argv = argv;
  job.run([&](ThreadId me) {
    const std::uint32_t global = me.process * rt.threads + me.thread;
    if (global != 0) {
      serve_team(global);
      return;
    }
    const int status = run_master({heap, stack});
    rt.region->status = status;
    rt.region->exit = 1;
    dsm::barrier();
  });
  const int status = rt.region->status;
  set_runtime(nullptr);
  if (stats) {
    std::fflush(stdout);  // after the program's own output
    std::fprintf(stderr, "rdmx_omp: process %u: region joins %llu, team barriers %llu (all threads); dsm: %s\n",
                 job.rank(), static_cast<unsigned long long>(rt.joins.load()),
                 static_cast<unsigned long long>(rt.barriers.load()), dsm::to_string(dsm::counters()).c_str());
  }
  return status;
}

}  // namespace
}  // namespace rdmx::omp

using namespace rdmx::omp;

extern "C" [[noreturn]] void __wrap_exit(int status) {
  if (in_job_region) fatal("exit(%d) inside a parallel region", status);
  if (on_master_stack) {
    // The program ends: its exit handlers, then back to the scheduler,
    // which ends the job in order.
    master.status = status;
    try {
      run_exit_handlers();
    } catch (...) {
      master.error = std::current_exception();
    }
    on_master_stack = false;
    ::setcontext(&master.scheduler);
  }
  __real_exit(status);
}

extern "C" int __wrap_main(int argc, char** argv) {
  try {
    const int status = run(argc, argv);
    restore_globals(program_globals());
    return status;
  } catch (const rdmx::Error& e) {
    rdmx::exit_on_error(settings_read ? e : rdmx::Error(e.code(), e.what(), rdmx::Reach::shared_settings));
  } catch (const std::exception& e) {
    rdmx::exit_on_error(e);
  }
}
