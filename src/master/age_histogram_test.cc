#include "master/age_histogram.h"

#include <gtest/gtest.h>

namespace kvpool {
namespace {

TEST(AgeHistogramTest, BucketsAreExactBelowSixteenAndOneSixteenthAbove) {
  for (uint64_t v = 0; v < 16; ++v) {
    EXPECT_EQ(AgeHistogram::LowerBound(AgeHistogram::BucketOf(v)), v);
  }
  for (uint64_t v : {16ull, 17ull, 100ull, 1000ull, 123456789ull, 1ull << 62}) {
    const int b = AgeHistogram::BucketOf(v);
    const uint64_t lo = AgeHistogram::LowerBound(b);
    EXPECT_LE(lo, v);
    EXPECT_LT(v - lo, lo / 16 + 1) << v;
    EXPECT_EQ(AgeHistogram::BucketOf(lo), b);
    if (b + 1 < AgeHistogram::kBuckets) {
      EXPECT_GT(AgeHistogram::LowerBound(b + 1), v);
    }
  }
}

TEST(AgeHistogramTest, OldestCoveringFindsTheAgeAboveWhichTheBytesLie) {
  AgeHistogram h;
  h.Add(10, 100);
  h.Add(1000, 100);
  h.Add(5000, 100);
  h.Add(-3, 100);  // a clock step back counts as age 0
  EXPECT_EQ(h.total(), 400u);
  // The oldest 100 bytes: those of age 5000 (its bucket starts at 4864).
  const int64_t a = h.OldestCovering(100);
  EXPECT_GT(a, 1000);
  EXPECT_LE(a, 5000);
  // 150 bytes need the age-1000 ones too.
  const int64_t b = h.OldestCovering(150);
  EXPECT_GT(b, 10);
  EXPECT_LE(b, 1000);
  EXPECT_EQ(h.OldestCovering(400), 0);
  EXPECT_EQ(h.OldestCovering(10000), 0);
}

}  // namespace
}  // namespace kvpool
