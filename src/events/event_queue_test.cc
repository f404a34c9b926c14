#include "events/event_queue.h"

#include <gtest/gtest.h>

namespace kvpool::events {
namespace {

TierEvent Key(std::string key) {
  TierEvent ev;
  ev.key = std::move(key);
  return ev;
}

TEST(EventQueueTest, FullQueueDropsCountsAndReportsTheGapOnce) {
  EventQueue q(2);
  EXPECT_TRUE(q.Push(Key("a")));
  EXPECT_TRUE(q.Push(Key("b")));
  EXPECT_FALSE(q.Push(Key("c")));
  EXPECT_FALSE(q.Push(Key("d")));
  EXPECT_EQ(q.dropped_total(), 2u);
  std::vector<TierEvent> out;
  EXPECT_EQ(q.Drain(&out), 2u);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].key, "a");
  EXPECT_EQ(out[1].key, "b");
  EXPECT_GT(out[0].ts_us, 0);
  // Room again; the gap was reported by the drain before.
  EXPECT_TRUE(q.Push(Key("e")));
  EXPECT_EQ(q.Drain(&out), 0u);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].key, "e");
  EXPECT_EQ(q.dropped_total(), 2u);
}

// Emplace is Push built in place: the same bound, drop count and gap, and a
// dropped event's fill never runs.
TEST(EventQueueTest, EmplaceBuildsInPlaceAndDropsLikePush) {
  EventQueue q(2);
  int fills = 0;
  auto fill = [&](const char* key) {
    return [&fills, key](TierEvent& ev) {
      ++fills;
      ev.key = key;
      ev.size = 7;
    };
  };
  EXPECT_TRUE(q.Emplace(fill("a")));
  EXPECT_TRUE(q.Push(Key("b")));
  EXPECT_FALSE(q.Emplace(fill("c")));
  EXPECT_EQ(fills, 1);
  EXPECT_EQ(q.dropped_total(), 1u);
  std::vector<TierEvent> out;
  EXPECT_EQ(q.Drain(&out), 1u);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].key, "a");
  EXPECT_EQ(out[0].size, 7u);
  EXPECT_GT(out[0].ts_us, 0);
  EXPECT_EQ(out[1].key, "b");
}

TEST(EventQueueTest, DrainOfAnEmptyQueueClearsTheOutput) {
  EventQueue q(4);
  std::vector<TierEvent> out{Key("stale")};
  EXPECT_EQ(q.Drain(&out), 0u);
  EXPECT_TRUE(out.empty());
}

}  // namespace
}  // namespace kvpool::events
