// The fabric's extension point (fabric/layer.hpp), as a layer above it uses
// it: one instance per process, polled by every wait of the worker acting,
// quieted by rdmx::quiet() for the worker calling it, flushed and asked whether it has settled while the job is left, per-worker
// words that follow the worker, and destroyed after leaving. Own main: what
// happens at teardown is checked after ~Job.
#include <atomic>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "rdmx/fabric/call.hpp"
#include "rdmx/fabric/collective.hpp"
#include "rdmx/fabric/job.hpp"
#include "rdmx/fabric/layer.hpp"
#include "rdmx/fabric/quiet.hpp"

using namespace rdmx;

namespace {
int failures = 0;
void check(bool ok, const std::string& what) {
  if (ok) return;
  std::fprintf(stderr, "fabric layer test: FAILED: %s\n", what.c_str());
  ++failures;
}

std::atomic<int> constructed{0}, destroyed{0};
std::atomic<int> flushed{0}, settle_asks{0};
std::atomic<Job*> made_for{nullptr};
std::atomic<int> bad_worker{0};  // a hook called with a worker index out of range

class Recorder final : public fabric::Layer {
 public:
  explicit Recorder(Job& job) : workers_(job.threads_per_process() + job.helpers_per_process()) {
    made_for.store(&job);
    constructed.fetch_add(1);
  }
  ~Recorder() override { destroyed.fetch_add(1); }
  std::size_t poll(std::uint32_t worker) override {
    if (worker >= workers_) bad_worker.fetch_add(1);
    else polls_[worker].fetch_add(1, std::memory_order_relaxed);
    return 0;
  }
  void flush(std::uint32_t worker) override {
    if (worker >= workers_) bad_worker.fetch_add(1);
    flushed.fetch_add(1);
  }
  // Leaving goes on until every worker has been asked three times: the
  // rounds must not end while a layer says it still waits on the network.
  bool settled(std::uint32_t worker) const override {
    if (worker >= workers_) bad_worker.fetch_add(1);
    return settle_asks.fetch_add(1) >= 3 * static_cast<int>(workers_);
  }
  void quiet(std::uint32_t worker) override {
    if (worker >= workers_) bad_worker.fetch_add(1);
    else quiets_[worker].fetch_add(1, std::memory_order_relaxed);
  }
  std::uint64_t polls(std::uint32_t worker) const { return polls_[worker].load(); }
  std::uint64_t quiets(std::uint32_t worker) const { return quiets_[worker].load(); }

 private:
  std::uint32_t workers_;
  std::atomic<std::uint64_t> polls_[64] = {};
  std::atomic<std::uint64_t> quiets_[64] = {};
};

struct WordTag;  // names this test's per-worker word
}  // namespace

int main(int argc, char** argv) {
  {
    Job job(argc, argv, JobOptions{.threads = 2});
    check(fabric::acting_word<WordTag>() != nullptr, "the thread that made the Job acts as worker 0");
    Recorder& mine = fabric::layer<Recorder>();
    check(made_for.load() == &job, "the layer is made for the current job");
    std::vector<void*> words(job.threads_per_process());
    job.run([&](ThreadId me) {
      // One instance per process, from any thread.
      check(&fabric::layer<Recorder>(job) == &mine, "every thread gets the same instance");
      void** word = fabric::acting_word<WordTag>();
      check(word != nullptr, "a worker thread has per-worker words");
      if (word == nullptr) return;
      check(*word == nullptr, "a word starts null");
      *word = &words[me.thread];
      words[me.thread] = word;
      // A wait polls the layer as this worker.
      const std::uint64_t before = mine.polls(me.thread);
      rdmx::barrier();
      Synchronizer sync;
      call(ThreadId{(me.process + 1) % job.size(), me.thread}, [] {}, when_run(sync));
      sync.wait();
      check(mine.polls(me.thread) > before, "waiting polls the layer for worker " + std::to_string(me.thread));
      // quiet() asks the layer, as this worker, once per call.
      const std::uint64_t quieted = mine.quiets(me.thread);
      rdmx::quiet();
      rdmx::quiet();
      check(mine.quiets(me.thread) == quieted + 2,
            "quiet() asks the layer for worker " + std::to_string(me.thread) + " once per call");
    });
    // The words belong to the workers: each is distinct and still holds its value.
    for (std::size_t t = 0; t < words.size(); ++t)
      check(words[t] != nullptr && *static_cast<void**>(words[t]) == &words[t], "worker " + std::to_string(t) + "'s word kept");
    check(words.size() < 2 || words[0] != words[1], "workers have distinct words");
    std::thread outsider([] { check(fabric::acting_word<WordTag>() == nullptr, "a thread outside the job has no words"); });
    outsider.join();
    check(constructed.load() == 1, "made once, made " + std::to_string(constructed.load()));
    check(destroyed.load() == 0, "alive until the job is left");
  }
  check(destroyed.load() == 1, "destroyed once when the job is left");
  check(flushed.load() >= 2, "flushed for every worker while leaving, got " + std::to_string(flushed.load()));
  check(settle_asks.load() >= 6, "leaving asked until settled, asked " + std::to_string(settle_asks.load()));
  check(bad_worker.load() == 0, "hooks get worker indices of this process");
  if (failures == 0) std::printf("fabric layer test: ok\n");
  return failures == 0 ? 0 : 1;
}
