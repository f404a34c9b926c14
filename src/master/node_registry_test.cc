// NodeRegistry on its own: what node_registry.h promises about identity
// (indices never reused), liveness on its capped clock (FakeClock), the
// unreachable set, the offload backoff, the mailboxes, the DRAM directory
// events and the timed waits (tiny timeouts; assertions on outcomes only).
#include "master/node_registry.h"

#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

#include "tests/test_util.h"

namespace kvpool {
namespace {

using kvpool::testing::WaitUntil;

constexpr int64_t kStep = 1000;  // the liveness clock's cap per tick
constexpr int64_t kTtl = 3000;

class NodeRegistryTest : public ::testing::Test {
 protected:
  uint32_t Add(const std::string& id, bool directory = false,
               bool pulls = false) {
    return nodes_.Register(id, id + ":1", "host-" + id, /*ssd_enabled=*/true,
                           pulls, directory);
  }
  // Housekeeping every kStep for `ms`; returns the ids it expired.
  std::vector<std::string> Run(int64_t ms) {
    std::vector<std::string> dead;
    for (int64_t t = 0; t < ms; t += kStep) {
      clock_.Advance(kStep);
      for (const auto& n : nodes_.ExpireSilent(kTtl))
        dead.push_back(n->node_id);
    }
    return dead;
  }
  static OffloadTaskMsg Offload(const std::string& key) {
    OffloadTaskMsg t;
    t.key = key;
    return t;
  }
  static PromotionTaskMsg Promotion(const std::string& key, int64_t deadline) {
    PromotionTaskMsg t;
    t.key = key;
    t.deadline_ms = deadline;
    return t;
  }

