// Router-triggered prefetch end to end on a LocalCluster with the SSD tier:
// the prefetch buffer (strict landing, full => THROTTLED), the promotion
// pull thread (cadence and per-pull cap), the batched read knob, the reaper
// for a holder that stops pulling, and a pulling holder under an older
// master.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <chrono>
#include <thread>

#include "tests/ssd_fixture.h"

namespace kvpool {
namespace {

using S = PrefetchToMemoryStatus;
using kvpool::testing::kValue;
using kvpool::testing::RandomBytes;
using kvpool::testing::WaitUntil;

class RouterPrefetchTest : public kvpool::testing::SsdFixture {
 protected:
  void SetUp() override {
    SsdFixture::SetUp();
    opts_.enable_prefetch_trigger = true;
    opts_.prefetch_trigger_lease_ttl_ms = 20000;
  }
  uint64_t Used(const std::string& kind) {
    uint64_t used = 0;
    for (const auto& s : client_->Stat().value().segments)
      if (s.kind == kind) used += s.used;
    return used;
  }
  // The segment id of the key's COMPLETE memory replica (0 if none).
  uint64_t MemorySegment(const std::string& key) {
    auto t = client_->BatchGetReplicaDesc({key});
    if (!t[0].ok()) return 0;
    for (const auto& r : t[0]->replicas) {
      if (r.kind == ReplicaInfo::Kind::kMemory && r.complete)
        return r.segment_id;
    }
    return 0;
  }
  bool AllInMemory(
      const std::vector<std::string>& keys,
      std::chrono::milliseconds within = std::chrono::seconds(30)) {
    return WaitUntil(
        [&] {
          for (const auto& k : keys) {
            if (Tier(*client_, k) != "memory") return false;
          }
          return true;
        },
        within);
  }
  std::vector<uint64_t> BufferIds() {
    std::vector<uint64_t> ids;
    for (size_t i = 0; i < cluster_->num_nodes(); ++i)
      ids.push_back(cluster_->node(i).buffer_segment_id());
    return ids;
  }
  // Promotion tasks the master never issued.
  static std::vector<rpc::PromotionTask> UnknownTasks(size_t n) {
    std::vector<rpc::PromotionTask> tasks(n);
    for (size_t i = 0; i < n; ++i) {
      tasks[i].set_tenant("default");
      tasks[i].set_key("no-such-task-" + std::to_string(i));
      tasks[i].set_size(kValue);
      tasks[i].set_task_id(1000 + i);
    }
    return tasks;
  }
  std::unique_ptr<Client> client_;
};

TEST_F(RouterPrefetchTest, StrictLandingLeavesTheMainCacheUnchanged) {
  opts_.prefetch_buffer_size = 8ull << 20;
  Start();
  client_ = NewClient();
  auto keys = MakeSsdOnly(*client_, 4);
  const uint64_t main_before = Used("main");
  auto r = client_->BatchPrefetchToMemory(keys);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  for (S s : r.value()) EXPECT_EQ(s, S::kQueued);
  ASSERT_TRUE(AllInMemory(keys));
  auto buffers = BufferIds();
  for (const auto& k : keys) {
    uint64_t seg = MemorySegment(k);
    EXPECT_TRUE(seg == buffers[0] || seg == buffers[1]) << k;
  }
  EXPECT_EQ(Used("main"), main_before);
  EXPECT_EQ(Used("prefetch_buffer"), keys.size() * kValue);
  // The buffer's own reading on the master's /metrics.
  const std::string metrics =
      cluster_->master().service().metrics().RenderPrometheus();
  EXPECT_NE(
      metrics.find("kvpool_master_watermark_ratio{kind=\"prefetch_buffer\"}"),
      std::string::npos);
  // The bytes read back are the bytes written, from DRAM.
  uint64_t ssd_before = client_->counters().ssd_bytes_read;
  for (size_t i = 0; i < keys.size(); ++i)
    EXPECT_EQ(client_->Get(keys[i]).value(), RandomBytes(kValue, int(i)));
  EXPECT_EQ(client_->counters().ssd_bytes_read, ssd_before);
}

TEST_F(RouterPrefetchTest, FullBufferThrottlesTheRest) {
  // 2 MiB buffers at a 0.9 watermark hold one 1 MiB block per holder.
  opts_.prefetch_buffer_size = 2ull << 20;
  Start();
  client_ = NewClient();
  auto keys = MakeSsdOnly(*client_, 8);
  auto r = client_->BatchPrefetchToMemory(keys);
  ASSERT_TRUE(r.ok());
  int queued = 0, throttled = 0;
  for (S s : r.value()) {
    queued += s == S::kQueued;
    throttled += s == S::kThrottledWatermark;
  }
  EXPECT_LE(queued, 2);
  EXPECT_GE(queued, 1);
  EXPECT_EQ(queued + throttled, 8);
  EXPECT_EQ(cluster_->master().service().metrics().CounterValue(
                "kvpool_master_prefetch_buffer_full_total"),
            uint64_t(throttled));
}

TEST_F(RouterPrefetchTest, PullThreadHonoursIntervalAndPerPullCap) {
  opts_.num_nodes = 1;
  opts_.segment_size = 32ull << 20;
  opts_.prefetch_buffer_size = 24ull << 20;
  opts_.promotion_pull = true;
  opts_.promotion_pull_interval_ms = 100;
  opts_.promotion_max_per_pull = 4;
  Start();
  client_ = NewClient();
  auto keys = MakeSsdOnly(*client_, 16);
  SsdTier* tier = cluster_->node(0).ssd();
  const PullStats before = tier->pull_stats();
  auto t0 = std::chrono::steady_clock::now();
  auto r = client_->BatchPrefetchToMemory(keys);
  ASSERT_TRUE(r.ok());
  for (S s : r.value()) ASSERT_EQ(s, S::kQueued);
  ASSERT_TRUE(AllInMemory(keys));
  auto elapsed = std::chrono::steady_clock::now() - t0;
  const PullStats after = tier->pull_stats();
  EXPECT_LE(after.max_tasks_per_pull, 4u);
  EXPECT_EQ(after.tasks - before.tasks, 16u);
  // 16 tasks at <= 4 per pull need >= 4 pulls, 100 ms apart: >= 300 ms.
  EXPECT_GE(elapsed, std::chrono::milliseconds(300));
  EXPECT_FALSE(after.master_lacks_pull);
  // The node's /status shows its buffer segment and the pull thread.
  auto js = nlohmann::json::parse(cluster_->node(0).StatusJson());
  EXPECT_EQ(js["prefetch_buffer"]["segment_id"].get<uint64_t>(),
            cluster_->node(0).buffer_segment_id());
  EXPECT_NE(cluster_->node(0).buffer_segment_id(), 0u);
  EXPECT_TRUE(js["ssd"]["promotion_pull"]["enabled"].get<bool>());
  EXPECT_EQ(js["ssd"]["promotion_pull"]["tasks"].get<uint64_t>(), after.tasks);
  // None of them travelled on the heartbeat: every task was pulled.
  EXPECT_EQ(cluster_->master().service().promotion_counters().completed, 16u);
}

// With the pipelined executor the pull thread asks for the room in its
// queue (2 batches per worker = 8 here), not promotion_max_per_pull (2), and
// pulls again at once while the master has more and room remains, instead
// of waiting out the cadence (1 s here) between pulls.
TEST_F(RouterPrefetchTest, AnExecutorPullsWhatItHasRoomFor) {
  KVPOOL_SKIP_UNDER_RFC_PROFILE();
  opts_.num_nodes = 1;
  opts_.segment_size = 32ull << 20;
  opts_.prefetch_buffer_size = 24ull << 20;
  opts_.promotion_pull = true;
  opts_.promotion_pull_interval_ms = 1000;
  opts_.promotion_max_per_pull = 2;
  opts_.promotion_inflight_bytes = 3 * kValue;
  opts_.promotion_workers = 2;
  opts_.promotion_read_batch = 2;
  Start();
  client_ = NewClient();
  auto keys = MakeSsdOnly(*client_, 16);
  SsdTier* tier = cluster_->node(0).ssd();
  EXPECT_EQ(tier->PromotionRoom(), 0u);  // the heartbeat brings none
  EXPECT_EQ(tier->ExecutorRoom(), 8u);
  const PullStats before = tier->pull_stats();
  auto r = client_->BatchPrefetchToMemory(keys);
  ASSERT_TRUE(r.ok());
  for (S s : r.value()) ASSERT_EQ(s, S::kQueued);
  ASSERT_TRUE(AllInMemory(keys));
  const PullStats after = tier->pull_stats();
  EXPECT_EQ(after.tasks - before.tasks, 16u);
  EXPECT_GT(after.max_tasks_per_pull, 2u);
  EXPECT_LE(after.max_tasks_per_pull, 8u);
  for (size_t i = 0; i < keys.size(); ++i)
    EXPECT_EQ(client_->Get(keys[i]).value(), RandomBytes(kValue, int(i)));
}

// Once the executor's queue is full and the master has more, the pull
// thread pulls again as soon as the workers have taken half the queue, not
// a cadence later (3 s here): the 12 tasks left after the first pull need 3
// more pulls of at most 4, and all come before the next cadence pull.
TEST_F(RouterPrefetchTest, AFullExecutorQueuePullsAgainWhenWorkersFreeRoom) {
  KVPOOL_SKIP_UNDER_RFC_PROFILE();
  opts_.num_nodes = 1;
  opts_.segment_size = 32ull << 20;
  opts_.prefetch_buffer_size = 24ull << 20;
  opts_.promotion_pull = true;
  opts_.promotion_pull_interval_ms = 3000;
  opts_.promotion_max_per_pull = 1;
  opts_.promotion_inflight_bytes = 2 * kValue;
  opts_.promotion_workers = 2;
  opts_.promotion_read_batch = 1;
  Start();
  client_ = NewClient();
  auto keys = MakeSsdOnly(*client_, 16);
  SsdTier* tier = cluster_->node(0).ssd();
  ASSERT_EQ(tier->ExecutorRoom(), 4u);
  tier->PausePromotionsForTest(true);
  auto r = client_->BatchPrefetchToMemory(keys);
  ASSERT_TRUE(r.ok());
  for (S s : r.value()) ASSERT_EQ(s, S::kQueued);
  // The first pull (on the cadence) fills the queue.
  ASSERT_TRUE(WaitUntil([&] { return tier->queued_promotions() == 4; },
                        std::chrono::seconds(10)));
  const PullStats full = tier->pull_stats();
  EXPECT_EQ(tier->ExecutorRoom(), 0u);
  tier->PausePromotionsForTest(false);
  // Within less than the cadence: a full queue waiting out the cadence
  // would need 3 more periods (9 s).
  EXPECT_TRUE(AllInMemory(keys, std::chrono::milliseconds(2500)));
  ASSERT_TRUE(AllInMemory(keys));
  const PullStats after = tier->pull_stats();
  EXPECT_EQ(after.tasks, 16u);
  EXPECT_LE(after.max_tasks_per_pull, 4u);
  EXPECT_GE(after.pulls_on_room - full.pulls_on_room, 3u);
  for (size_t i = 0; i < keys.size(); ++i)
    EXPECT_EQ(client_->Get(keys[i]).value(), RandomBytes(kValue, int(i)));
}

TEST_F(RouterPrefetchTest, BatchedReadsPromoteEveryKeyIntact) {
  opts_.prefetch_buffer_size = 16ull << 20;
  opts_.promotion_pull = true;
  opts_.promotion_read_batch = 8;
  Start();
  client_ = NewClient();
  auto keys = MakeSsdOnly(*client_, 12);
  auto r = client_->BatchPrefetchToMemory(keys);
  ASSERT_TRUE(r.ok());
  ASSERT_TRUE(AllInMemory(keys));
  for (size_t i = 0; i < keys.size(); ++i)
    EXPECT_EQ(client_->Get(keys[i]).value(), RandomBytes(kValue, int(i)));
  auto pc = cluster_->master().service().promotion_counters();
  EXPECT_EQ(pc.completed, 12u);
  EXPECT_EQ(pc.failed, 0u);
}

TEST_F(RouterPrefetchTest, HolderThatStopsPullingIsReaped) {
  opts_.num_nodes = 1;
  opts_.prefetch_buffer_size = 4ull << 20;
  opts_.promotion_pull = true;
  opts_.promotion_task_ttl_sec = 1;
  Start();
  client_ = NewClient();
  auto keys = MakeSsdOnly(*client_, 2);
  cluster_->node(0).ssd()->PausePullForTest(true);
  auto r = client_->BatchPrefetchToMemory(keys);
  ASSERT_TRUE(r.ok());
  for (S s : r.value()) ASSERT_EQ(s, S::kQueued);
  auto& svc = cluster_->master().service();
  ASSERT_TRUE(WaitUntil([&] { return svc.promotion_counters().expired == 2; },
                        std::chrono::seconds(20)));
  EXPECT_EQ(svc.promotion_counters().in_flight, 0u);
  EXPECT_EQ(Tier(*client_, keys[0]), "local_disk");  // the SSD copy stays
  // Pin, quota and buffer reservation are back: a new trigger queues, and
  // with pulling resumed it lands.
  cluster_->node(0).ssd()->PausePullForTest(false);
  r = client_->BatchPrefetchToMemory(keys);
  ASSERT_TRUE(r.ok());
  for (S s : r.value()) EXPECT_EQ(s, S::kQueued);
  EXPECT_TRUE(AllInMemory(keys));
}

uint64_t DeadlineExpired(LocalCluster& c, const char* where) {
  return c.master().service().metrics().CounterValue(
      "kvpool_master_promotion_deadline_expired_total",
      std::string("where=\"") + where + "\"");
}

TEST_F(RouterPrefetchTest, TaskPastItsDeadlineAtTheMasterIsDropped) {
  opts_.num_nodes = 1;
  opts_.prefetch_buffer_size = 4ull << 20;
  opts_.promotion_pull = true;
  Start();
  client_ = NewClient();
  auto keys = MakeSsdOnly(*client_, 2);
  EXPECT_EQ(client_->BatchPrefetchToMemory(keys, -1).code(),
            ErrorCode::INVALID_PARAMS);
  cluster_->node(0).ssd()->PausePullForTest(true);
  auto r = client_->BatchPrefetchToMemory(keys, /*deadline_in_ms=*/100);
  ASSERT_TRUE(r.ok());
  for (S s : r.value()) ASSERT_EQ(s, S::kQueued);
  // The deadline is a time, not an event: let it pass while nobody pulls.
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  cluster_->node(0).ssd()->PausePullForTest(false);
  auto& svc = cluster_->master().service();
  ASSERT_TRUE(WaitUntil([&] { return svc.promotion_counters().expired == 2; },
                        std::chrono::seconds(20)));
  EXPECT_EQ(DeadlineExpired(*cluster_, "master"), 2u);
  EXPECT_EQ(svc.promotion_counters().in_flight, 0u);
  EXPECT_EQ(Tier(*client_, keys[0]), "local_disk");  // nothing was read
  // Everything was released: asked again in time, they land intact.
  r = client_->BatchPrefetchToMemory(keys, /*deadline_in_ms=*/20000);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(AllInMemory(keys));
  for (const auto& k : keys) {
    auto v = client_->Get(k);
    ASSERT_TRUE(v.ok());
    EXPECT_EQ(v->size(), kValue);
  }
}

TEST_F(RouterPrefetchTest, TaskPastItsDeadlineAtTheHolderIsNotRead) {
  opts_.num_nodes = 1;
  opts_.prefetch_buffer_size = 4ull << 20;
  Start();
  client_ = NewClient();
  auto keys = MakeSsdOnly(*client_, 1);
  SsdTier& tier = *cluster_->node(0).ssd();
  tier.PausePromotionsForTest(true);
  auto r = client_->BatchPrefetchToMemory(keys, /*deadline_in_ms=*/100);
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r.value()[0], S::kQueued);
  ASSERT_TRUE(WaitUntil([&] { return tier.queued_promotions() == 1; },
                        std::chrono::seconds(20)));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  tier.PausePromotionsForTest(false);
  auto& svc = cluster_->master().service();
  ASSERT_TRUE(WaitUntil([&] { return svc.promotion_counters().expired == 1; },
                        std::chrono::seconds(20)));
  EXPECT_EQ(DeadlineExpired(*cluster_, "holder"), 1u);
  EXPECT_EQ(svc.promotion_counters().failed, 0u);
  // Reported as expired, never staged or read.
  EXPECT_EQ(tier.metrics().CounterValue("kvpool_node_promotion_total",
                                        "result=\"expired\""),
            1u);
  EXPECT_EQ(tier.metrics().CounterValue("kvpool_node_promotion_total",
                                        "result=\"ok\""),
            0u);
  EXPECT_EQ(Tier(*client_, keys[0]), "local_disk");
}

TEST_F(RouterPrefetchTest, HolderQueueIsEarliestDeadlineFirstToo) {
  opts_.num_nodes = 1;
  opts_.prefetch_buffer_size = 4ull << 20;
  Start();
  client_ = NewClient();
  auto keys = MakeSsdOnly(*client_, 3);
  SsdTier& tier = *cluster_->node(0).ssd();
  tier.PausePromotionsForTest(true);
  // One trigger per key, each its own request: late, none, early.
  ASSERT_TRUE(client_->BatchPrefetchToMemory({keys[0]}, 20000).ok());
  ASSERT_TRUE(client_->BatchPrefetchToMemory({keys[1]}).ok());
  ASSERT_TRUE(client_->BatchPrefetchToMemory({keys[2]}, 10000).ok());
  ASSERT_TRUE(WaitUntil([&] { return tier.queued_promotions() == 3; },
                        std::chrono::seconds(20)));
  EXPECT_EQ(tier.queued_promotion_keys(),
            (std::vector<std::string>{keys[2], keys[0], keys[1]}));
  tier.PausePromotionsForTest(false);
  EXPECT_TRUE(AllInMemory(keys));
}

// What a node holds after a failover (docs/ha.md): promotions queued under
// task ids the new leader never issued. Resubmitted, they run under new ids;
// without that, each would fail as an unknown task.
TEST_F(RouterPrefetchTest, QueuedPromotionsUnknownToTheMasterAreResubmitted) {
  opts_.num_nodes = 1;
  Start();
  client_ = NewClient();
  auto keys = MakeSsdOnly(*client_, 3);
  SsdTier& tier = *cluster_->node(0).ssd();
  tier.PausePromotionsForTest(true);
  google::protobuf::RepeatedPtrField<rpc::PromotionTask> tasks;
  for (size_t i = 0; i < keys.size(); ++i) {
    auto* t = tasks.Add();
    t->set_tenant("default");
    t->set_key(keys[i]);
    t->set_size(kValue);
    t->set_task_id(900000 + i);  // issued by no master that is still up
  }
  // And one whose key the master does not know at all: dropped.
  auto* gone = tasks.Add();
  gone->set_tenant("default");
  gone->set_key("no-such-key");
  gone->set_size(kValue);
  gone->set_task_id(900100);
  tier.EnqueuePromotions(tasks);
  ASSERT_EQ(tier.queued_promotions(), 4u);
  tier.ResubmitPromotions();
  EXPECT_EQ(tier.queued_promotions(), 3u);
  EXPECT_EQ(
      tier.metrics().CounterValue("kvpool_node_promotions_resubmitted_total"),
      3u);
  tier.PausePromotionsForTest(false);
  EXPECT_TRUE(AllInMemory(keys));
  for (const auto& k : keys) {
    auto v = client_->Get(k);
    ASSERT_TRUE(v.ok()) << v.status().ToString();
    EXPECT_EQ(v->size(), kValue);
  }
}

TEST_F(RouterPrefetchTest, BatchedChainFallsBackKeyByKeyUnderAnOlderMaster) {
  opts_.num_nodes = 1;
  opts_.enable_prefetch_trigger = false;
  opts_.emulate_pre_prefetch_master = true;
  Start();
  SsdTier* tier = cluster_->node(0).ssd();
  std::vector<rpc::PromotionTask> tasks = UnknownTasks(3);
  auto got = tier->PromoteKeysFromLocalDisk(tasks);
  ASSERT_EQ(got.size(), tasks.size());
  for (const auto& s : got) EXPECT_FALSE(s.ok());  // unknown tasks, key by key
  EXPECT_FALSE(tier->batch_rpcs());
}

TEST_F(RouterPrefetchTest, BatchedChainUsesOneRoundTripPerStep) {
  opts_.num_nodes = 1;
  Start();
  SsdTier* tier = cluster_->node(0).ssd();
  std::vector<rpc::PromotionTask> tasks = UnknownTasks(3);
  auto got = tier->PromoteKeysFromLocalDisk(tasks);
  for (const auto& s : got) EXPECT_EQ(s.code(), ErrorCode::OBJECT_NOT_FOUND);
  EXPECT_TRUE(tier->batch_rpcs());
  EXPECT_EQ(cluster_->master().service().promotion_counters().in_flight, 0u);
}

TEST_F(RouterPrefetchTest, RestartedHolderMountsItsBufferAndPullsAgain) {
  opts_.num_nodes = 1;
  opts_.prefetch_buffer_size = 8ull << 20;
  opts_.promotion_pull = true;
  Start();
  client_ = NewClient();
  auto keys = MakeSsdOnly(*client_, 2);
  const uint64_t old_buffer = cluster_->node(0).buffer_segment_id();
  ASSERT_TRUE(cluster_->RestartNode(0).ok());
  // The SSD copies are registered again and a new buffer is mounted.
  ASSERT_TRUE(WaitUntil(
      [&] {
        return Tier(*client_, keys[0]) == "local_disk" &&
               Tier(*client_, keys[1]) == "local_disk";
      },
      std::chrono::seconds(20)));
  const uint64_t new_buffer = cluster_->node(0).buffer_segment_id();
  EXPECT_NE(new_buffer, 0u);
  EXPECT_NE(new_buffer, old_buffer);
  auto r = client_->BatchPrefetchToMemory(keys);
  ASSERT_TRUE(r.ok());
  for (S s : r.value()) EXPECT_EQ(s, S::kQueued);
  ASSERT_TRUE(AllInMemory(keys));
  for (const auto& k : keys) EXPECT_EQ(MemorySegment(k), new_buffer);
  for (size_t i = 0; i < keys.size(); ++i)
    EXPECT_EQ(client_->Get(keys[i]).value(), RandomBytes(kValue, int(i)));
}

TEST_F(RouterPrefetchTest, PullingHolderUnderAnOlderMasterUsesTheHeartbeat) {
  opts_.enable_prefetch_trigger = false;
  opts_.emulate_pre_prefetch_master = true;
  opts_.promotion_on_hit = true;
  opts_.promotion_pull = true;
  Start();
  client_ = NewClient();
  auto keys = MakeSsdOnly(*client_, 1);
  SsdTier* tier = cluster_->node(0).ssd();
  SsdTier* tier1 = cluster_->node(1).ssd();
  ASSERT_TRUE(WaitUntil(
      [&] {
        return tier->pull_stats().master_lacks_pull &&
               tier1->pull_stats().master_lacks_pull;
      },
      std::chrono::seconds(10)));
  // Promote-on-hit still works: the old master hands the task over with
  // the heartbeat (admission needs two hits).
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(client_->Get(keys[0]).ok());
  EXPECT_TRUE(AllInMemory(keys));
}

TEST_F(RouterPrefetchTest, PullResumesAfterTheMasterRollsForward) {
  // Roll-back then roll-forward: the pull thread used to exit for good on
  // the old master's UNIMPLEMENTED, while the node's later mounts still
  // declared pulls_promotions, so promotions waited for the 600 s reaper.
  opts_.num_nodes = 1;
  opts_.enable_prefetch_trigger = false;
  opts_.emulate_pre_prefetch_master = true;
  opts_.promotion_on_hit = true;
  opts_.promotion_pull = true;
  opts_.client_ttl = 1;
  Start();
  client_ = NewClient();
  auto keys = MakeSsdOnly(*client_, 1);
  SsdTier* tier = cluster_->node(0).ssd();
  ASSERT_TRUE(WaitUntil([&] { return tier->pull_stats().master_lacks_pull; },
                        std::chrono::seconds(10)));
  cluster_->master().service().SetEmulatePrePrefetchForTest(false);
  // The node mounts again (declared dead while silent, then back), now
  // with its pull flag honoured.
  cluster_->node(0).PauseHeartbeats(true);
  tier->PausePullForTest(true);  // a pull counts as a sign of life too
  ASSERT_TRUE(WaitUntil([&] { return client_->Stat()->segments.empty(); },
                        std::chrono::seconds(20)));
  tier->PausePullForTest(false);
  cluster_->node(0).PauseHeartbeats(false);
  ASSERT_TRUE(WaitUntil(
      [&] {
        return client_->Stat()->segments.size() == 1 &&
               !tier->pull_stats().master_lacks_pull;
      },
      std::chrono::seconds(20)));
  // Promote-on-hit: its task now travels by pull only. (Gets repeat: the
  // re-mounted segment is held for a lease period, and promotions wait for
  // room below the watermark.)
  EXPECT_TRUE(WaitUntil(
      [&] {
        // Right after the remount the holder may not have re-registered
        // its SSD copy yet: a miss then is expected, and the get repeats.
        auto got = client_->Get(keys[0]);
        if (!got.ok()) {
          std::cerr << "get: " << got.status().ToString() << "\n";
          return false;
        }
        return Tier(*client_, keys[0]) == "memory";
      },
      std::chrono::seconds(30)));
}

}  // namespace
}  // namespace kvpool
