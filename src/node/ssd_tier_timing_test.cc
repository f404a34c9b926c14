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
