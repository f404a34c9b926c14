#include "node/ssd_tier_timing.h"

#include <gtest/gtest.h>

#include "common/clock.h"
#include "common/deadline_queue.h"

namespace kvpool::ssd_tier_timing {
namespace {

TEST(PromotionDeadline, CountsFromReceiptAndExpiresAtIt) {
  FakeClock clock;
  const int64_t received = clock.NowMs();
  std::optional<int64_t> deadline = PromotionDeadlineMs(received, 50);
  ASSERT_TRUE(deadline.has_value());
  EXPECT_EQ(*deadline, received + 50);
  clock.Advance(49);  // held in the queue (budget, an offload) for 49 ms
  EXPECT_FALSE(PromotionExpired(deadline, clock.NowMs()));
  clock.Advance(1);
  EXPECT_TRUE(PromotionExpired(deadline, clock.NowMs()));
  clock.Advance(1000);
  EXPECT_TRUE(PromotionExpired(deadline, clock.NowMs()));
}

TEST(PromotionDeadline, ATaskWithoutADeadlineNeverExpires) {
  FakeClock clock;
  EXPECT_EQ(PromotionDeadlineMs(clock.NowMs(), 0), std::nullopt);
  EXPECT_EQ(PromotionDeadlineMs(clock.NowMs(), -5), std::nullopt);
  clock.Advance(int64_t{1} << 40);
  EXPECT_FALSE(PromotionExpired(std::nullopt, clock.NowMs()));
}

TEST(PromotionUnreachable, EachBudgetAheadIsOneMoreServiceTime) {
  const uint64_t mib = 1 << 20;
  // Nothing ahead: one service time.
  EXPECT_EQ(ExpectedLandMs(1000, 20.0, 0, 4 * mib), 1020);
  // One 4 MiB batch reading and two waiting, under a 4 MiB budget: three
  // services before this batch starts, its own after.
  EXPECT_EQ(ExpectedLandMs(1000, 20.0, 12 * mib, 4 * mib), 1080);
  // Half a budget ahead: half a service more (rounded up to a whole ms).
  EXPECT_EQ(ExpectedLandMs(1000, 2.5, 2 * mib, 4 * mib), 1004);
  // No budget (the sequential worker): nothing waits ahead.
  EXPECT_EQ(ExpectedLandMs(1000, 20.0, 64 * mib, 0), 1020);
}

TEST(PromotionUnreachable, OnlyATaskThatWouldLandAfterItsDeadline) {
  EXPECT_TRUE(PromotionUnreachable(int64_t{1019}, 1020));
  EXPECT_FALSE(PromotionUnreachable(int64_t{1020}, 1020));
  EXPECT_FALSE(PromotionUnreachable(int64_t{5000}, 1020));
  EXPECT_FALSE(PromotionUnreachable(std::nullopt, int64_t{1} << 40));
}

TEST(PromotionHeld, ByTheBudgetWhenItHasNoRoomElseByTheOffloadRule) {
  const uint64_t mib = 1 << 20;
  // 4 MiB in flight under a 4 MiB budget: no room, whatever offloads do.
  EXPECT_STREQ(HeldBy(4 * mib, 4 * mib, 4 * mib), "held_budget");
  // Room for it: only an offload can be holding it.
  EXPECT_STREQ(HeldBy(32 * mib, 4 * mib, 4 * mib), "held_offload");
  EXPECT_STREQ(HeldBy(8 * mib, 4 * mib, 4 * mib), "held_offload");
}

TEST(PromotionServiceTime, NoneUntilABatchReadThenAWeightedMean) {
  PromotionServiceTime t;
  EXPECT_EQ(t.ms(), std::nullopt);
  t.Observe(40);
  EXPECT_DOUBLE_EQ(*t.ms(), 40.0);
  t.Observe(8);  // a quarter of the way to the newest
  EXPECT_DOUBLE_EQ(*t.ms(), 32.0);
  t.Observe(-3);  // a clock step back counts as 0, never negative
  EXPECT_DOUBLE_EQ(*t.ms(), 24.0);
  // A slow spell fades: ten fast batches bring it within 2 ms of them.
  for (int i = 0; i < 10; ++i) t.Observe(4);
  EXPECT_LT(*t.ms(), 6.0);
}

TEST(PromotionDeadline, TheQueueRunsEarliestDeadlineFirstThenTheRest) {
  FakeClock clock;
  DeadlineQueue<int> q;
  const int64_t now = clock.NowMs();
  q.Push(1, PromotionOrder(PromotionDeadlineMs(now, 0)));    // none
  q.Push(2, PromotionOrder(PromotionDeadlineMs(now, 500)));  // later
  clock.Advance(100);
  q.Push(3, PromotionOrder(PromotionDeadlineMs(clock.NowMs(), 100)));
  EXPECT_EQ(q.Pop(), 3);  // deadline now+200 before now+500
  EXPECT_EQ(q.Pop(), 2);
  EXPECT_EQ(q.Pop(), 1);
}

TEST(OffloadRetry, TwoRetriesWithGrowingDelays) {
  EXPECT_EQ(kOffloadNotifyAttempts, 3);
  EXPECT_EQ(OffloadRetryDelayMs(1), 200);
  EXPECT_EQ(OffloadRetryDelayMs(2), 400);
  // The whole retry window an offload batch may wait before a rollback.
  int64_t total = 0;
  for (int a = 1; a < kOffloadNotifyAttempts; ++a)
    total += OffloadRetryDelayMs(a);
  EXPECT_EQ(total, 600);
}

}  // namespace
}  // namespace kvpool::ssd_tier_timing
