// The transfer layer end to end inside one process: a Context, worker A
// (the sender, driven by the test thread) and worker B (the target, driven by
// a helper thread so that TCP, where UCX emulates one-sided operations with
// messages, works too), an Endpoint A -> B, a UCX-allocated MemoryRegion and
// its RemoteKey unpacked on the endpoint.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <numeric>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "rdmx/core/error.hpp"
#include "rdmx/core/future.hpp"
#include "rdmx/transfer/context.hpp"
#include "rdmx/transfer/endpoint.hpp"
#include "rdmx/transfer/flush_epoch.hpp"
#include "rdmx/transfer/memory_region.hpp"
#include "rdmx/transfer/transmitter.hpp"
#include "rdmx/transfer/worker.hpp"

namespace rdmx::transfer {
namespace {

using Clock = std::chrono::steady_clock;
constexpr std::size_t region_bytes = 4 << 20;

std::vector<std::uint8_t> pattern(std::size_t n, unsigned seed) {
  std::vector<std::uint8_t> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<std::uint8_t>(i * 131 + seed * 7 + (i >> 8));
  return v;
}

std::string tls() {
  const char* t = std::getenv("UCX_TLS");
  return t != nullptr ? t : "";
}

template <class F>
void expect_errc(Errc code, F&& f, const char* what) {
  try {
    f();
    ADD_FAILURE() << what << " did not throw";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), code) << what << " threw " << to_string(e.code()) << ": " << e.what();
  }
}

class Loopback : public ::testing::Test {
 protected:
  void SetUp() override {
    target_ = std::thread([this] {
      while (!stop_.load(std::memory_order_acquire)) {
        if (paused_.load(std::memory_order_acquire)) {  // over TCP, one-sided operations then wait
          std::this_thread::yield();
          continue;
        }
        const bool busy = b_.progress();
        rounds_.fetch_add(1, std::memory_order_release);
        if (!busy) std::this_thread::yield();
      }
    });
    ep_ = std::make_unique<Endpoint>(a_, b_.address(), "worker B");
    rkey_ = RemoteKey(*ep_, region_.packed_rkey());
    // One round trip finishes UCX's connection handshake (wire-up). Over TCP,
    // destroying worker B while its wire-up reply is still queued trips an
    // assertion inside UCX 1.13 (ucp_request_send_state_ff, "got REP message").
    Transmitter(*ep_, 64).fetch_add(at(region_bytes - 8), 0).get();
  }
  void TearDown() override {
    if (!ep_->failed()) Transmitter(*ep_, 64).flush();
    rkey_ = RemoteKey{};
    ep_.reset();
    stop_.store(true, std::memory_order_release);
    target_.join();
  }

  RemoteAddress at(std::size_t offset) const {
    return {reinterpret_cast<std::uint64_t>(region_.data()) + offset, rkey_.get()};
  }
  // Where UCX emulates an operation, worker B's thread writes the target.
  // UCX orders that write before the completion A observed, but inside
  // uninstrumented code; waiting for B's loop to go round once more makes the
  // order visible to ThreadSanitizer too.
  void sync_with_target() const {
    const std::uint64_t seen = rounds_.load(std::memory_order_acquire);
    while (rounds_.load(std::memory_order_acquire) < seen + 2) std::this_thread::yield();
  }
  std::uint64_t word(std::size_t offset) const {
    sync_with_target();
    std::uint64_t v;
    std::memcpy(&v, region_.data() + offset, sizeof v);
    return v;
  }
  void set_word(std::size_t offset, std::uint64_t v) { std::memcpy(region_.data() + offset, &v, sizeof v); }
  // Progress A until `done` holds; false after 10 s.
  template <class Pred>
  bool progress_until(Transmitter& tx, Pred&& done) {
    const auto deadline = Clock::now() + std::chrono::seconds(10);
    while (!done()) {
      if (Clock::now() > deadline) return false;
      tx.progress();
    }
    return true;
  }

