// A broken sender: chunk headers that are corrupted or publish a cut-off
// record are detected and reported by the receiver, and nothing runs.
// Run as 3 processes: 0 breaks its channel to 1 one way and to 2 another.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>

#include "../../src/invoke/messengers.hpp"
#include "rdmx/fabric/job.hpp"
#include "rdmx/fabric/rma.hpp"
#include "rdmx/invoke/messenger.hpp"

using namespace rdmx;

namespace {
Job& job() { return Job::current(); }
std::atomic<bool> broken_sent{false};
std::atomic<int> ran_after{0};

// On the sender: one good call (so the channel exists), then a raw RDMA
// write of `word` over the chunk's Producer word, then a call that must
// never run; then tell the receiver's service thread to look.
void break_channel(ThreadId dest, std::uint64_t (*make_word)(const invoke::Messenger&)) {
  MessengerGlobal messenger;
  Synchronizer sync;
  messenger.call(dest, [] {}, when_run(sync));
  sync.wait();
  invoke::Messenger& m = invoke::Messengers::current().messenger(dest);
  static std::uint64_t word;
  word = make_word(m);
  auto& tx = invoke::Inspect::transmitter(m);
  tx.put(&word, sizeof word, invoke::Inspect::chunk(m)).get();
  tx.flush();
  call(ThreadId{dest.process, service_thread}, [] { broken_sent = true; });
}

// Without rings (RDMX_RING_BUDGET=0) every messenger relays its calls as
// active messages: there is no chunk, nor Producer word, to corrupt.
bool no_rings() { return MessengerOptions::from_env().ring_budget == 0; }
constexpr const char* no_chunks = "no rings (RDMX_RING_BUDGET=0): no chunk to corrupt; "
                                  "Corruption.MalformedRelayedRecordIsReported covers relayed calls";

// On the receiver: progress until the corruption is reported (the broken
// word may be seen before the sender's "look now" arrives).
std::string expect_report() {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < deadline) {
    try {
      progress();
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), Errc::protocol);
      return e.what();
    }
  }
  ADD_FAILURE() << "the corrupted chunk was not reported" << (broken_sent.load() ? "" : " (nor did the sender say it broke it)");
  return {};
}
}  // namespace

TEST(Corruption, GarbageProducerWordIsReported) {
  if (job().size() < 3) GTEST_SKIP() << "needs three processes";
  if (no_rings()) GTEST_SKIP() << no_chunks;
  if (job().rank() == 0)
    break_channel({1, 0}, [](const invoke::Messenger&) -> std::uint64_t { return 0x0123456789abcdefull; });
  if (job().rank() == 1) {
    const std::string what = expect_report();
    EXPECT_NE(what.find("fails its check"), std::string::npos) << what;
    EXPECT_NE(what.find("from 0/0"), std::string::npos) << what;
  }
  job().barrier();
}

TEST(Corruption, RecordCutOffByThePublishedEndIsReported) {
  if (job().size() < 3) GTEST_SKIP() << "needs three processes";
  if (no_rings()) GTEST_SKIP() << no_chunks;
  if (job().rank() == 0)
    break_channel({2, 0}, [](const invoke::Messenger& m) {
      // A well-formed word whose end lies 8 bytes into a record never written.
      return invoke::Inspect::word(m, invoke::Inspect::written(m) + 8);
    });
  if (job().rank() == 2) {
    const std::string what = expect_report();
    EXPECT_NE(what.find("cut off"), std::string::npos) << what;
  }
  job().barrier();
}

// A relayed record (a messenger without a ring sends each call as an active
// message) whose header fails its check is reported like a corrupted chunk:
// Errc::protocol from the receiver's progress, naming the sender, and its
// channel is closed (with no rings, the next test checks that on it).
TEST(Corruption, MalformedRelayedRecordIsReported) {
  if (job().size() < 3) GTEST_SKIP() << "needs three processes";
  if (job().rank() == 0) {
    invoke::wire::RecordHeader h{};
    h.function = fabric::FunctionId<invoke::RelayedRecord>::value;  // any id: the check fails first
    h.size = sizeof h;
    h.flags = invoke::wire::kind_call;
    h.check = static_cast<std::uint8_t>(invoke::wire::record_check(h) ^ 0x5a);
    const invoke::RelayedRecord::Addressed to{0, 0};
    alignas(8) std::byte message[sizeof to + sizeof h];
    std::memcpy(message, &to, sizeof to);
    std::memcpy(message + sizeof to, &h, sizeof h);
    fabric::Outgoing o;
    o.destination = {1, 0};
    o.function = fabric::FunctionId<invoke::RelayedRecord>::value;
    o.closure = message;
    o.closure_size = sizeof message;
    fabric::send_call(o);
    fabric::flush_sends();
  }
  if (job().rank() == 1) {
    const std::string what = expect_report();
    EXPECT_NE(what.find("relayed record"), std::string::npos) << what;
    EXPECT_NE(what.find("from 0/0"), std::string::npos) << what;
  }
  job().barrier();
}

TEST(Corruption, ABrokenChannelRunsNothingMore) {
  if (job().size() < 3) GTEST_SKIP() << "needs three processes";
  if (job().rank() == 0) {
    MessengerGlobal messenger;
    messenger.call({1, 0}, [] { ran_after.fetch_add(1); });
    messenger.flush();
  }
  job().barrier();
  for (int i = 0; i < 1000; ++i) progress();
  EXPECT_EQ(ran_after.load(), 0);
  job().barrier();
}
