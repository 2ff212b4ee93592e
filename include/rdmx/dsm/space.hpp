// dsm::Space: this process's part of a page-based distributed shared memory
// (MENPS). Construct one after the Job, collectively (one thread per
// process, every process), and destroy it before the Job. It reserves the
// shared heap at the same virtual address in every process, so a pointer
// into it means the same bytes everywhere; plain loads and stores of the
// heap are then coherent under release consistency (docs/dsm.md):
//
//   rdmx::Job job(argc, argv);
//   rdmx::dsm::Space space(job);
//   auto* x = rdmx::dsm::allocate_array<int>(1024);   // same pointer everywhere
//   if (job.rank() == 0) x[7] = 42;
//   rdmx::dsm::process_barrier();                     // release + acquire
//   assert(x[7] == 42);
#pragma once
#include <cstddef>
#include <memory>
#include <new>
#include <span>

#include "rdmx/dsm/config.hpp"

namespace rdmx {
class Job;
}

namespace rdmx::dsm {

class Engine;

class Space {
 public:
  explicit Space(Job& job, const Config& config = Config::from_env());
  // Collective: waits until every process has stopped using the heap.
  ~Space();
  Space(const Space&) = delete;
  Space& operator=(const Space&) = delete;

  // The shared heap, the same range in every process.
  std::span<std::byte> heap() const noexcept;
  const Config& config() const noexcept;

 private:
  std::unique_ptr<Engine> engine_;
};

// Collective allocation: every process calls it with the same sizes in the
// same order (one thread per process) and gets the same pointer; a process
// that asks for another size makes every process throw. Memory starts
// zeroed and is never freed before the Space ends. Throws Errc::out_of_memory
// when the heap is exhausted. An alignment of Config::block_bytes keeps
// other allocations out of this one's blocks (no false sharing).
void* allocate(std::size_t bytes, std::size_t alignment = alignof(std::max_align_t));

template <class T>
T* allocate_array(std::size_t count) {
  if (count > static_cast<std::size_t>(-1) / sizeof(T)) throw std::bad_array_new_length();
  return static_cast<T*>(allocate(count * sizeof(T), alignof(T)));
}

}  // namespace rdmx::dsm