  Context ctx_;
  Worker a_{ctx_};
  Worker b_{ctx_};
  MemoryRegion region_{ctx_, region_bytes};
  std::unique_ptr<Endpoint> ep_;
  RemoteKey rkey_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> paused_{false};  // worker B's thread stops progressing it
  std::atomic<std::uint64_t> rounds_{0};  // iterations of worker B's progress loop
  std::thread target_;
};

// ---- handles ----

TEST_F(Loopback, HandlesAreLive) {
  EXPECT_NE(ctx_.get(), nullptr);
  EXPECT_FALSE(a_.address().empty());
  EXPECT_NE(a_.address(), b_.address());
  EXPECT_EQ(&a_.context(), &ctx_);
  EXPECT_NE(ep_->get(), nullptr);
  EXPECT_EQ(&ep_->worker(), &a_);
  EXPECT_EQ(ep_->peer_name(), "worker B");
  EXPECT_FALSE(ep_->failed());
  EXPECT_TRUE(region_.allocated_by_ucx());
  EXPECT_EQ(region_.size(), region_bytes);
  EXPECT_NE(region_.data(), nullptr);
  EXPECT_FALSE(region_.packed_rkey().empty());
  EXPECT_TRUE(static_cast<bool>(rkey_));
  if (tls().rfind("tcp", 0) == 0) EXPECT_TRUE(ep_->detects_failure()) << "UCX reports TCP peer failures";
  // The suite runs with UCX_TLS=tcp or posix,cma,self: one-sided operations
  // are emulated over the first only.
  EXPECT_EQ(ep_->rma_emulated(), tls().rfind("tcp", 0) == 0) << "UCX_TLS=" << tls();
}

// The lanes by use, as RDMX_LOG=info shows them per peer: over TCP, active
// messages on a TCP lane and atomics done in software with them; over
// shared memory, no TCP at all.
TEST_F(Loopback, TransportsNameEachUse) {
  const std::string text = ep_->transports();
  EXPECT_TRUE(text.starts_with("rma ")) << text;
  ASSERT_NE(text.find(", am "), std::string::npos) << text;
  ASSERT_NE(text.find(", atomics "), std::string::npos) << text;
  const std::string am = text.substr(text.find(", am ") + 5, text.find(", atomics ") - text.find(", am ") - 5);
  if (tls().rfind("tcp", 0) == 0) {
    EXPECT_TRUE(am.starts_with("tcp/")) << text;
    EXPECT_TRUE(text.ends_with(", atomics over am")) << text;
  } else {
    EXPECT_EQ(text.find("tcp/"), std::string::npos) << text;
    EXPECT_NE(am, "over am") << text;
  }
}

TEST_F(Loopback, RemoteKeyMovesOwnership) {
  RemoteKey k(*ep_, region_.packed_rkey());
  ucp_rkey_h h = k.get();
  ASSERT_NE(h, nullptr);
  RemoteKey m(std::move(k));
  EXPECT_FALSE(static_cast<bool>(k));
  EXPECT_EQ(m.get(), h);
  RemoteKey n;
  EXPECT_FALSE(static_cast<bool>(n));
  n = std::move(m);
  EXPECT_EQ(n.get(), h);
  EXPECT_FALSE(static_cast<bool>(m));
}

TEST(MemoryRegion, RejectsEmptyRegions) {
  Context ctx;
  expect_errc(Errc::invalid_argument, [&] { MemoryRegion r(ctx, 0); }, "MemoryRegion(ctx, 0)");
  std::uint64_t word = 0;
  expect_errc(Errc::invalid_argument, [&] { MemoryRegion r(ctx, &word, 0); }, "MemoryRegion(ctx, p, 0)");
}

