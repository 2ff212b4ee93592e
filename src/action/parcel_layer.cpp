// The action layer's making and finding: Parcels and each worker's share,
// the calling thread's share (current_worker), the Job's default memory for
// RmaVector, and the public pieces that need only the layer (ArchiveLease,
// stats, progress_hook).
#include "parcel_layer.hpp"

#include "rdmx/core/error.hpp"
#include "rdmx/fabric/call.hpp"
#include "rdmx/fabric/layer.hpp"
#include "rdmx/memory/arena.hpp"

namespace rdmx::parcel {

WorkerParcels::WorkerParcels(Job& job, Parcels& layer, std::uint32_t thread)
    : job(job),
      layer(layer),
      self{job.rank(), thread},
      landing(job.arena_near(thread)),
      large_landing(job.arena_near(thread).max_size()),
      landing_segment(job.arena_near(thread).segment_size()),
      markers_(job, self) {}

Parcels::Parcels(Job& job) : registrations(job.context()), path(job) {
  for (std::uint32_t t = 0; t < job.workers_per_process(); ++t)
    workers_.push_back(std::make_unique<WorkerParcels>(job, *this, t));
}

WorkerParcels& current_worker() {
  void** word = fabric::acting_word<WorkerParcels>();
  if (word != nullptr && *word != nullptr) [[likely]]
    return *static_cast<WorkerParcels*>(*word);
  if (word == nullptr || this_thread().is_service()) [[unlikely]]
    throw Error(Errc::invalid_argument,
                "rdmx::async and post are called from worker threads (inside Job::run or on the thread that "
                "made the Job); other threads can use the send-based rdmx::call");
  *word = &fabric::layer<Parcels>().worker(this_thread().thread);
  return *static_cast<WorkerParcels*>(*word);
}

namespace {

// The Job's memory for RmaVector and RmaValue when neither the container
// nor the program names any (RmaMemory::resolve): the calling worker's
// landing memory, registered in its NUMA zone's arena and destroyed with the
// Parcels layer, after the job is left and before the arenas. The service
// thread takes worker 0's.
serial::RmaMemory* job_rma_memory() {
  ThreadId me;
  try {
    me = this_thread();
  } catch (const Error&) {
    return nullptr;  // no Job, or a thread that is not one of its threads
  }
  return &fabric::layer<Parcels>().worker(me.is_service() ? 0 : me.thread).landing;
}
[[maybe_unused]] const bool job_rma_memory_installed = (serial::RmaMemory::set_default_source(&job_rma_memory), true);

}  // namespace

ArchiveLease::ArchiveLease() : worker_(&current_worker()) { archive_ = static_cast<WorkerParcels*>(worker_)->take_archive(); }
ArchiveLease::~ArchiveLease() {
  if (archive_) static_cast<WorkerParcels*>(worker_)->give_archive(std::move(archive_));
}

Stats stats() { return current_worker().stats; }

ProgressHook progress_hook() noexcept {
  return {[](void*) { return rdmx::progress() != 0; }, nullptr};
}

}  // namespace rdmx::parcel

// rdmx links every program against this object file (src/CMakeLists.txt
// names this symbol as undefined): the default memory for RmaVector, which
// the initializer above installs, must be there in a program that makes no
// action, which a static library's link would otherwise leave out.
extern "C" const int rdmx_action_layer_linked = 1;
