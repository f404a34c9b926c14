#include "master/closed_segments.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <set>
#include <vector>

namespace kvpool {
namespace {

class ClosedSegmentsTest : public ::testing::Test {
 protected:
  // Every segment is mounted unless put in `unmounted_`.
  std::vector<uint32_t> TakeDue(int64_t now) {
    return closed_.TakeDue(
        now, [this](uint32_t id) { return unmounted_.count(id) == 0; });
  }

  ClosedSegments closed_;
  std::set<uint32_t> unmounted_;
};

TEST_F(ClosedSegmentsTest, DueOnlyOnceItsReopenTimeHasCome) {
  closed_.Add(1, /*reopen_at_ms=*/1000, /*awaiting_directory=*/false);
  EXPECT_TRUE(TakeDue(999).empty());
  EXPECT_EQ(closed_.size(), 1u);
  EXPECT_EQ(TakeDue(1000), std::vector<uint32_t>{1});
  // Returned once: it is forgotten then.
  EXPECT_EQ(closed_.size(), 0u);
  EXPECT_TRUE(TakeDue(5000).empty());
}

TEST_F(ClosedSegmentsTest, OnlyTheDueOnesAreTaken) {
  closed_.Add(1, 100, false);
  closed_.Add(2, 300, false);
  EXPECT_EQ(TakeDue(200), std::vector<uint32_t>{1});
  EXPECT_EQ(closed_.size(), 1u);
  EXPECT_EQ(TakeDue(300), std::vector<uint32_t>{2});
}

TEST_F(ClosedSegmentsTest, AwaitedDirectoryBlocksReopenUntilCleared) {
  closed_.Add(7, 100, /*awaiting_directory=*/true);
  EXPECT_TRUE(TakeDue(100).empty());
  EXPECT_TRUE(TakeDue(1'000'000).empty());
  EXPECT_TRUE(closed_.ClearAwaiting(7));
  EXPECT_EQ(TakeDue(1'000'000), std::vector<uint32_t>{7});
}

TEST_F(ClosedSegmentsTest, ClearedBeforeTheReopenTimeStillWaitsForIt) {
  closed_.Add(7, 500, /*awaiting_directory=*/true);
  EXPECT_TRUE(closed_.ClearAwaiting(7));
  EXPECT_TRUE(TakeDue(499).empty());
  EXPECT_EQ(TakeDue(500), std::vector<uint32_t>{7});
}

TEST_F(ClosedSegmentsTest, AnExtraSegmentWithoutRemountWaitsOnlyForItsNode) {
  // Reopen time 0: only the awaited signal holds it.
  closed_.Add(3, 0, /*awaiting_directory=*/true);
  EXPECT_TRUE(TakeDue(0).empty());
  EXPECT_TRUE(closed_.ClearAwaiting(3));
  EXPECT_EQ(TakeDue(0), std::vector<uint32_t>{3});
}

TEST_F(ClosedSegmentsTest, UnmountedSegmentsAreDroppedNotReturned) {
  closed_.Add(1, 100, /*awaiting_directory=*/true);
  closed_.Add(2, 10'000, false);
  closed_.Add(3, 100, false);
  unmounted_ = {1, 2, 3};
  // Neither due nor awaited matters: gone is gone, and never reopened.
  EXPECT_TRUE(TakeDue(0).empty());
  EXPECT_EQ(closed_.size(), 0u);
  unmounted_.clear();
  EXPECT_TRUE(TakeDue(20'000).empty());
}

TEST_F(ClosedSegmentsTest, ClearOfAnUnknownIdIsANoOp) {
  EXPECT_FALSE(closed_.ClearAwaiting(42));
  EXPECT_EQ(closed_.size(), 0u);
  closed_.Add(1, 100, true);
  EXPECT_FALSE(closed_.ClearAwaiting(42));
  EXPECT_TRUE(TakeDue(100).empty());  // 1 still awaits its own signal
  EXPECT_TRUE(closed_.ClearAwaiting(1));
  EXPECT_TRUE(closed_.ClearAwaiting(1));  // idempotent while recorded
  EXPECT_EQ(TakeDue(100), std::vector<uint32_t>{1});
  EXPECT_FALSE(closed_.ClearAwaiting(1));  // forgotten once reopened
}

TEST_F(ClosedSegmentsTest, AnUnservedSegmentIsSoUntilItsNodeOpensIt) {
  closed_.Add(5, 0, /*awaiting_directory=*/true, /*unserved=*/true);
  closed_.Add(6, 0, /*awaiting_directory=*/true);  // an extra segment
  EXPECT_TRUE(closed_.Unserved(5));
  EXPECT_FALSE(closed_.Unserved(6));
  EXPECT_FALSE(closed_.Unserved(7));  // not recorded
  EXPECT_TRUE(TakeDue(0).empty());
  EXPECT_TRUE(closed_.ClearAwaiting(5));
  EXPECT_FALSE(closed_.Unserved(5));
  EXPECT_EQ(TakeDue(0), std::vector<uint32_t>{5});
}

TEST_F(ClosedSegmentsTest, AddAgainReplacesTheRecord) {
  closed_.Add(1, 100, true);
  closed_.Add(1, 200, false);
  EXPECT_EQ(closed_.size(), 1u);
  EXPECT_TRUE(TakeDue(150).empty());
  EXPECT_EQ(TakeDue(200), std::vector<uint32_t>{1});
}

}  // namespace
}  // namespace kvpool
