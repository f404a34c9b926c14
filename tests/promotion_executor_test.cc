// The holders' pipelined promotion executor (promotion_inflight_bytes > 0):
// every key lands intact, the bytes in flight never exceed the budget, and
// offload writes keep progressing under a promotion flood.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "common/failpoint.h"
#include "node/node.h"
#include "tests/ssd_fixture.h"

namespace kvpool {
namespace {

using S = PrefetchToMemoryStatus;
using kvpool::testing::kValue;
using kvpool::testing::RandomBytes;
using kvpool::testing::WaitUntil;

class PromotionExecutorTest : public kvpool::testing::SsdFixture {
 protected:
  void SetUp() override {
    SsdFixture::SetUp();
    opts_.num_nodes = 1;
    opts_.segment_size = 32ull << 20;
    opts_.enable_prefetch_trigger = true;
    opts_.prefetch_trigger_lease_ttl_ms = 20000;
    opts_.prefetch_buffer_size = 24ull << 20;
    opts_.promotion_inflight_bytes = 3 * kValue;
    opts_.promotion_workers = 4;
    opts_.promotion_read_batch = 2;
  }
  // Promotes one SSD-only key with its worker paused once at failpoint
  // `point`: while it is held there, with the promotion still in flight,
  // the budget holds none of its bytes; then the key lands intact.
  void ExpectNoBudgetHeldWhilePausedAt(const std::string& point) {
    Start();
    auto client = NewClient();
    auto keys = MakeSsdOnly(*client, 1);
    SsdTier* tier = cluster_->node(0).ssd();
    ASSERT_TRUE(ArmFailpoints(point + "=pause:3000@1").ok());
    kvpool::testing::DisarmFailpointsAtExit disarm;
    auto r = client->BatchPrefetchToMemory(keys);
    ASSERT_TRUE(r.ok());
    ASSERT_EQ(r.value()[0], S::kQueued);
    ASSERT_TRUE(WaitUntil([&] { return FailpointPasses(point) >= 1; },
                          std::chrono::seconds(20)));
    EXPECT_EQ(tier->promotion_inflight_bytes(), 0u);
    EXPECT_EQ(tier->promotion_inflight_peak(), kValue);
    EXPECT_EQ(cluster_->master().service().promotion_counters().in_flight, 1u);
    ASSERT_TRUE(AllInMemory(*client, keys));
    EXPECT_EQ(client->Get(keys[0]).value(), RandomBytes(kValue, 0));
  }
  bool AllInMemory(Client& c, const std::vector<std::string>& keys) {
    return WaitUntil(
        [&] {
          for (const auto& k : keys) {
            if (Tier(c, k) != "memory") return false;
          }
          return true;
        },
        std::chrono::seconds(30));
  }
};

TEST_F(PromotionExecutorTest, EveryKeyLandsIntactWithinTheByteBudget) {
  Start();
  auto client = NewClient();
  auto keys = MakeSsdOnly(*client, 16);
  auto r = client->BatchPrefetchToMemory(keys);
  ASSERT_TRUE(r.ok());
  for (S s : r.value()) ASSERT_EQ(s, S::kQueued);
  ASSERT_TRUE(AllInMemory(*client, keys));
  for (size_t i = 0; i < keys.size(); ++i) {
    EXPECT_EQ(client->Get(keys[i]).value(), RandomBytes(kValue, int(i)));
  }
  SsdTier* tier = cluster_->node(0).ssd();
  // Four workers would hold 8 MiB; the budget holds them to 3 MiB.
  EXPECT_LE(tier->promotion_inflight_peak(), 3 * kValue);
  EXPECT_GE(tier->promotion_inflight_peak(), kValue);
  EXPECT_EQ(tier->promotion_inflight_bytes(), 0u);
  // 1 MiB replicas in this holder's own buffer segment are read in place.
  EXPECT_GT(
      tier->metrics().CounterValue("kvpool_node_promotion_in_place_total", ""),
      0u);
  auto pc = cluster_->master().service().promotion_counters();
  EXPECT_EQ(pc.completed, 16u);
  EXPECT_EQ(pc.failed, 0u);
  EXPECT_EQ(pc.in_flight, 0u);
  // Each replica's directory entry took the checksum its SSD read verified
  // (no second hash), and it is the right one.
  const DramDirectory& dir = cluster_->node(0).directory();
  EXPECT_TRUE(WaitUntil([&] { return dir.noted_checksums_used() >= 16; },
                        std::chrono::seconds(10)))
      << dir.noted_checksums_used();
  EXPECT_EQ(dir.checksum_mismatches(), 0u);
}

// The budget bounds bytes being staged, read or copied: a batch whose bytes
// are in place gives its share back before the notify round trip, so the
// next batch's reads need not wait for the master.
TEST_F(PromotionExecutorTest, TheBudgetIsFreedBeforeTheNotifyRoundTrip) {
  // The worker is held between its write and its notify.
  ExpectNoBudgetHeldWhilePausedAt("node.promotion.after_write");
  if (HasFatalFailure()) return;
  SsdTier* tier = cluster_->node(0).ssd();
  // Where the worker's time went is counted, step by step.
  for (const char* phase : {"alloc", "read", "notify"}) {
    EXPECT_GT(tier->metrics().CounterValue(
                  "kvpool_node_promotion_phase_microseconds_total",
                  std::string("phase=\"") + phase + "\""),
              0u)
        << phase;
  }
}

// A value's share of the budget goes back as its bytes come from the disk,
// not when its batch ends: held to the end, reads that had finished kept a
// third to a half of the budget away from the disk (docs/ssd_tier.md).
TEST_F(PromotionExecutorTest, AValuesShareGoesBackWhenItsBytesArrive) {
  // The worker is held after its read, before it writes or notifies.
  ExpectNoBudgetHeldWhilePausedAt("node.promotion.after_read");
  if (HasFatalFailure()) return;
  EXPECT_EQ(cluster_->node(0).ssd()->promotion_inflight_bytes(), 0u);
}

// Nor does the alloc round trip hold budget: it moves no bytes. With the
// master's alloc held, the batch has taken none of the budget yet.
TEST_F(PromotionExecutorTest, TheAllocRoundTripHoldsNoBudget) {
  Start();
  auto client = NewClient();
  auto keys = MakeSsdOnly(*client, 1);
  SsdTier* tier = cluster_->node(0).ssd();
  ASSERT_TRUE(ArmFailpoints("master.promotion_call.before=pause:3000@1").ok());
  kvpool::testing::DisarmFailpointsAtExit disarm;
  auto r = client->BatchPrefetchToMemory(keys);
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r.value()[0], S::kQueued);
  // The worker is in its alloc call, held at the master.
  ASSERT_TRUE(WaitUntil(
      [&] { return FailpointPasses("master.promotion_call.before") >= 1; },
      std::chrono::seconds(20)));
  EXPECT_EQ(tier->promotion_inflight_bytes(), 0u);
  EXPECT_EQ(tier->promotion_inflight_peak(), 0u);
  ASSERT_TRUE(AllInMemory(*client, keys));
  EXPECT_EQ(tier->promotion_inflight_peak(), kValue);
  EXPECT_EQ(client->Get(keys[0]).value(), RandomBytes(kValue, 0));
}

// The heartbeat brings the executor as many tasks as it asks room for
// (two batches per worker here: 4 x 2 x 2 = 16), not one per beat; the
// sequential worker asks for none (the master's one per beat).
TEST_F(PromotionExecutorTest, TheExecutorAsksForTwoBatchesPerWorker) {
  Start();
  SsdTier* tier = cluster_->node(0).ssd();
  EXPECT_EQ(tier->PromotionRoom(), 16u);
  auto client = NewClient();
  auto keys = MakeSsdOnly(*client, 6);
  tier->PausePromotionsForTest(true);
  ASSERT_TRUE(client->BatchPrefetchToMemory(keys).ok());
  ASSERT_TRUE(WaitUntil([&] { return tier->queued_promotions() == 6; },
                        std::chrono::seconds(20)));
  EXPECT_EQ(tier->PromotionRoom(), 10u);
  tier->PausePromotionsForTest(false);
  ASSERT_TRUE(AllInMemory(*client, keys));
  EXPECT_EQ(tier->PromotionRoom(), 16u);
}

// A full queue on the heartbeat: the beats take no more tasks (before, a
// beat that stated room 0 was handed the knob's one task and answered at
// once, so the queue grew past its target one beat at a time), and the
// room pull refills the queue once the workers have freed half of it.
TEST_F(PromotionExecutorTest, AFullQueueTakesNoTaskByBeatAndRefillsByRoomPull) {
  opts_.promotion_workers = 2;  // a queue of 2 x 2 x 2 = 8
  opts_.prefetch_buffer_size = 32ull << 20;
  Start();
  SsdTier* tier = cluster_->node(0).ssd();
  ASSERT_EQ(tier->PromotionRoom(), 8u);
  auto& svc = cluster_->master().service();
  auto beats = [&] {
    return svc.metrics().HistogramCount("kvpool_master_rpc_duration_seconds",
                                        "method=\"Heartbeat\"");
  };
  auto client = NewClient();
  auto keys = MakeSsdOnly(*client, 20);
  tier->PausePromotionsForTest(true);
  auto r = client->BatchPrefetchToMemory(keys);
  ASSERT_TRUE(r.ok());
  for (S s : r.value()) ASSERT_EQ(s, S::kQueued);
  // A beat that comes while the master is still queuing the trigger's
  // tasks takes only those there (6, say); either way the queue ends with
  // less than half its room free, where beats state room 0.
  ASSERT_TRUE(WaitUntil([&] { return tier->queued_promotions() > 4; },
                        std::chrono::seconds(20)))
      << tier->queued_promotions() << " queued";
  const size_t full = tier->queued_promotions();
  EXPECT_LE(full, 8u);
  // Five more beats see the queue (nearly) full and take nothing.
  const uint64_t seen = beats();
  ASSERT_TRUE(
      WaitUntil([&] { return beats() >= seen + 5; }, std::chrono::seconds(20)));
  EXPECT_EQ(tier->queued_promotions(), full);
  EXPECT_EQ(tier->pull_stats().pulls, 0u);  // no room, no pull
  tier->PausePromotionsForTest(false);
  ASSERT_TRUE(AllInMemory(*client, keys));
  const PullStats p = tier->pull_stats();
  EXPECT_GE(p.pulls_on_room, 1u);
  EXPECT_EQ(p.pulls_on_room, p.pulls);
  EXPECT_LE(p.max_tasks_per_pull, 8u);
  for (size_t i = 0; i < keys.size(); ++i)
    EXPECT_EQ(client->Get(keys[i]).value(), RandomBytes(kValue, int(i)));
  EXPECT_EQ(svc.promotion_counters().completed, keys.size());
}

TEST_F(PromotionExecutorTest, StagingPoolReadsThenCopiesEveryKeyIntact) {
  // Two slots for four workers: some reads wait for no slot and fall back
  // to reading in place; every value lands intact either way.
  opts_.promotion_staging_bytes = 2 * kValue;
  Start();
  auto client = NewClient();
  auto keys = MakeSsdOnly(*client, 12);
  auto r = client->BatchPrefetchToMemory(keys);
  ASSERT_TRUE(r.ok());
  ASSERT_TRUE(AllInMemory(*client, keys));
  for (size_t i = 0; i < keys.size(); ++i) {
    EXPECT_EQ(client->Get(keys[i]).value(), RandomBytes(kValue, int(i)));
  }
  SsdTier* tier = cluster_->node(0).ssd();
  const uint64_t pooled = tier->metrics().CounterValue(
      "kvpool_node_promotion_staged_in_pool_total", "");
  const uint64_t in_place =
      tier->metrics().CounterValue("kvpool_node_promotion_in_place_total", "");
  EXPECT_GT(pooled, 0u);
  EXPECT_EQ(pooled + in_place, 12u);
  EXPECT_EQ(cluster_->master().service().promotion_counters().completed, 12u);
}

TEST_F(PromotionExecutorTest, ATaskLargerThanTheBudgetRunsAlone) {
  opts_.promotion_inflight_bytes = kValue / 2;
  Start();
  auto client = NewClient();
  auto keys = MakeSsdOnly(*client, 4);
  ASSERT_TRUE(client->BatchPrefetchToMemory(keys).ok());
  ASSERT_TRUE(AllInMemory(*client, keys));
  EXPECT_EQ(cluster_->node(0).ssd()->promotion_inflight_peak(), kValue);
}

TEST_F(PromotionExecutorTest, OffloadsProgressUnderAPromotionFlood) {
  opts_.promotion_inflight_bytes = 8 * kValue;
  Start();
  auto client = NewClient();
  auto keys = MakeSsdOnly(*client, 20);
  ASSERT_TRUE(client->BatchPrefetchToMemory(keys).ok());
  // New puts while the holder promotes: their offloads must complete too.
  std::vector<std::string> fresh;
  for (int i = 0; i < 6; ++i) {
    fresh.push_back("fresh-" + std::to_string(i));
    ASSERT_TRUE(client->Put(fresh.back(), RandomBytes(kValue, 500 + i)).ok());
  }
  EXPECT_TRUE(AllHaveDiskCopies(*client, fresh));
  EXPECT_TRUE(AllInMemory(*client, keys));
  for (size_t i = 0; i < fresh.size(); ++i) {
    EXPECT_EQ(client->Get(fresh[i]).value(), RandomBytes(kValue, 500 + int(i)));
  }
}

TEST_F(PromotionExecutorTest, OffByDefaultIsTheSequentialWorker) {
  opts_.promotion_inflight_bytes = 0;
  Start();
  auto client = NewClient();
  auto keys = MakeSsdOnly(*client, 6);
  ASSERT_TRUE(client->BatchPrefetchToMemory(keys).ok());
  ASSERT_TRUE(AllInMemory(*client, keys));
  // One worker, batches of promotion_read_batch (2) keys.
  EXPECT_LE(cluster_->node(0).ssd()->promotion_inflight_peak(), 2 * kValue);
  // And it asks the heartbeat for no room: one task per beat, as before.
  EXPECT_EQ(cluster_->node(0).ssd()->PromotionRoom(), 0u);
}

// A get reading the disk holds back promotion reads submitted after it
// (promotion_yield_to_gets_ms), and with the rule off it does not. The get
// is held inside its read by a failpoint, the promotion of another key is
// triggered meanwhile.
class PromotionYieldTest : public PromotionExecutorTest,
                           public ::testing::WithParamInterface<bool> {};

TEST_P(PromotionYieldTest, APromotionWaitsForAGetReadingTheDiskOnlyWhenOn) {
  const bool on = GetParam();
  opts_.promotion_yield_to_gets_ms = on ? 10000 : 0;  // far past the 4 s
  // The get is held 4 s inside its read: its lease must outlast that.
  opts_.default_kv_lease_ttl = 20000;
  Start();
  auto client = NewClient();
  auto keys = MakeSsdOnly(*client, 2);
  SsdTier* tier = cluster_->node(0).ssd();
  ASSERT_TRUE(ArmFailpoints("node.get_read.during=pause:4000@1").ok());
  kvpool::testing::DisarmFailpointsAtExit disarm;
  std::atomic<bool> get_done{false};
  std::thread get([&] {
    auto v = client->Get(keys[0]);
    ASSERT_TRUE(v.ok()) << v.status().ToString();
    EXPECT_EQ(v.value(), RandomBytes(kValue, 0));
    get_done = true;
  });
  struct Join {
    std::thread* t;
    ~Join() {
      if (t->joinable()) t->join();
    }
  } join{&get};
  ASSERT_TRUE(
      WaitUntil([&] { return FailpointPasses("node.get_read.during") >= 1; },
                std::chrono::seconds(20)));
  auto other = NewClient();
  auto r = other->BatchPrefetchToMemory({keys[1]});
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r.value()[0], S::kQueued);
  if (on) {
    // The promotion reached its read and found the get there.
    ASSERT_TRUE(WaitUntil([&] { return tier->gets_first_stats().yields >= 1; },
                          std::chrono::seconds(20)));
    EXPECT_FALSE(get_done.load());
    EXPECT_NE(Tier(*other, keys[1]), "memory");
  } else {
    // The promotion lands while the get is still in its read.
    ASSERT_TRUE(AllInMemory(*other, {keys[1]}));
    EXPECT_FALSE(get_done.load()) << "the get's 4 s read ended first";
    EXPECT_EQ(tier->gets_first_stats().yields, 0u);
  }
  get.join();
  ASSERT_TRUE(AllInMemory(*other, {keys[1]}));
  EXPECT_EQ(other->Get(keys[1]).value(), RandomBytes(kValue, 1));
  const auto s = tier->gets_first_stats();
  EXPECT_EQ(s.timed_out, 0u);
  EXPECT_EQ(s.gets_reading, 0);
  if (on) {
    EXPECT_GT(s.waited_us, 0u);
  }
  EXPECT_EQ(cluster_->master().service().promotion_counters().failed, 0u);
}

INSTANTIATE_TEST_SUITE_P(OnAndOff, PromotionYieldTest, ::testing::Bool());

}  // namespace
}  // namespace kvpool