TEST(MemoryRegion, ContainsChecksBothEnds) {
  Context ctx;
  MemoryRegion r(ctx, 4096);
  std::byte* b = r.data();
  EXPECT_TRUE(r.contains(b, 4096));
  EXPECT_TRUE(r.contains(b + 4095, 1));
  EXPECT_TRUE(r.contains(b + 4096, 0));
  EXPECT_FALSE(r.contains(b + 4095, 2));
  EXPECT_FALSE(r.contains(b + 1, 4096));
  EXPECT_FALSE(r.contains(b - 1, 1));
  EXPECT_FALSE(r.contains(b, 4097));
  EXPECT_FALSE(r.contains(b + 8, SIZE_MAX));
}

TEST_F(Loopback, WorkerSignalWakesWait) {
  while (a_.progress()) {
  }
  a_.signal();
  const auto t0 = Clock::now();
  EXPECT_TRUE(a_.wait(5000)) << "a signalled worker must wake (does it have a wake-up fd?)";
  EXPECT_LT(Clock::now() - t0, std::chrono::seconds(4));
}

// ---- futures ----

TEST_F(Loopback, PutThenGetRoundTripsAtSeveralSizes) {
  Transmitter tx(*ep_, 64);
  unsigned seed = 0;
  for (std::size_t size : {std::size_t{1}, std::size_t{8}, std::size_t{63}, std::size_t{64}, std::size_t{4096},
                           std::size_t{65536}, std::size_t{1} << 20}) {
    for (std::size_t offset : {std::size_t{0}, std::size_t{3}}) {
      SCOPED_TRACE(std::to_string(size) + " bytes at offset " + std::to_string(offset));
      auto out = pattern(size, ++seed);
      tx.put(out.data(), size, at(offset)).get();
      // A put's future says the source is reusable; remote visibility is what flush() guarantees.
      tx.flush();
      sync_with_target();
      EXPECT_EQ(std::memcmp(region_.data() + offset, out.data(), size), 0);
      std::vector<std::uint8_t> in(size, 0);
      tx.get(in.data(), size, at(offset)).get();
      EXPECT_EQ(in, out);
    }
  }
}

TEST_F(Loopback, ManyOutstandingGetsAllComplete) {
  Transmitter tx(*ep_, 64);
  auto src = pattern(64 * 32, 5);
  std::memcpy(region_.data(), src.data(), src.size());
  std::vector<std::uint8_t> in(src.size(), 0);
  std::vector<Future<void>> gets;
  for (std::size_t i = 0; i < 32; ++i) gets.push_back(tx.get(in.data() + i * 64, 64, at(i * 64)));
  for (auto& g : gets) g.get();
  EXPECT_EQ(in, src);
}

TEST_F(Loopback, FetchAddReturnsTheOldValue) {
  Transmitter tx(*ep_, 64);
  set_word(64, 5);
  EXPECT_EQ(tx.fetch_add(at(64), 7).get(), 5u);
  EXPECT_EQ(word(64), 12u);
  for (std::uint64_t i = 0; i < 10; ++i) EXPECT_EQ(tx.fetch_add(at(64), 1).get(), 12 + i);
  EXPECT_EQ(word(64), 22u);
  // Outstanding together: each sees a distinct old value.
  std::vector<Future<std::uint64_t>> adds;
  for (int i = 0; i < 100; ++i) adds.push_back(tx.fetch_add(at(64), 1));
  std::set<std::uint64_t> olds;
  for (auto& f : adds) olds.insert(f.get());
  EXPECT_EQ(olds.size(), 100u);
  EXPECT_EQ(*olds.begin(), 22u);
  EXPECT_EQ(*olds.rbegin(), 121u);
  EXPECT_EQ(word(64), 122u);
  EXPECT_EQ(tx.fetch_add(at(64), ~std::uint64_t{0}).get(), 122u) << "adding 2^64-1 wraps to a decrement";
  EXPECT_EQ(word(64), 121u);
}

TEST_F(Loopback, CompareSwapSwapsWhenExpectedMatches) {
  Transmitter tx(*ep_, 64);
  set_word(128, 10);
  EXPECT_EQ(tx.compare_swap(at(128), 10, 20).get(), 10u);
  EXPECT_EQ(word(128), 20u);
}

