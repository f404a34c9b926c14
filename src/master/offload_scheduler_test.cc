#include "master/offload_scheduler.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

namespace kvpool {
namespace {

constexpr uint64_t kKiB = 1024;

// The scheduler over a real object table, real segments and a real node
// registry (whose mailboxes it pushes to), on a fake clock.
class OffloadSchedulerTest : public ::testing::Test {
 protected:
  OffloadSchedulerTest()
      : objects_(std::make_unique<ObjectStore>()),
        segments_(SegmentManager::Strategy::kFreeRatioFirst),
        nodes_(&clock_) {
    holder_ = nodes_.Register("holder", "127.0.0.1:1", "host",
                              /*ssd_enabled=*/true);
    SegmentInfo info;
    info.node_id = "holder";
    info.capacity = 64 * kKiB;
    EXPECT_TRUE(segments_.Mount(info).ok());
    Make({});
  }

  void Make(OffloadScheduler::Options options) {
    scheduler_ = std::make_unique<OffloadScheduler>(
        options, &clock_, segments_, nodes_, metrics_,
        [](uint32_t) { return std::string("t"); });
  }

  ObjectKey Key(const std::string& key) { return ObjectKey{0, key}; }
  ObjectStore::Shard& ShardOf(const std::string& key) {
    return objects_->ShardFor(Key(key));
  }

  // A COMPLETE object with one MEMORY replica on the holder, version 1.
  void Add(const std::string& key) {
    std::vector<Placement> p = segments_.Allocate(kKiB, 1, SegmentKind::kMain,
                                                  std::vector<std::string>{});
    ASSERT_EQ(p.size(), 1u);
    auto& shard = ShardOf(key);
    MutexLock lock(&shard.mu());
    // Filled in place: GCC 12 takes a fresh local ObjectMeta's first
    // push_back for a read of uninitialized memory (absl::InlinedVector's,
    // before ReplicaList).
    ObjectMeta& m = shard.objects()[Key(key)];
    m.size = kKiB;
    m.version = 1;
    m.replicas.push_back(Replica{p[0].offset, p[0].segment, p[0].handle,
                                 ReplicaKind::kMemory,
                                 ReplicaStatus::kComplete});
  }

  bool Queue(const std::string& key, bool* paused = nullptr) {
    auto& shard = ShardOf(key);
    MutexLock lock(&shard.mu());
    return scheduler_->Queue(shard, Key(key),
                             shard.objects().find(Key(key))->second, paused);
  }
  bool Pinned(const std::string& key) {
    auto& shard = ShardOf(key);
    MutexLock lock(&shard.mu());
    return shard.offloads().count(Key(key)) == 1;
  }
  bool Answer(const std::string& key, uint32_t node, uint64_t version) {
    auto& shard = ShardOf(key);
    MutexLock lock(&shard.mu());
    int64_t created = -1;
    return scheduler_->Answer(shard, ObjectKeyView{0, key}, node, version,
                              &created);
  }
  size_t TasksHanded() {
    NodeTasks tasks;
    nodes_.TakeTasks("holder", 0, 100, 0, &tasks);
    return tasks.offloads.size();
  }
  uint64_t Counter(const std::string& name) {
    return metrics_.CounterValue(name);
  }

  FakeClock clock_;
  std::unique_ptr<ObjectStore> objects_;
  SegmentManager segments_;
  NodeRegistry nodes_;
  MetricsRegistry metrics_;
  uint32_t holder_ = 0;
  std::unique_ptr<OffloadScheduler> scheduler_;
};

TEST_F(OffloadSchedulerTest, QueuePinsOnceAndTheHoldersAnswerReleases) {
  Add("k");
  EXPECT_TRUE(Queue("k"));
  EXPECT_TRUE(Pinned("k"));
  EXPECT_EQ(scheduler_->in_flight(), 1);
  EXPECT_TRUE(Queue("k"));  // already queued: no second task
  EXPECT_EQ(scheduler_->in_flight(), 1);
  EXPECT_EQ(TasksHanded(), 1u);
  EXPECT_EQ(Counter("kvpool_master_offload_tasks_total"), 1u);
  // An answer for another version or from another node is not this task's.
  EXPECT_FALSE(Answer("k", holder_, 2));
  EXPECT_FALSE(Answer("k", holder_ + 1, 1));
  EXPECT_TRUE(Pinned("k"));
  EXPECT_TRUE(Answer("k", holder_, 1));
  EXPECT_FALSE(Pinned("k"));
  EXPECT_EQ(scheduler_->in_flight(), 0);
}

TEST_F(OffloadSchedulerTest, QueueLimitRefuses) {
  OffloadScheduler::Options options;
  options.offloading_queue_limit = 1;
  Make(options);
  Add("a");
  Add("b");
  EXPECT_TRUE(Queue("a"));
  EXPECT_FALSE(Queue("b"));
  EXPECT_FALSE(Pinned("b"));
  EXPECT_EQ(Counter("kvpool_master_offload_queue_full_total"), 1u);
}

TEST_F(OffloadSchedulerTest, FullSsdPausesTheHolderUntilASuccess) {
  Add("k");
  scheduler_->Answered(holder_, /*acks=*/0, /*write_failures=*/1);
  bool paused = false;
  EXPECT_FALSE(Queue("k", &paused));
  EXPECT_TRUE(paused);
  EXPECT_EQ(Counter("kvpool_master_offload_paused_total"), 1u);
  scheduler_->Answered(holder_, /*acks=*/1, /*write_failures=*/0);
  EXPECT_TRUE(Queue("k"));
}

TEST_F(OffloadSchedulerTest, ReapCancelAndDropHolderReleasePins) {
  OffloadScheduler::Options options;
  options.offload_task_ttl_sec = 1;
  Make(options);
  for (const char* k : {"a", "b", "c"}) {
    Add(k);
    EXPECT_TRUE(Queue(k));
  }
  EXPECT_EQ(scheduler_->in_flight(), 3);
  {
    auto& shard = ShardOf("a");
    MutexLock lock(&shard.mu());
    EXPECT_TRUE(scheduler_->Cancel(shard, ObjectKeyView{0, "a"}));
    EXPECT_FALSE(scheduler_->Cancel(shard, ObjectKeyView{0, "a"}));
  }
  {
    auto& shard = ShardOf("b");
    MutexLock lock(&shard.mu());
    scheduler_->DropHolder(shard, holder_);
  }
  EXPECT_FALSE(Pinned("b"));
  EXPECT_EQ(scheduler_->in_flight(), 1);
  clock_.Advance(1001);
  uint64_t expired = 0;
  for (size_t i = 0; i < ObjectStore::kShards; ++i) {
    auto& shard = objects_->shard(i);
    MutexLock lock(&shard.mu());
    expired += scheduler_->Reap(shard, clock_.NowMs());
  }
  scheduler_->CountExpired(expired);
  EXPECT_EQ(expired, 1u);
  EXPECT_FALSE(Pinned("c"));
  EXPECT_EQ(scheduler_->in_flight(), 0);
  EXPECT_EQ(Counter("kvpool_master_offload_expired_total"), 1u);
}

TEST_F(OffloadSchedulerTest, WaitForRoomEndsByItsDeadline) {
  // A put's wait is bounded even when no result ever comes.
  const auto start = std::chrono::steady_clock::now();
  scheduler_->WaitForRoom(start);  // already past
  scheduler_->WaitForRoom(start + std::chrono::milliseconds(5));
  scheduler_->RoomFreed();  // nobody waiting: a no-op
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
}

}  // namespace
}  // namespace kvpool
