#include "events/event_queue.h"

#include <gtest/gtest.h>

#include <chrono>
#include <string>

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

// Append copies every field and string out of the caller's storage (the
// views may die right after it), keeps the order across the log's growth
// and across drains (the two buffers trading places), and drops like Push.
TEST(EventQueueTest, AppendCopiesEveryFieldInOrderAcrossGrowthAndDrains) {
  EventQueue q(1000);
  std::vector<TierEvent> out;
  for (int round = 0; round < 3; ++round) {
    for (int i = 0; i < 300; ++i) {  // 300 records outgrow the first 4 KiB
      std::string tenant = i % 3 == 0 ? "" : "tenant-" + std::to_string(i);
      std::string key(static_cast<size_t>(i % 70), 'a' + i % 26);
      std::string node = "node-" + std::to_string(round);
      TierEventHead head;
      head.kind = static_cast<TierEventKind>(i % 8);
      head.media = static_cast<uint8_t>(i % 8);
      head.trigger = static_cast<Trigger>(i % 4 - 1);
      head.ssd_copy = i % 2 == 1;
      head.size = uint64_t{1} << (i % 64);
      ASSERT_TRUE(q.Append(head, tenant, key, node));
      tenant.assign(tenant.size(), '#');  // the queue kept its own copy
      key.assign(key.size(), '#');
    }
    const int64_t before_us =
        std::chrono::duration_cast<std::chrono::microseconds>(
            std::chrono::system_clock::now().time_since_epoch())
            .count();
    EXPECT_EQ(q.Drain(&out), 0u);
    ASSERT_EQ(out.size(), 300u);
    for (int i = 0; i < 300; ++i) {
      const TierEvent& ev = out[static_cast<size_t>(i)];
      EXPECT_EQ(ev.tenant, i % 3 == 0 ? "" : "tenant-" + std::to_string(i));
      EXPECT_EQ(ev.key, std::string(static_cast<size_t>(i % 70), 'a' + i % 26));
      EXPECT_EQ(ev.node, "node-" + std::to_string(round));
      EXPECT_EQ(ev.kind, static_cast<TierEventKind>(i % 8));
      EXPECT_EQ(ev.media, i % 8);
      EXPECT_EQ(ev.trigger, static_cast<Trigger>(i % 4 - 1));
      EXPECT_EQ(ev.ssd_copy, i % 2 == 1);
      EXPECT_EQ(ev.size, uint64_t{1} << (i % 64));
      // Stamped at the drain, by the wall clock.
      EXPECT_GE(ev.ts_us, before_us - 1000);
    }
  }
  EXPECT_EQ(q.Drain(&out), 0u);
  EXPECT_TRUE(out.empty());
}

TEST(EventQueueTest, AppendDropsLikePush) {
  EventQueue q(2);
  EXPECT_TRUE(q.Append({}, "t", "a", "n"));
  EXPECT_TRUE(q.Push(Key("b")));
  EXPECT_FALSE(q.Append({}, "t", "c", "n"));
  EXPECT_EQ(q.dropped_total(), 1u);
  std::vector<TierEvent> out;
  EXPECT_EQ(q.Drain(&out), 1u);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].key, "a");
  EXPECT_EQ(out[0].tenant, "t");
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