  FakeClock clock_;
  NodeRegistry nodes_{&clock_, kStep};
};

TEST_F(NodeRegistryTest, RegistrationGivesAStableIdentity) {
  const uint32_t a = Add("a");
  const uint32_t b = Add("b");
  EXPECT_NE(a, b);
  EXPECT_EQ(nodes_.IndexOf("a"), a);
  EXPECT_EQ(nodes_.IndexOf("nobody"), std::nullopt);
  auto info = nodes_.Info(a);
  ASSERT_NE(info, nullptr);
  EXPECT_EQ(info->index, a);
  EXPECT_EQ(info->node_id, "a");
  EXPECT_EQ(info->data_endpoint, "a:1");
  EXPECT_EQ(info->host_id, "host-a");
  // A second mount of the node keeps its index, new details, and its SSD
  // ability once declared.
  EXPECT_EQ(nodes_.Register("a", "a:2", "host-a", /*ssd_enabled=*/false), a);
  info = nodes_.Info(a);
  EXPECT_EQ(info->data_endpoint, "a:2");
  EXPECT_TRUE(info->ssd_enabled);
  EXPECT_EQ(nodes_.Info(9999), nullptr);
}

TEST_F(NodeRegistryTest, IndicesAreNeverReused) {
  const uint32_t a = Add("a");
  ASSERT_NE(nodes_.Remove("a"), nullptr);
  EXPECT_EQ(nodes_.Info(a), nullptr);
  EXPECT_EQ(nodes_.Remove("a"), nullptr);
  const uint32_t again = Add("a");
  EXPECT_NE(again, a);
  ASSERT_EQ(Run(kTtl + 2 * kStep), std::vector<std::string>{"a"});
  const uint32_t third = Add("a");
  EXPECT_NE(third, a);
  EXPECT_NE(third, again);
}

TEST_F(NodeRegistryTest, SilentNodeExpiresAfterTheTtlAndBeatsKeepItAlive) {
  Add("a");
  Add("b");
  EXPECT_TRUE(Run(kTtl).empty());  // exactly the TTL: not yet
  EXPECT_TRUE(nodes_.Touch("b"));
  EXPECT_EQ(Run(kStep), std::vector<std::string>{"a"});
  EXPECT_EQ(nodes_.IndexOf("a"), std::nullopt);
  EXPECT_FALSE(nodes_.Touch("a"));  // unknown now: it must register again
  // b beats every step and stays.
  for (int i = 0; i < 10; ++i) {
    EXPECT_TRUE(Run(kStep).empty());
    EXPECT_TRUE(nodes_.Touch("b"));
  }
  EXPECT_TRUE(nodes_.IndexOf("b").has_value());
}

TEST_F(NodeRegistryTest, APauseOfTheMasterCountsAsOneStep) {
  Add("a");
  clock_.Advance(60 * kTtl);  // the master was stopped meanwhile
  EXPECT_TRUE(nodes_.ExpireSilent(kTtl).empty());
  EXPECT_EQ(nodes_.pauses_survived(), 1u);
  EXPECT_TRUE(nodes_.IndexOf("a").has_value());
  EXPECT_EQ(Run(kTtl), std::vector<std::string>{"a"});  // then as usual
}

TEST_F(NodeRegistryTest, PullingPromotionsIsASignOfLife) {
  Add("a", /*directory=*/false, /*pulls=*/true);
  std::vector<PromotionTaskMsg> got;
  for (int i = 0; i < 10; ++i) {
    EXPECT_TRUE(Run(kStep).empty());
    EXPECT_TRUE(nodes_.TakePromotions("a", 1, &got));
  }
  EXPECT_FALSE(nodes_.TakePromotions("nobody", 1, &got));
}

TEST_F(NodeRegistryTest, UnreachableUntilTheNextHeartbeat) {
  Add("a");
  Add("b");
  EXPECT_TRUE(nodes_.Unreachable().empty());
  nodes_.ReportUnreachable("a");
  nodes_.ReportUnreachable("a");  // twice: still one entry
  nodes_.ReportUnreachable("nobody");
  EXPECT_EQ(nodes_.Unreachable(), std::vector<std::string>{"a"});
  EXPECT_TRUE(nodes_.Touch("b"));  // another node's beat changes nothing
  EXPECT_EQ(nodes_.Unreachable(), std::vector<std::string>{"a"});
  EXPECT_TRUE(nodes_.Touch("a"));
  EXPECT_TRUE(nodes_.Unreachable().empty());
  // A re-registration is a beat too; a removed node is no longer listed.
  nodes_.ReportUnreachable("a");
  Add("a");
  EXPECT_TRUE(nodes_.Unreachable().empty());
  nodes_.ReportUnreachable("b");
  nodes_.Remove("b");
  EXPECT_TRUE(nodes_.Unreachable().empty());
  // Nor is an expired one (a crashed node stays avoided until then).
  nodes_.ReportUnreachable("a");
  EXPECT_EQ(Run(kTtl + kStep), std::vector<std::string>{"a"});
  EXPECT_TRUE(nodes_.Unreachable().empty());
}

TEST_F(NodeRegistryTest, OffloadBackoffDoublesUpToThirtySeconds) {
  const uint32_t a = Add("a");
  EXPECT_FALSE(nodes_.OffloadPaused(a, 0));
  nodes_.OffloadFailed(a, 0);
  EXPECT_TRUE(nodes_.OffloadPaused(a, 999));
  EXPECT_FALSE(nodes_.OffloadPaused(a, 1000));
  nodes_.OffloadFailed(a, 500);  // within the backoff: no further step
  EXPECT_FALSE(nodes_.OffloadPaused(a, 1000));
  nodes_.OffloadFailed(a, 1000);  // 2 s
  EXPECT_TRUE(nodes_.OffloadPaused(a, 2999));
  EXPECT_FALSE(nodes_.OffloadPaused(a, 3000));
  int64_t now = 3000;
  for (int i = 0; i < 10; ++i) {
    nodes_.OffloadFailed(a, now);
    now += 60000;
  }
  now -= 60000;
  EXPECT_TRUE(nodes_.OffloadPaused(a, now + 29999));  // capped at 30 s
  EXPECT_FALSE(nodes_.OffloadPaused(a, now + 30000));
  nodes_.OffloadSucceeded(a);
  EXPECT_FALSE(nodes_.OffloadPaused(a, now));
  EXPECT_FALSE(nodes_.OffloadPaused(9999, 0));
}

TEST_F(NodeRegistryTest, MailboxesHandOverTasksAndDropsWithEachTake) {
  const uint32_t a = Add("a");
  EXPECT_FALSE(nodes_.PushOffload(9999, Offload("x")));
  EXPECT_FALSE(nodes_.PushPromotion(9999, Promotion("x", 0)));
  for (const char* k : {"o1", "o2", "o3"})
    ASSERT_TRUE(nodes_.PushOffload(a, Offload(k)));
  nodes_.PushDiskDrop(a, DiskDropMsg{"t", "d1"});
  EXPECT_EQ(nodes_.offload_queued(), 3u);
  NodeTasks t;
  nodes_.TakeTasks("a", 0, /*max_offload=*/2, /*max_promotion=*/0, &t);
  ASSERT_EQ(t.offloads.size(), 2u);
  EXPECT_EQ(t.offloads[0].key, "o1");  // FIFO
  EXPECT_EQ(t.offloads[1].key, "o2");
  ASSERT_EQ(t.disk_drops.size(), 1u);
  EXPECT_EQ(nodes_.offload_queued(), 1u);
  NodeTasks u;
  nodes_.TakeTasks("a", 0, 8, 0, &u);
  ASSERT_EQ(u.offloads.size(), 1u);
  EXPECT_TRUE(u.disk_drops.empty());  // handed over once
  // Removing a node discards what it still had queued.
  ASSERT_TRUE(nodes_.PushOffload(a, Offload("o4")));
  nodes_.Remove("a");
  EXPECT_EQ(nodes_.offload_queued(), 0u);
  NodeTasks none;
  nodes_.TakeTasks("a", 0, 8, 8, &none);
  EXPECT_TRUE(none.offloads.empty());
}

TEST_F(NodeRegistryTest, PromotionsEarliestDeadlineFirstThenFifo) {
  const uint32_t a = Add("a");
  ASSERT_TRUE(nodes_.PushPromotion(a, Promotion("none1", 0)));
  ASSERT_TRUE(nodes_.PushPromotion(a, Promotion("late", 900)));
  ASSERT_TRUE(nodes_.PushPromotion(a, Promotion("none2", 0)));
  ASSERT_TRUE(nodes_.PushPromotion(a, Promotion("early", 100)));
  NodeTasks t;
  nodes_.TakeTasks("a", 0, 0, 8, &t);
  std::vector<std::string> order;
  for (const auto& p : t.promotions) order.push_back(p.key);
  EXPECT_EQ(order,
            (std::vector<std::string>{"early", "late", "none1", "none2"}));
}

TEST_F(NodeRegistryTest, PullingNodeGetsPromotionsOnlyByPull) {
  const uint32_t a = Add("a", /*directory=*/false, /*pulls=*/true);
  ASSERT_TRUE(nodes_.PushPromotion(a, Promotion("p1", 0)));
  ASSERT_TRUE(nodes_.PushPromotion(a, Promotion("p2", 0)));
  NodeTasks t;
  nodes_.TakeTasks("a", 0, 8, 8, &t);
  EXPECT_TRUE(t.promotions.empty());
  std::vector<PromotionTaskMsg> pulled;
  ASSERT_TRUE(nodes_.TakePromotions("a", 1, &pulled));
  ASSERT_EQ(pulled.size(), 1u);
  EXPECT_EQ(pulled[0].key, "p1");
  ASSERT_TRUE(nodes_.TakePromotions("a", 8, &pulled));
  EXPECT_EQ(pulled.size(), 2u);
}

// A beat that states a full promotion queue (room 0) takes none; a pull
// made while that beat is held leaves the room it could not fill open, and
// the held beat hands over promotions queued since, up to that room.
TEST_F(NodeRegistryTest, AHeldFullBeatTakesWhatAPullLeftOpen) {
  const uint32_t a = Add("a");
  ASSERT_TRUE(nodes_.PushPromotion(a, Promotion("p1", 0)));
  NodeTasks full;
  nodes_.TakeTasks("a", 0, 8, /*max_promotion=*/0, &full,
                   /*room_stated=*/true);
  EXPECT_TRUE(full.promotions.empty());
  NodeTasks t;
  std::thread poll([&] { nodes_.TakeTasks("a", 60000, 8, 0, &t, true); });
  ASSERT_TRUE(WaitUntil([&] { return nodes_.held_polls() == 1; },
                        std::chrono::seconds(10)));
  std::vector<PromotionTaskMsg> pulled;
  ASSERT_TRUE(nodes_.TakePromotions("a", 3, &pulled));  // p1; 2 left open
  ASSERT_EQ(pulled.size(), 1u);
  for (const char* k : {"p2", "p3", "p4"})
    ASSERT_TRUE(nodes_.PushPromotion(a, Promotion(k, 0)));
  poll.join();
  // It wakes at the first push and takes what is queued by then: never more
  // than the 2 left open.
  ASSERT_GE(t.promotions.size(), 1u);
  ASSERT_LE(t.promotions.size(), 2u);
  EXPECT_EQ(t.promotions[0].key, "p2");
  if (t.promotions.size() == 2) {
    EXPECT_EQ(t.promotions[1].key, "p3");
  }
  // Taken: the next beat states its room itself.
  NodeTasks after;
  nodes_.TakeTasks("a", 0, 8, 0, &after, true);
  EXPECT_TRUE(after.promotions.empty());
  pulled.clear();
  ASSERT_TRUE(nodes_.TakePromotions("a", 8, &pulled));
  EXPECT_EQ(pulled.size(), 3 - t.promotions.size());
}

// A process killed while its beat is held, and started again under the same
// name before that poll ends: the dead process's poll must not hand the new
// one's tasks to a connection nobody reads (they would wait out the task
// TTL, minutes, before anything ran them).
TEST_F(NodeRegistryTest, AHeldPollOfADeadProcessTakesNothingOfItsSuccessor) {
  Add("a");
  NodeTasks stale;
  std::thread poll([&] { nodes_.TakeTasks("a", 60000, 8, 8, &stale); });
  ASSERT_TRUE(WaitUntil([&] { return nodes_.held_polls() == 1; },
                        std::chrono::seconds(10)));
  // Removed and registered again at once, as MountSegment does for a main
  // segment under a known name, then given work.
  nodes_.Remove("a");
  const uint32_t again = Add("a");
  ASSERT_TRUE(nodes_.PushPromotion(again, Promotion("p1", 0)));
  ASSERT_TRUE(nodes_.PushOffload(again, Offload("o1")));
  poll.join();
  EXPECT_TRUE(stale.promotions.empty());
  EXPECT_TRUE(stale.offloads.empty());
  NodeTasks fresh;
  nodes_.TakeTasks("a", 0, 8, 8, &fresh);
  ASSERT_EQ(fresh.promotions.size(), 1u);
  EXPECT_EQ(fresh.promotions[0].key, "p1");
  ASSERT_EQ(fresh.offloads.size(), 1u);
}

// An older node's beat (no stated room) and a beat made after the pull
// (which states the room as it is now) do not take the room a pull left
// open.
TEST_F(NodeRegistryTest, OnlyAHeldStatedBeatTakesOpenRoom) {
  const uint32_t a = Add("a");
  std::vector<PromotionTaskMsg> pulled;
  ASSERT_TRUE(nodes_.TakePromotions("a", 4, &pulled));  // 4 open
  ASSERT_TRUE(nodes_.PushPromotion(a, Promotion("p1", 0)));
  NodeTasks older;
  nodes_.TakeTasks("a", 0, 8, 0, &older, /*room_stated=*/false);
  EXPECT_TRUE(older.promotions.empty());
  NodeTasks later;
  nodes_.TakeTasks("a", 0, 8, 0, &later, /*room_stated=*/true);
  EXPECT_TRUE(later.promotions.empty());
  NodeTasks room;
  nodes_.TakeTasks("a", 0, 8, 1, &room, true);
  EXPECT_EQ(room.promotions.size(), 1u);
}

TEST_F(NodeRegistryTest, TimedPollReturnsEmptyWhenNoWorkComes) {
  Add("a");
  NodeTasks t;
  nodes_.TakeTasks("a", /*wait_ms=*/5, 8, 8, &t);
  EXPECT_TRUE(t.offloads.empty());
  EXPECT_TRUE(t.promotions.empty());
  nodes_.TakeTasks("nobody", 5, 8, 8, &t);  // unknown: nothing, no hang
  EXPECT_TRUE(t.offloads.empty());
}

TEST_F(NodeRegistryTest, WaitingPollGetsWorkPushedMeanwhile) {
  const uint32_t a = Add("a");
  NodeTasks t;
  // Whether the push lands before or during the wait, the poll returns it
  // (long before its minute is up).
  std::thread poll([&] { nodes_.TakeTasks("a", 60000, 8, 8, &t); });
  ASSERT_TRUE(nodes_.PushOffload(a, Offload("o1")));
  poll.join();
  ASSERT_EQ(t.offloads.size(), 1u);
  EXPECT_EQ(t.offloads[0].key, "o1");
}

TEST_F(NodeRegistryTest, WakeAllEndsEveryPoll) {
  Add("a");
  NodeTasks t;
  std::thread poll([&] { nodes_.TakeTasks("a", 60000, 8, 8, &t); });
  nodes_.WakeAll();
  poll.join();
  EXPECT_TRUE(t.offloads.empty());
  // Once woken for shutdown, a poll no longer waits.
  nodes_.TakeTasks("a", 60000, 8, 8, &t);
  EXPECT_TRUE(t.offloads.empty());
  EXPECT_TRUE(nodes_.WaitDramAcked({{1, 99}}, 60000));
}

TEST_F(NodeRegistryTest, DramEventsOnlyForNodesKeepingADirectory) {
  const uint32_t plain = Add("plain");
  const uint32_t dir = Add("dir", /*directory=*/true);
  const Placement p{1, 2, 64};
  EXPECT_FALSE(nodes_.PushDramFreed(plain, p, 0));
  EXPECT_FALSE(nodes_.PushDiskDropEvent(plain, "t", "k", 1));
  nodes_.PushDramPlaced(plain, DramEventMsg{});
  EXPECT_EQ(nodes_.LastDramSeq(plain), 0u);
  EXPECT_EQ(nodes_.dram_events_queued(), 0u);

  DramEventMsg placed;
  placed.segment = 1;
  placed.key = "k";
  nodes_.PushDramPlaced(dir, placed);
  EXPECT_TRUE(nodes_.PushDramFreed(dir, p, 0));
  EXPECT_TRUE(nodes_.PushDiskDropEvent(dir, "t", "k", 7));
  EXPECT_EQ(nodes_.LastDramSeq(dir), 3u);
  EXPECT_EQ(nodes_.dram_events_queued(), 3u);
  NodeTasks t;
  nodes_.TakeTasks("dir", 0, 0, 0, &t);
  ASSERT_EQ(t.dram_events.size(), 3u);
  EXPECT_EQ(t.dram_events[0].seq, 1u);
  EXPECT_TRUE(t.dram_events[0].placed);
  EXPECT_FALSE(t.dram_events[1].placed);
  EXPECT_TRUE(t.dram_events[2].disk_drop);
  EXPECT_EQ(t.dram_events[2].version, 7u);
  NodeTasks again;
  nodes_.TakeTasks("dir", 0, 0, 0, &again);
  EXPECT_TRUE(again.dram_events.empty());  // sent, not yet acknowledged
}

TEST_F(NodeRegistryTest, FreedRangeIsReleasedOnlyOnceItsEventIsAcked) {
  const uint32_t dir = Add("dir", /*directory=*/true);
  const Placement p1{1, 11, 0}, p2{1, 12, 4096};
  nodes_.PushDramPlaced(dir, DramEventMsg{});      // seq 1
  ASSERT_TRUE(nodes_.PushDramFreed(dir, p1, 10));  // seq 2
  ASSERT_TRUE(nodes_.PushDramFreed(dir, p2, 20));  // seq 3
  std::vector<DueFree> released;
  auto release = [&](const DueFree& f) { released.push_back(f); };
  EXPECT_EQ(nodes_.AckDram("dir", 1, release), 0u);
  EXPECT_TRUE(released.empty());
  EXPECT_EQ(nodes_.AckDram("dir", 99, release), 0u);  // beyond what was issued
  EXPECT_EQ(nodes_.AckDram("dir", 2, release), 1u);
  ASSERT_EQ(released.size(), 1u);
  EXPECT_EQ(released[0].placement.handle, 11u);
  EXPECT_EQ(released[0].not_before_ms, 10);
  EXPECT_EQ(nodes_.dram_events_queued(), 1u);
  EXPECT_EQ(nodes_.AckDram("dir", 3, release), 1u);
  EXPECT_EQ(released.back().placement.handle, 12u);
  EXPECT_EQ(nodes_.dram_events_queued(), 0u);
  EXPECT_EQ(nodes_.AckDram("nobody", 3, release), 0u);
}

TEST_F(NodeRegistryTest, EventsAreSentAgainWhenTheAckSaysTheyWereLost) {
  const uint32_t dir = Add("dir", /*directory=*/true);
  nodes_.PushDramPlaced(dir, DramEventMsg{});
  nodes_.PushDramPlaced(dir, DramEventMsg{});
  NodeTasks t;
  nodes_.TakeTasks("dir", 0, 0, 0, &t);
  ASSERT_EQ(t.dram_events.size(), 2u);
  // The reply was lost: the node has applied only the first.
  nodes_.AckDram("dir", 1, [](const DueFree&) {});
  NodeTasks again;
  nodes_.TakeTasks("dir", 0, 0, 0, &again);
  ASSERT_EQ(again.dram_events.size(), 1u);
  EXPECT_EQ(again.dram_events[0].seq, 2u);
}

TEST_F(NodeRegistryTest, WaitDramAckedEndsOnAckOnNodeGoneOrOnTimeout) {
  const uint32_t dir = Add("dir", /*directory=*/true);
  const uint32_t other = Add("other", /*directory=*/true);
  nodes_.PushDramPlaced(dir, DramEventMsg{});
  nodes_.PushDramPlaced(other, DramEventMsg{});
  const std::vector<std::pair<uint32_t, uint64_t>> want = {{dir, 1}};
  EXPECT_FALSE(nodes_.WaitDramAcked(want, /*timeout_ms=*/5));
  EXPECT_TRUE(nodes_.WaitDramAcked({}, 5));
  // Acknowledged from another thread while (or before) it waits.
  bool acked = false;
  std::thread waiter([&] { acked = nodes_.WaitDramAcked(want, 60000); });
  nodes_.AckDram("dir", 1, [](const DueFree&) {});
  waiter.join();
  EXPECT_TRUE(acked);
  // A node that is gone owes nothing.
  const std::vector<std::pair<uint32_t, uint64_t>> other_want = {{other, 1}};
  EXPECT_FALSE(nodes_.WaitDramAcked(other_want, 5));
  std::thread gone_waiter(
      [&] { acked = nodes_.WaitDramAcked(other_want, 60000); });
  nodes_.Remove("other");
  gone_waiter.join();
  EXPECT_TRUE(acked);
}

}  // namespace
}  // namespace kvpool
