#include "master/frequency_sketch.h"

#include <gtest/gtest.h>

#include <string>

namespace kvpool {

TEST(FrequencySketch, CountsAndNeverUnderestimates) {
  FrequencySketch s(1024, 4, 1 << 30);
  for (int i = 0; i < 5; ++i) s.Increment(0, "hot");
  EXPECT_GE(s.Estimate(0, "hot"), 5u);
  EXPECT_EQ(s.Increment(0, "once"), 1u);
  // Tenants are distinct keys.
  EXPECT_LE(s.Estimate(1, "hot"), 1u);
  // Many other keys: "hot" is still at least 5 (count-min never undercounts).
  for (int i = 0; i < 2000; ++i) s.Increment(0, "k" + std::to_string(i));
  EXPECT_GE(s.Estimate(0, "hot"), 5u);
}

TEST(FrequencySketch, DecayHalvesOldCounts) {
  FrequencySketch s(1024, 4, 16);
  for (int i = 0; i < 15; ++i) s.Increment(0, "hot");
  EXPECT_GE(s.Estimate(0, "hot"), 15u);
  s.Increment(0, "other");  // 16th increment: decay
  EXPECT_EQ(s.decays(), 1u);
  EXPECT_LE(s.Estimate(0, "hot"), 8u);
  EXPECT_GE(s.Estimate(0, "hot"), 7u);
}

TEST(FrequencySketch, SaturatesInsteadOfWrapping) {
  FrequencySketch s(16, 2, 1 << 30);
  for (int i = 0; i < 1000; ++i) s.Increment(0, "x");
  EXPECT_EQ(s.Estimate(0, "x"), 255u);
}

}  // namespace kvpool
