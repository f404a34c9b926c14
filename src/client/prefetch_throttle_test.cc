#include "client/prefetch_throttle.h"

#include <gtest/gtest.h>

namespace kvpool {
namespace {

TEST(PrefetchThrottle, DedupWithinTtlThenAgain) {
  FakeClock clock;
  PrefetchThrottle t({.dedup_ttl_ms = 30000, .cooldown_ms = 5000}, &clock);
  EXPECT_EQ(t.Reserve({"a", "b"}, false).size(), 2u);
  EXPECT_TRUE(t.Reserve({"a", "b"}, false).empty());
  EXPECT_EQ(t.dedup_hits(), 2u);
  t.Mark("a", PrefetchState::kCompleted);
  clock.Advance(29999);
  EXPECT_TRUE(t.Reserve({"a"}, false).empty());
  clock.Advance(1);
  EXPECT_EQ(t.Reserve({"a"}, false).size(), 1u);
}

TEST(PrefetchThrottle, FailedRetriesAfterCooldownNotTtl) {
  FakeClock clock;
  PrefetchThrottle t({.dedup_ttl_ms = 30000, .cooldown_ms = 5000}, &clock);
  ASSERT_EQ(t.Reserve({"k"}, false).size(), 1u);
  t.Mark("k", PrefetchState::kFailed);
  clock.Advance(4999);
  EXPECT_TRUE(t.Reserve({"k"}, false).empty());
  clock.Advance(1);
  EXPECT_EQ(t.Reserve({"k"}, false).size(), 1u);
}

TEST(PrefetchThrottle, HealthyStatesUseTheDedupTtl) {
  FakeClock clock;
  PrefetchThrottle t({.dedup_ttl_ms = 1000, .cooldown_ms = 100}, &clock);
  for (auto st : {PrefetchState::kInFlight, PrefetchState::kAlreadyResident,
                  PrefetchState::kDelegated, PrefetchState::kCompleted}) {
    t.Mark("k", st);
    clock.Advance(500);
    EXPECT_TRUE(t.Reserve({"k"}, false).empty());
    clock.Advance(500);
    EXPECT_EQ(t.Reserve({"k"}, false).size(), 1u);
  }
}

TEST(PrefetchThrottle, PressureCooldownMakesReserveANoOpUnlessIgnored) {
  FakeClock clock;
  PrefetchThrottle t({.dedup_ttl_ms = 30000, .cooldown_ms = 5000}, &clock);
  t.EnterCooldown();
  EXPECT_TRUE(t.InCooldown());
  EXPECT_TRUE(t.Reserve({"x"}, false).empty());
  EXPECT_EQ(t.cooldown_skips(), 1u);
  // The get-side kick bypasses only this client-side backoff.
  EXPECT_EQ(t.Reserve({"x"}, true).size(), 1u);
  clock.Advance(5000);
  EXPECT_FALSE(t.InCooldown());
  EXPECT_EQ(t.Reserve({"y"}, false).size(), 1u);
  EXPECT_EQ(t.cooldown_entries(), 1u);
}

TEST(PrefetchThrottle, ZeroDisablesEachRule) {
  FakeClock clock;
  PrefetchThrottle t({.dedup_ttl_ms = 0, .cooldown_ms = 0}, &clock);
  EXPECT_EQ(t.Reserve({"k"}, false).size(), 1u);
  EXPECT_EQ(t.Reserve({"k"}, false).size(), 1u);  // no dedup
  t.EnterCooldown();
  EXPECT_FALSE(t.InCooldown());  // no cooldown
  EXPECT_EQ(t.Reserve({"k"}, false).size(), 1u);
}

TEST(PrefetchThrottle, DedupOffKeepsNoEntriesEvenForFailures) {
  FakeClock clock;
  PrefetchThrottle t({.dedup_ttl_ms = 0, .cooldown_ms = 5000}, &clock);
  for (int i = 0; i < 1000; ++i) {
    const std::string k = "k" + std::to_string(i);
    ASSERT_EQ(t.Reserve({k}, false).size(), 1u);
    t.Mark(k, PrefetchState::kFailed);
  }
  EXPECT_EQ(t.size(), 0u);  // was 1000, forever
  EXPECT_EQ(t.Reserve({"k0"}, false).size(), 1u);
}

TEST(PrefetchThrottle, ExpiredEntriesAreSweptLazily) {
  FakeClock clock;
  PrefetchThrottle t({.dedup_ttl_ms = 10, .cooldown_ms = 10}, &clock);
  for (int i = 0; i < 1000; ++i) t.Reserve({"k" + std::to_string(i)}, false);
  clock.Advance(100);
  for (int i = 0; i < 1000; ++i) t.Reserve({"n" + std::to_string(i)}, false);
  EXPECT_LT(t.size(), 1500u);  // old entries were swept while inserting
}

}  // namespace
}  // namespace kvpool
