#include "rdmx/fabric/bootstrap.hpp"

#include <pmix.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <thread>

#include "rdmx/core/tsan.hpp"
#include "rdmx/core/error.hpp"

namespace rdmx::fabric {
namespace {

class SingleProcess final : public Bootstrap {
 public:
  std::uint32_t rank() const override { return 0; }
  std::uint32_t size() const override { return 1; }
  std::string launcher() const override { return "none"; }
  std::vector<std::vector<std::byte>> allgather(std::span<const std::byte> mine, const Poll&) override {
    return {std::vector<std::byte>(mine.begin(), mine.end())};
  }
  bool barrier(const Poll&) override { return true; }
};

[[noreturn]] void fail(const char* what, pmix_status_t rc) {
  throw Error(Errc::bootstrap, std::string("PMIx ") + what + " failed: " + PMIx_Error_string(rc));
}

class Pmix final : public Bootstrap {
 public:
  explicit Pmix(const pmix_proc_t& me) : me_(me) {
    pmix_proc_t job;
    PMIX_PROC_CONSTRUCT(&job);
    PMIX_LOAD_PROCID(&job, me_.nspace, PMIX_RANK_WILDCARD);
    pmix_value_t* value = nullptr;
    pmix_status_t rc = PMIx_Get(&job, PMIX_JOB_SIZE, nullptr, 0, &value);
    if (rc != PMIX_SUCCESS) fail("Get(job size)", rc);
    size_ = value->data.uint32;
    PMIX_VALUE_RELEASE(value);
  }
  ~Pmix() override { PMIx_Finalize(nullptr, 0); }

  std::uint32_t rank() const override { return me_.rank; }
  std::uint32_t size() const override { return size_; }
  std::string launcher() const override { return "pmix"; }

  std::vector<std::vector<std::byte>> allgather(std::span<const std::byte> mine, const Poll& poll) override {
    // A fresh key per round: PMIx keeps every value published in the job.
    std::string key = "rdmx.ag." + std::to_string(round_++);
    pmix_value_t value;
    PMIX_VALUE_CONSTRUCT(&value);
    value.type = PMIX_BYTE_OBJECT;
    value.data.bo.bytes = const_cast<char*>(reinterpret_cast<const char*>(mine.data()));
    value.data.bo.size = mine.size();
    pmix_status_t rc = PMIx_Put(PMIX_GLOBAL, key.c_str(), &value);
    if (rc != PMIX_SUCCESS) fail("Put", rc);
    if ((rc = PMIx_Commit()) != PMIX_SUCCESS) fail("Commit", rc);
    if (!fence(true, poll)) throw Error(Errc::peer_failed, "allgather abandoned: a process of the job has failed");
    std::vector<std::vector<std::byte>> all(size_);
    for (std::uint32_t r = 0; r < size_; ++r) {
      pmix_proc_t peer;
      PMIX_PROC_CONSTRUCT(&peer);
      PMIX_LOAD_PROCID(&peer, me_.nspace, r);
      pmix_value_t* got = nullptr;
      rc = PMIx_Get(&peer, key.c_str(), nullptr, 0, &got);
      if (rc != PMIX_SUCCESS) fail("Get", rc);
      auto* bytes = reinterpret_cast<const std::byte*>(got->data.bo.bytes);
      all[r].assign(bytes, bytes + got->data.bo.size);
      PMIX_VALUE_RELEASE(got);
    }
    return all;
  }

  bool barrier(const Poll& poll) override { return fence(false, poll); }

 private:
  // The launcher's fence, non-blocking so that `poll` can keep serving calls.
  bool fence(bool collect, const Poll& poll) {
    pmix_info_t info;
    PMIX_INFO_CONSTRUCT(&info);
    bool yes = true;
    PMIX_INFO_LOAD(&info, PMIX_COLLECT_DATA, &yes, PMIX_BOOL);
    message_sent();
    // Shared with the callback, which may run after we gave up.
    auto done = std::make_shared<std::atomic<int>>(0);
    auto* keep = new std::shared_ptr<std::atomic<int>>(done);
    pmix_status_t rc = PMIx_Fence_nb(nullptr, 0, collect ? &info : nullptr, collect ? 1 : 0, [](pmix_status_t status, void* arg) {
      std::unique_ptr<std::shared_ptr<std::atomic<int>>> flag(static_cast<std::shared_ptr<std::atomic<int>>*>(arg));
      (*flag)->store(status == PMIX_SUCCESS ? 1 : 2);
    }, keep);
    PMIX_INFO_DESTRUCT(&info);
    if (rc != PMIX_SUCCESS) {
      delete keep;
      fail("Fence_nb", rc);
    }
    while (done->load() == 0) {
      if (poll ? poll() : false) return false;  // `keep` is freed by the callback if it ever runs
      std::this_thread::sleep_for(std::chrono::microseconds(poll ? 20 : 200));
    }
    if (done->load() != 1) throw Error(Errc::bootstrap, "PMIx fence failed");
    message_received();
    return true;
  }

  pmix_proc_t me_;
  std::uint32_t size_ = 1;
  std::uint64_t round_ = 0;
};

// A launcher started us as one of several processes, but without a PMIx
// server to bootstrap through: rdmx would otherwise take each process for a
// one-process job of its own, and a job of N would silently run N times.
// Returns what to tell the user, or nothing.
std::optional<std::string> foreign_launcher() {
  auto number = [](const char* name) -> long {
    const char* v = std::getenv(name);
    return v ? std::strtol(v, nullptr, 10) : 0;
  };
  // PMI-1 and PMI-2 (srun --mpi=pmi2, MPICH's Hydra) give PMI_FD or PMI_PORT
  // and PMI_RANK/PMI_SIZE: a different protocol, which rdmx does not speak.
  // A job of one such process is a one-process job all the same.
  const bool pmi = std::getenv("PMI_FD") != nullptr || std::getenv("PMI_PORT") != nullptr;
  if (number("PMI_SIZE") > 1 || (pmi && std::getenv("PMI_SIZE") == nullptr))
    return "started by a PMI-1/PMI-2 launcher (srun --mpi=pmi2?), but rdmx bootstraps through PMIx only: "
           "use srun --mpi=pmix or mpirun";
  // srun with --mpi=none (Slurm's default MpiDefault) gives no PMI at all.
  if (number("SLURM_STEP_NUM_TASKS") > 1)
    return "started by srun as one of " + std::to_string(number("SLURM_STEP_NUM_TASKS")) +
           " tasks without PMIx (srun --mpi=none?): use srun --mpi=pmix";
  return std::nullopt;
}

}  // namespace

std::unique_ptr<Bootstrap> Bootstrap::create() {
  // PMIx is only there when a launcher started us; PMIX_NAMESPACE tells.
  if (std::getenv("PMIX_NAMESPACE") == nullptr) {
    if (auto why = foreign_launcher()) throw Error(Errc::bootstrap, *why);
    return std::make_unique<SingleProcess>();
  }
  pmix_proc_t me;
  pmix_status_t rc = PMIx_Init(&me, nullptr, 0);
  if (rc != PMIX_SUCCESS) fail("Init (started by a launcher without a PMIx server?)", rc);
  return std::make_unique<Pmix>(me);
}

}  // namespace rdmx::fabric
