#include "node/recent_get_reads.h"

#include <gtest/gtest.h>

#include <string>

namespace kvpool {
namespace {

TEST(RecentGetReadsTest, AReadCountsForTheWindowThenNoMore) {
  FakeClock clock;
  RecentGetReads r(/*window_ms=*/100, /*capacity=*/8, &clock);
  EXPECT_FALSE(r.ReadRecently("t", "k"));
  r.Note("t", "k");
  EXPECT_TRUE(r.ReadRecently("t", "k"));
  EXPECT_FALSE(r.ReadRecently("t", "other"));
  EXPECT_FALSE(r.ReadRecently("u", "k"));  // tenants apart
  clock.Advance(100);
  EXPECT_TRUE(r.ReadRecently("t", "k"));
  clock.Advance(1);
  EXPECT_FALSE(r.ReadRecently("t", "k"));
}

TEST(RecentGetReadsTest, ANewReadRestartsTheWindow) {
  FakeClock clock;
  RecentGetReads r(100, 8, &clock);
  r.Note("t", "k");
  clock.Advance(80);
  r.Note("t", "k");
  clock.Advance(80);
  r.Note("t", "x");  // ages out the first note of k, not k
  EXPECT_TRUE(r.ReadRecently("t", "k"));
}

TEST(RecentGetReadsTest, CountsReadsInARowEachWithinTheWindow) {
  FakeClock clock;
  RecentGetReads r(100, 8, &clock);
  EXPECT_EQ(r.RecentReads("t", "k"), 0u);
  r.Note("t", "k");
  EXPECT_EQ(r.RecentReads("t", "k"), 1u);
  clock.Advance(90);
  r.Note("t", "k");
  clock.Advance(90);
  r.Note("t", "k");
  EXPECT_EQ(r.RecentReads("t", "k"), 3u);
  clock.Advance(101);  // the streak ends
  EXPECT_EQ(r.RecentReads("t", "k"), 0u);
  r.Note("t", "k");
  EXPECT_EQ(r.RecentReads("t", "k"), 1u);
}

TEST(RecentGetReadsTest, BoundedByCapacityOldestFirst) {
  FakeClock clock;
  RecentGetReads r(1000000, 4, &clock);
  for (int i = 0; i < 10; ++i) {
    r.Note("t", "k" + std::to_string(i));
    clock.Advance(1);
  }
  EXPECT_LE(r.size(), 4u);
  EXPECT_TRUE(r.ReadRecently("t", "k9"));
  EXPECT_FALSE(r.ReadRecently("t", "k0"));
  // One hot key noted over and over stays, in bounded memory.
  for (int i = 0; i < 1000; ++i) r.Note("t", "hot");
  EXPECT_TRUE(r.ReadRecently("t", "hot"));
  EXPECT_LE(r.size(), 4u);
}

TEST(RecentGetReadsTest, WindowZeroIsOff) {
  FakeClock clock;
  RecentGetReads r(0, 8, &clock);
  r.Note("t", "k");
  EXPECT_FALSE(r.ReadRecently("t", "k"));
  EXPECT_EQ(r.size(), 0u);
}

}  // namespace
}  // namespace kvpool
