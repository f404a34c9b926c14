#include "node/heartbeat_schedule.h"

#include <gtest/gtest.h>

#include "common/clock.h"

namespace kvpool {
namespace {

using Outcome = HeartbeatSchedule::Outcome;

constexpr int64_t kPeriod = 1000;

TEST(HeartbeatSchedule, AnEarlyAnswerWithoutWorkIsPacedToThePeriod) {
  FakeClock clock;
  HeartbeatSchedule schedule(&clock, kPeriod);
  const int64_t started = schedule.BeatStarted();
  clock.Advance(300);  // an older master that does not hold the poll
  HeartbeatSchedule::Next next = schedule.After(Outcome::kOk, false, started);
  EXPECT_FALSE(next.remount);
  EXPECT_EQ(next.beat_at_ms, started + kPeriod);
}

TEST(HeartbeatSchedule, AHeldPollIsFollowedAtOnce) {
  FakeClock clock;
  HeartbeatSchedule schedule(&clock, kPeriod);
  const int64_t started = schedule.BeatStarted();
  clock.Advance(kPeriod + 5);  // the master held the poll a whole period
  EXPECT_EQ(schedule.After(Outcome::kOk, false, started).beat_at_ms,
            clock.NowMs());
}

TEST(HeartbeatSchedule, AHandOverIsFollowedAtOnce) {
  FakeClock clock;
  HeartbeatSchedule schedule(&clock, kPeriod);
  const int64_t started = schedule.BeatStarted();
  clock.Advance(2);  // the master answered at once with tasks
  EXPECT_EQ(schedule.After(Outcome::kOk, true, started).beat_at_ms,
            clock.NowMs());
}

TEST(HeartbeatSchedule, FailuresBackOffToThePeriodAndAreCounted) {
  FakeClock clock;
  HeartbeatSchedule schedule(&clock, kPeriod);
  for (int i = 1; i <= 3; ++i) {
    const int64_t started = schedule.BeatStarted();
    clock.Advance(10);  // the master is down: the call fails fast
    HeartbeatSchedule::Next next =
        schedule.After(Outcome::kFailed, false, started);
    EXPECT_FALSE(next.remount);
    EXPECT_EQ(next.beat_at_ms, started + kPeriod) << "no hot loop, try " << i;
    EXPECT_EQ(schedule.consecutive_failures(), i);
    clock.Advance(next.beat_at_ms - clock.NowMs());
  }
  const int64_t started = schedule.BeatStarted();
  schedule.After(Outcome::kOk, false, started);
  EXPECT_EQ(schedule.consecutive_failures(), 0);
}

TEST(HeartbeatSchedule, AMasterThatForgotTheNodeGetsARemount) {
  FakeClock clock;
  HeartbeatSchedule schedule(&clock, kPeriod);
  const int64_t started = schedule.BeatStarted();
  clock.Advance(1);
  HeartbeatSchedule::Next next =
      schedule.After(Outcome::kUnknownNode, false, started);
  EXPECT_TRUE(next.remount);
  EXPECT_EQ(next.beat_at_ms, started + kPeriod);
  EXPECT_EQ(schedule.consecutive_failures(), 0);  // it answered
  EXPECT_FALSE(schedule.After(Outcome::kOk, false, started).remount);
  EXPECT_FALSE(schedule.After(Outcome::kFailed, false, started).remount);
}

TEST(HeartbeatSchedule, PausedBeatsLookAgainAfterAPeriod) {
  FakeClock clock;
  HeartbeatSchedule schedule(&clock, kPeriod);
  EXPECT_EQ(schedule.PausedUntil(), clock.NowMs() + kPeriod);
}

}  // namespace
}  // namespace kvpool