TEST_F(Loopback, CompareSwapLeavesTheWordWhenExpectedDiffers) {
  Transmitter tx(*ep_, 64);
  set_word(128, 20);
  EXPECT_EQ(tx.compare_swap(at(128), 10, 30).get(), 20u) << "a failed swap returns the current value";
  EXPECT_EQ(word(128), 20u);
  // Swaps in sequence: only the one expecting the current value wins.
  EXPECT_EQ(tx.compare_swap(at(128), 20, 0).get(), 20u);
  EXPECT_EQ(tx.compare_swap(at(128), 20, 1).get(), 0u);
  EXPECT_EQ(word(128), 0u);
}

// ---- blocking operations: no future, only the transport driven ----

TEST_F(Loopback, BlockingOperationsReturnWhatTheFuturesWould) {
  Transmitter tx(*ep_, 64);
  unsigned seed = 100;
  for (std::size_t size : {std::size_t{1}, std::size_t{8}, std::size_t{4096}, std::size_t{65536}}) {
    SCOPED_TRACE(std::to_string(size) + " bytes");
    auto out = pattern(size, ++seed);
    std::memcpy(region_.data() + 1024, out.data(), size);
    std::vector<std::uint8_t> in(size, 0);
    tx.blocking_get(in.data(), size, at(1024));
    EXPECT_EQ(in, out);
  }
  set_word(64, 5);
  EXPECT_EQ(tx.blocking_fetch_add(at(64), 7), 5u);
  EXPECT_EQ(tx.blocking_fetch_add(at(64), 0), 12u) << "adding 0 reads the word";
  EXPECT_EQ(tx.blocking_fetch_add(at(64), ~std::uint64_t{0}), 12u) << "adding 2^64-1 wraps to a decrement";
  EXPECT_EQ(word(64), 11u);
  set_word(128, 10);
  EXPECT_EQ(tx.blocking_compare_swap(at(128), 10, 20), 10u);
  EXPECT_EQ(word(128), 20u);
  EXPECT_EQ(tx.blocking_compare_swap(at(128), 10, 30), 20u) << "a failed swap returns the current value";
  EXPECT_EQ(word(128), 20u);
}

// The blocking operations drive the transport hook alone: an owner whose
// progress hook runs other work (received calls) keeps it out of them.
TEST_F(Loopback, BlockingOperationsDriveOnlyTheTransportHook) {
  struct Counts {
    Worker* worker;
    std::atomic<int> progress{0}, transport{0};
  } counts{&a_};
  const ProgressHook progress{[](void* c) {
    auto* n = static_cast<Counts*>(c);
    n->progress.fetch_add(1);
    return n->worker->progress();
  }, &counts};
  const ProgressHook transport{[](void* c) {
    auto* n = static_cast<Counts*>(c);
    n->transport.fetch_add(1);
    return n->worker->progress();
  }, &counts};
  Transmitter tx(*ep_, 64, progress, transport);
  set_word(64, 1);
  std::uint64_t v = 0;
  for (int i = 0; i < 50; ++i) {
    EXPECT_EQ(tx.blocking_fetch_add(at(64), 1), 1u + i);
    EXPECT_EQ(tx.blocking_compare_swap(at(64), 2u + i, 2u + i), 2u + i);
    tx.blocking_get(&v, 8, at(64));
    EXPECT_EQ(v, 2u + i);
  }
  EXPECT_EQ(counts.progress.load(), 0) << "a blocking operation drove the progress hook";
  // Over TCP the target applies each operation when it progresses, so the
  // caller waits (over shared memory they are done inside the call).
  if (ep_->rma_emulated()) EXPECT_GT(counts.transport.load(), 0);
  // The future-returning operations still wait with the progress hook.
  tx.fetch_add(at(64), 0).get();
  tx.flush();
  if (ep_->rma_emulated()) EXPECT_GT(counts.progress.load(), 0);
}

