// FlushEpoch and EpochTag (Seriema 4.1's flush number) on their own: no UCX.
#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "rdmx/transfer/flush_epoch.hpp"

using rdmx::transfer::EpochTag;
using rdmx::transfer::FlushEpoch;

TEST(FlushEpoch, StartsWithEpochOneOpenAndNothingCompleted) {
  FlushEpoch e;
  EXPECT_EQ(e.current(), 1u);
  EXPECT_EQ(e.completed(), 0u);
  EXPECT_FALSE((EpochTag{&e, 1}.is_free()));
  EXPECT_TRUE((EpochTag{&e, 0}.is_free()));  // nothing is ever tagged 0: free by construction
}

TEST(FlushEpoch, CloseReturnsTheClosedEpochAndOpensTheNext) {
  FlushEpoch e;
  EXPECT_EQ(e.close(), 1u);
  EXPECT_EQ(e.current(), 2u);
  EXPECT_EQ(e.close(), 2u);
  EXPECT_EQ(e.close(), 3u);
  EXPECT_EQ(e.current(), 4u);
  EXPECT_EQ(e.completed(), 0u) << "closing an epoch issues its flush; it does not complete it";
}

TEST(FlushEpoch, TagsBecomeFreeExactlyWhenTheirEpochCompletes) {
  FlushEpoch e;
  EpochTag first{&e, e.current()};
  e.close();
  EpochTag second{&e, e.current()};
  e.close();
  EXPECT_FALSE(first.is_free());
  EXPECT_FALSE(second.is_free());
  e.mark_completed(1);
  EXPECT_TRUE(first.is_free());
  EXPECT_FALSE(second.is_free());
  e.mark_completed(2);
  EXPECT_TRUE(second.is_free());
}

TEST(FlushEpoch, OutOfOrderCompletionNeverMovesBackwards) {
  // Flushes may complete in any order; completing k means every epoch <= k is
  // complete, so a late completion of a lower number changes nothing.
  FlushEpoch e;
  for (int i = 0; i < 4; ++i) e.close();
  e.mark_completed(3);
  EXPECT_EQ(e.completed(), 3u);
  EXPECT_TRUE((EpochTag{&e, 1}.is_free()));
  EXPECT_TRUE((EpochTag{&e, 3}.is_free()));
  EXPECT_FALSE((EpochTag{&e, 4}.is_free()));
  e.mark_completed(1);
  e.mark_completed(2);
  EXPECT_EQ(e.completed(), 3u);
  e.mark_completed(4);
  EXPECT_EQ(e.completed(), 4u);
}

TEST(FlushEpoch, DefaultTagIsFree) {
  EXPECT_TRUE(EpochTag{}.is_free());
  EXPECT_TRUE((EpochTag{nullptr, 99}.is_free()));
}

TEST(FlushEpoch, ConcurrentCompletionsKeepTheMaximum) {
  FlushEpoch e;
  constexpr std::uint64_t per_thread = 20000;
  std::vector<std::thread> threads;
  for (std::uint64_t t = 0; t < 4; ++t)
    threads.emplace_back([&e, t] {
      for (std::uint64_t i = 0; i < per_thread; ++i) e.mark_completed(i * 4 + t + 1);
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(e.completed(), per_thread * 4);
}

TEST(FlushEpoch, ConcurrentClosesHandOutDistinctEpochs) {
  FlushEpoch e;
  constexpr int per_thread = 10000;
  std::vector<std::vector<std::uint64_t>> seen(4);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < per_thread; ++i) seen[t].push_back(e.close());
    });
  for (auto& t : threads) t.join();
  std::vector<bool> hit(4 * per_thread + 1, false);
  for (auto& s : seen)
    for (auto v : s) {
      ASSERT_GE(v, 1u);
      ASSERT_LE(v, 4u * per_thread);
      EXPECT_FALSE(hit[v]) << "epoch " << v << " closed twice";
      hit[v] = true;
    }
  EXPECT_EQ(e.current(), 4u * per_thread + 1);
}