// A failure marked while a blocking operation waits ends the wait with
// peer_failed (a dead peer's operation would never complete), once UCX has
// given the operation's buffers back.
TEST_F(Loopback, BlockingWaitEndsWhenThePeerFailsMeanwhile) {
  if (!ep_->rma_emulated()) GTEST_SKIP() << "over shared memory one-sided operations complete inside the call";
  Transmitter tx(*ep_, 64);
  set_word(64, 0);
  paused_.store(true, std::memory_order_release);  // the operation cannot complete now
  std::thread failer([this] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    ep_->mark_failed(UCS_ERR_CONNECTION_RESET);
    // What a dead peer's connection does in UCX: the operation ends.
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    paused_.store(false, std::memory_order_release);
  });
  const auto t0 = Clock::now();
  expect_errc(Errc::peer_failed, [&] { tx.blocking_fetch_add(at(64), 1); }, "blocking_fetch_add");
  failer.join();
  EXPECT_LT(Clock::now() - t0, std::chrono::seconds(30));
  EXPECT_GE(Clock::now() - t0, std::chrono::milliseconds(100)) << "it waited for the failure";
}

// ---- selective signaling: post_put / post_get with EpochTags ----

TEST_F(Loopback, PostedTagsAreFreeOnlyAfterTheirEpochsFlush) {
  Transmitter tx(*ep_, 4);
  ASSERT_EQ(tx.u_max(), 4u);
  std::vector<std::uint64_t> values(8);
  std::iota(values.begin(), values.end(), 100);
  std::vector<EpochTag> tags;
  for (int i = 0; i < 3; ++i) tags.push_back(tx.post_put(&values[i], 8, at(i * 8)));
  for (auto& t : tags) {
    EXPECT_EQ(t.epoch, &tx.epoch());
    EXPECT_EQ(t.value, 1u);
  }
  // No flush has been issued: progress cannot free them.
  for (int i = 0; i < 1000; ++i) tx.progress();
  EXPECT_EQ(tx.epoch().current(), 1u);
  EXPECT_EQ(tx.epoch().completed(), 0u);
  for (auto& t : tags) EXPECT_FALSE(t.is_free());

  // The 4th operation is tagged with epoch 1 too, then closes it with a flush.
  tags.push_back(tx.post_put(&values[3], 8, at(3 * 8)));
  EXPECT_EQ(tags[3].value, 1u);
  EXPECT_EQ(tx.epoch().current(), 2u);
  EXPECT_TRUE(progress_until(tx, [&] { return tags[3].is_free(); })) << "the flush of epoch 1 never completed";
  for (auto& t : tags) EXPECT_TRUE(t.is_free());

  // The 5th belongs to epoch 2, which nothing has closed yet.
  tags.push_back(tx.post_put(&values[4], 8, at(4 * 8)));
  EXPECT_EQ(tags[4].value, 2u);
  for (int i = 0; i < 1000; ++i) tx.progress();
  EXPECT_FALSE(tags[4].is_free());
  tx.flush();
  EXPECT_TRUE(tags[4].is_free());
  for (int i = 0; i < 5; ++i) EXPECT_EQ(word(i * 8), values[i]) << i;
}

TEST_F(Loopback, FlushMakesEveryPostedPutVisible) {
  Transmitter tx(*ep_, 1000);  // no automatic flush in this test
  constexpr int n = 500;
  std::vector<std::uint64_t> values(n);
  std::iota(values.begin(), values.end(), 1000);
  EpochTag last;
  for (int i = 0; i < n; ++i) last = tx.post_put(&values[i], 8, at(i * 8));
  EXPECT_EQ(last.value, 1u);
  EXPECT_EQ(tx.epoch().completed(), 0u);
  tx.flush();
  EXPECT_EQ(tx.epoch().completed(), 1u);
  EXPECT_EQ(tx.epoch().current(), 2u);
  EXPECT_TRUE(last.is_free());
  for (int i = 0; i < n; ++i) ASSERT_EQ(word(i * 8), values[i]) << i;
}

TEST_F(Loopback, StartFlushClosesTheEpochWithoutWaiting) {
  Transmitter tx(*ep_, 1000);
  std::uint64_t v = 77;
  EpochTag tag = tx.post_put(&v, 8, at(0));
  EXPECT_EQ(tag.value, 1u);
  tx.start_flush();
  EXPECT_EQ(tx.epoch().current(), 2u);
  EXPECT_TRUE(progress_until(tx, [&] { return tag.is_free(); }));
  EXPECT_EQ(word(0), 77u);
  EpochTag next = tx.post_put(&v, 8, at(8));
  EXPECT_EQ(next.value, 2u);
  tx.flush();
}

// A sender recycling a small ring of source slots by their tags (what
// CircularAllocator automates). If a tag were free before the put had read
// its source, later values would overwrite earlier ones in flight.
TEST_F(Loopback, SourceSlotsRecycledByTagDeliverEveryValue) {
  Transmitter tx(*ep_, 4);
  constexpr int n = 2000;
  constexpr int slots = 8;
  std::vector<std::uint64_t> source(slots, 0);
  std::vector<EpochTag> slot_tag(slots);
  for (int i = 0; i < n; ++i) {
    const int s = i % slots;
    ASSERT_TRUE(progress_until(tx, [&] { return slot_tag[s].is_free(); })) << "slot " << s << " never freed at " << i;
    source[s] = 0xA000000000000000ull + static_cast<std::uint64_t>(i);
    slot_tag[s] = tx.post_put(&source[s], 8, at(static_cast<std::size_t>(i) * 8));
    EXPECT_EQ(slot_tag[s].value, static_cast<std::uint64_t>(i / 4 + 1)) << i;
  }
  tx.flush();
  EXPECT_GE(tx.epoch().completed(), static_cast<std::uint64_t>(n / 4 + 1));
  for (int i = 0; i < n; ++i) ASSERT_EQ(word(static_cast<std::size_t>(i) * 8), 0xA000000000000000ull + i) << i;
}

TEST_F(Loopback, PostedGetsLandAfterFlush) {
  Transmitter tx(*ep_, 16);
  auto src = pattern(64 * 100, 9);
  std::memcpy(region_.data() + 4096, src.data(), src.size());
  std::vector<std::uint8_t> in(src.size(), 0);
  std::vector<EpochTag> tags;
  for (std::size_t i = 0; i < 100; ++i) tags.push_back(tx.post_get(in.data() + i * 64, 64, at(4096 + i * 64)));
  tx.flush();
  for (auto& t : tags) EXPECT_TRUE(t.is_free());
  EXPECT_EQ(in, src);
}

TEST_F(Loopback, CallerRegisteredMemoryIsReachable) {
  std::vector<std::uint64_t> memory(512, 0);
  MemoryRegion mine(ctx_, memory.data(), memory.size() * sizeof(std::uint64_t));
  EXPECT_FALSE(mine.allocated_by_ucx());
  EXPECT_EQ(static_cast<void*>(mine.data()), static_cast<void*>(memory.data()));
  RemoteKey key(*ep_, mine.packed_rkey());
  const auto base = reinterpret_cast<std::uint64_t>(memory.data());
  Transmitter tx(*ep_, 64);
  std::vector<std::uint64_t> values(512);
  std::iota(values.begin(), values.end(), 3);
  tx.put(values.data(), 256 * 8, RemoteAddress{base, key.get()}).get();
  for (std::size_t i = 256; i < 512; ++i) tx.post_put(&values[i], 8, RemoteAddress{base + i * 8, key.get()});
  tx.flush();
  sync_with_target();
  EXPECT_EQ(memory, values);
  std::vector<std::uint64_t> back(512, 0);
  tx.get(back.data(), back.size() * 8, RemoteAddress{base, key.get()}).get();
  EXPECT_EQ(back, values);
  sync_with_target();  // B's thread read `memory` to answer the get: order that before it dies
}

TEST_F(Loopback, DefaultUMaxIs64UnlessConfigured) {
  Transmitter tx(*ep_);
  if (std::getenv("RDMX_U_MAX") == nullptr) EXPECT_EQ(tx.u_max(), 64u);
  EXPECT_GE(tx.u_max(), 1u);
  Transmitter small(*ep_, 3);
  EXPECT_EQ(small.u_max(), 3u);
}

// ---- failure ----

TEST_F(Loopback, MarkFailedMakesLaterOperationsThrowPeerFailed) {
  Transmitter tx(*ep_, 4);
  set_word(0, 0x5eed);  // UCX-allocated memory is not zeroed (heap-backed over TCP)
  int handler_calls = 0;
  ucs_status_t seen = UCS_OK;
  ep_->on_failure([&](ucs_status_t s) {
    ++handler_calls;
    seen = s;
  });
  ep_->mark_failed(UCS_ERR_ENDPOINT_TIMEOUT);
  EXPECT_TRUE(ep_->failed());
  EXPECT_EQ(ep_->failure(), UCS_ERR_ENDPOINT_TIMEOUT);
  EXPECT_EQ(handler_calls, 1);
  EXPECT_EQ(seen, UCS_ERR_ENDPOINT_TIMEOUT);
  ep_->mark_failed(UCS_ERR_CONNECTION_RESET);
  EXPECT_EQ(handler_calls, 1) << "the failure handler runs once";
  EXPECT_EQ(ep_->failure(), UCS_ERR_ENDPOINT_TIMEOUT) << "the first failure is kept";

  std::uint64_t v = 1;
  expect_errc(Errc::peer_failed, [&] { ep_->check_alive(); }, "check_alive");
  // Fire-and-forget operations learn of the failure when their epoch's flush
  // starts (within u_max operations) and in every wait, not per operation.
  expect_errc(Errc::peer_failed, [&] { tx.start_flush(); }, "start_flush");
  expect_errc(Errc::peer_failed, [&] { tx.flush(); }, "flush");
  expect_errc(Errc::peer_failed, [&] { tx.progress(); }, "progress");
  expect_errc(Errc::peer_failed, [&] {
    for (unsigned i = 0; i < tx.u_max(); ++i) tx.post_put(&v, 8, at(8));
  }, "u_max post_puts");
  expect_errc(Errc::peer_failed, [&] {
    for (unsigned i = 0; i < tx.u_max(); ++i) tx.post_get(&v, 8, at(8));
  }, "u_max post_gets");
  expect_errc(Errc::peer_failed, [&] { tx.put(&v, 8, at(0)); }, "put");
  expect_errc(Errc::peer_failed, [&] { tx.get(&v, 8, at(0)); }, "get");
  expect_errc(Errc::peer_failed, [&] { tx.fetch_add(at(0), 1); }, "fetch_add");
  expect_errc(Errc::peer_failed, [&] { tx.compare_swap(at(0), 0, 1); }, "compare_swap");
  expect_errc(Errc::peer_failed, [&] { tx.blocking_get(&v, 8, at(0)); }, "blocking_get");
  expect_errc(Errc::peer_failed, [&] { tx.blocking_fetch_add(at(0), 1); }, "blocking_fetch_add");
  expect_errc(Errc::peer_failed, [&] { tx.blocking_compare_swap(at(0), 0, 1); }, "blocking_compare_swap");
  expect_errc(Errc::peer_failed, [&] { RemoteKey k(*ep_, region_.packed_rkey()); }, "RemoteKey");
  try {
    ep_->check_alive();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("worker B"), std::string::npos) << "the message names the peer: " << e.what();
  }
  EXPECT_EQ(word(0), 0x5eedu) << "nothing was written after the failure";
}

TEST_F(Loopback, MarkFailedWithOkStillRecordsAFailure) {
  ep_->mark_failed(UCS_OK);
  EXPECT_TRUE(ep_->failed());
  EXPECT_NE(ep_->failure(), UCS_OK);
  expect_errc(Errc::peer_failed, [&] { ep_->check_alive(); }, "check_alive");
}

}  // namespace
}  // namespace rdmx::transfer
