// SSD-tier bookkeeping of the master: offload tasks and their results,
// LOCAL_DISK replicas, eviction with offload, and the promotion entry with
// its gates, chain, reaper and counters. Driven with a FakeClock.
#include <gtest/gtest.h>

#include "master/master_service.h"

namespace kvpool {
namespace {

class MasterTieringTest : public ::testing::Test {
 protected:
  void SetUp() override {
    config_.default_kv_lease_ttl = 1000;
    config_.enable_offload = true;
    Make();
  }
  void Make() {
    svc_ = std::make_unique<MasterService>(config_, &clock_);
    SegmentInfo info;
    info.node_id = "ssd-node";
    info.capacity = 100 * 1024;
    info.data_endpoint = "127.0.0.1:1";
    ASSERT_TRUE(svc_->MountSegment(info, /*ssd_enabled=*/true).ok());
  }
  Status Put(const std::string& key, uint64_t size) {
    auto r = svc_->PutStart("", key, size, {});
    if (!r.ok()) return r.status();
    return svc_->PutEnd("", key);
  }
  NodeTasks Poll(size_t max_offload = 100) {
    NodeTasks t;
    EXPECT_TRUE(svc_->Heartbeat("ssd-node", 0, max_offload, &t).ok());
    return t;
  }
  // Acknowledges every offload task as a holder that wrote its copy.
  void AckAll(const NodeTasks& t, ErrorCode code = ErrorCode::OK) {
    std::vector<OffloadResultIn> res;
    for (const auto& o : t.offloads)
      res.push_back({o.tenant, o.key, o.version, code});
    svc_->NotifyOffload("ssd-node", res);
  }
  bool HasDisk(const std::string& key) {
    for (const auto& r : svc_->QueryReadOnly("", key).replicas) {
      if (r.kind == ReplicaKind::kLocalDisk) return true;
    }
    return false;
  }
  bool HasMemory(const std::string& key) {
    for (const auto& r : svc_->QueryReadOnly("", key).replicas) {
      if (r.kind == ReplicaKind::kMemory) return true;
    }
    return false;
  }
  void ExpectInvariant() {
    auto c = svc_->promotion_counters();
    EXPECT_EQ(c.admitted,
              c.completed + c.failed + c.cancelled + c.expired + c.in_flight);
  }

  MasterConfig config_;
  FakeClock clock_;
  std::unique_ptr<MasterService> svc_;
};

TEST_F(MasterTieringTest, ProactiveOffloadAddsDiskReplicaOnAck) {
  ASSERT_TRUE(Put("k", 4096).ok());
  NodeTasks t = Poll();
  ASSERT_EQ(t.offloads.size(), 1u);
  EXPECT_EQ(t.offloads[0].key, "k");
  EXPECT_EQ(t.offloads[0].size, 4096u);
  EXPECT_FALSE(HasDisk("k"));
  AckAll(t);
  EXPECT_TRUE(HasDisk("k"));
  EXPECT_TRUE(HasMemory("k"));
  // A duplicate result is idempotent: still one disk replica, still OK.
  std::vector<OffloadResultIn> dup = {
      {"default", "k", t.offloads[0].version, ErrorCode::OK}};
  EXPECT_EQ(svc_->NotifyOffload("ssd-node", dup)[0], ErrorCode::OK);
  EXPECT_EQ(svc_->QueryReadOnly("", "k").replicas.size(), 2u);
}

TEST_F(MasterTieringTest, OffloadOffByDefaultQueuesNothing) {
  config_ = MasterConfig{};
  Make();
  ASSERT_TRUE(Put("k", 4096).ok());
  EXPECT_TRUE(Poll().offloads.empty());
}

TEST_F(MasterTieringTest, DuplicateInBatchNeverFailsTheRest) {
  ASSERT_TRUE(Put("a", 100).ok());
  ASSERT_TRUE(Put("b", 100).ok());
  NodeTasks t = Poll();
  ASSERT_EQ(t.offloads.size(), 2u);
  std::vector<OffloadResultIn> res;
  for (const auto& o : t.offloads)
    res.push_back({o.tenant, o.key, o.version, ErrorCode::OK});
  res.push_back(res[0]);  // the same key twice in one batch
  auto codes = svc_->NotifyOffload("ssd-node", res);
  for (auto c : codes) EXPECT_EQ(c, ErrorCode::OK);
  EXPECT_TRUE(HasDisk("a"));
  EXPECT_TRUE(HasDisk("b"));
}

TEST_F(MasterTieringTest, FullSsdBacksOffAndEvictsAsWithoutATier) {
  ASSERT_TRUE(Put("k", 4096).ok());
  NodeTasks t = Poll();
  ASSERT_EQ(t.offloads.size(), 1u);
  clock_.Advance(2000);
  AckAll(t, ErrorCode::NO_AVAILABLE_HANDLE);  // the holder's disk is full
  // No new task to fail at once: the key is dropped from DRAM as a store
  // without an SSD tier would, and counted.
  EXPECT_EQ(svc_->EvictBytes(4096), 4096u);
  EXPECT_TRUE(Poll().offloads.empty());
  EXPECT_EQ(svc_->metrics().CounterValue(
                "kvpool_master_evicted_without_copy_ssd_full_total", ""),
            1u);
  // During the backoff a put's proactive offload is not even queued; after
  // it, eviction queues the copy again instead of dropping the key.
  ASSERT_TRUE(Put("k2", 4096).ok());
  EXPECT_TRUE(Poll().offloads.empty());
  clock_.Advance(1500);
  EXPECT_EQ(svc_->EvictBytes(4096), 0u);  // queued, not dropped
  t = Poll();
  ASSERT_EQ(t.offloads.size(), 1u);
  EXPECT_EQ(t.offloads[0].key, "k2");
}

TEST_F(MasterTieringTest, NackReleasesPinAtOnce) {
  ASSERT_TRUE(Put("k", 4096).ok());
  NodeTasks t = Poll();
  ASSERT_EQ(t.offloads.size(), 1u);
  clock_.Advance(2000);  // lease-free
  // While the offload is pending the memory is pinned: not evictable.
  EXPECT_EQ(svc_->EvictBytes(4096), 0u);
  AckAll(t, ErrorCode::FILE_WRITE_FAIL);
  EXPECT_FALSE(HasDisk("k"));
  // Pin released: the next eviction may queue it again (not lose it).
  config_.offload_force_evict = false;
  EXPECT_EQ(svc_->EvictBytes(4096), 0u);
  EXPECT_EQ(Poll().offloads.size(), 1u);  // re-queued instead of dropped
  EXPECT_TRUE(HasMemory("k"));
}

TEST_F(MasterTieringTest, StaleOffloadResultIsRefused) {
  ASSERT_TRUE(Put("k", 4096).ok());
  NodeTasks t = Poll();
  ASSERT_TRUE(svc_->Remove("", "k", true).ok());
  ASSERT_TRUE(Put("k", 4096).ok());  // a new value under the same key
  std::vector<OffloadResultIn> res = {
      {"default", "k", t.offloads[0].version, ErrorCode::OK}};
  EXPECT_EQ(svc_->NotifyOffload("ssd-node", res)[0],
            ErrorCode::OBJECT_NOT_FOUND);
  EXPECT_FALSE(HasDisk("k"));
}

TEST_F(MasterTieringTest, EvictionTakesKeysWithSsdCopyFirst) {
  for (int i = 0; i < 9; ++i) {
    ASSERT_TRUE(Put("k" + std::to_string(i), 10 * 1024).ok());
    clock_.Advance(10);
  }
  NodeTasks t = Poll();
  // Only the newest five get their copy acknowledged.
  NodeTasks some;
  for (int i = 4; i < 9; ++i) some.offloads.push_back(t.offloads[i]);
  AckAll(some);
  clock_.Advance(2000);
  uint64_t freed = svc_->EvictBytes(20 * 1024);
  EXPECT_GE(freed, 20u * 1024);
  // Old keys without a copy stay in DRAM (pinned by their offload); two of
  // the copied keys became SSD-only, none was lost.
  int ssd_only = 0;
  for (int i = 0; i < 9; ++i) {
    std::string k = "k" + std::to_string(i);
    EXPECT_TRUE(HasMemory(k) || HasDisk(k)) << k;
    ssd_only += !HasMemory(k);
    if (i < 4) {
      EXPECT_TRUE(HasMemory(k)) << k;
    }
  }
  EXPECT_EQ(ssd_only, 2);
}

TEST_F(MasterTieringTest, OffloadOnEvictQueuesInsteadOfDropping) {
  config_.offload_on_evict = true;
  Make();
  for (int i = 0; i < 9; ++i) {
    ASSERT_TRUE(Put("k" + std::to_string(i), 10 * 1024).ok());
    clock_.Advance(10);
  }
  EXPECT_TRUE(Poll().offloads.empty());  // nothing proactive
  clock_.Advance(2000);
  EXPECT_EQ(svc_->EvictBytes(10 * 1024), 0u);
  NodeTasks t = Poll();
  ASSERT_GE(t.offloads.size(), 1u);
  EXPECT_EQ(t.offloads[0].key, "k0");  // least recently used first
  AckAll(t);
  EXPECT_GE(svc_->EvictBytes(10 * 1024), 10u * 1024);
  EXPECT_FALSE(HasMemory("k0"));
  EXPECT_TRUE(HasDisk("k0"));
}

TEST_F(MasterTieringTest, ForceEvictDropsWithoutCopyAndCounts) {
  config_.offload_on_evict = true;
  config_.offload_force_evict = true;
  config_.offloading_queue_limit = 0;  // nothing can be offloaded
  Make();
  ASSERT_TRUE(Put("k", 10 * 1024).ok());
  clock_.Advance(2000);
  EXPECT_GE(svc_->EvictBytes(10 * 1024), 10u * 1024);
  EXPECT_EQ(svc_->QueryReadOnly("", "k").code, ErrorCode::OBJECT_NOT_FOUND);
  EXPECT_EQ(svc_->metrics().CounterValue(
                "kvpool_master_force_evicted_without_copy_total"),
            1u);
}

// An extra segment's memory goes back to its owner at unmount, so the
// holder never copies out of it: no offload task names it, and eviction
// drops what lies only there (counted) instead of keeping it for a copy
// that can never come.
TEST_F(MasterTieringTest, ExtraSegmentsAreNeverOffloadedFrom) {
  config_.offload_on_evict = true;
  Make();
  auto extra = svc_->MountExtraSegment("ssd-node", 100 * 1024, "", false);
  ASSERT_TRUE(extra.ok());
  ASSERT_TRUE(svc_->OpenExtraSegment("ssd-node", extra.value()).ok());
  // Fill the main segment so the next puts land in the extra one.
  ASSERT_TRUE(Put("main", 90 * 1024).ok());
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(Put("x" + std::to_string(i), 20 * 1024).ok());
    auto q = svc_->QueryReadOnly("", "x" + std::to_string(i));
    ASSERT_EQ(q.replicas.size(), 1u);
    ASSERT_NE(q.replicas[0].segment, nullptr);
    EXPECT_EQ(q.replicas[0].segment->id, extra.value());
  }
  clock_.Advance(2000);
  EXPECT_GE(svc_->EvictBytes(100 * 1024), 60u * 1024);
  NodeTasks t = Poll();
  for (const auto& o : t.offloads) {
    EXPECT_NE(o.segment, extra.value()) << o.key;
    EXPECT_EQ(o.key, "main");
  }
  for (int i = 0; i < 3; ++i) EXPECT_FALSE(HasMemory("x" + std::to_string(i)));
  EXPECT_EQ(svc_->metrics().CounterValue(
                "kvpool_master_evicted_without_copy_extra_segment_total"),
            3u);
  EXPECT_EQ(svc_->metrics().CounterValue(
                "kvpool_master_force_evicted_without_copy_total"),
            0u);
}

TEST_F(MasterTieringTest, RegisterDiskObjectsAfterRestart) {
  std::vector<DiskObjectIn> objs = {
      {"default", "a", 100}, {"t2", "b", 200}, {"default", "", 1}};
  auto codes = svc_->RegisterDiskObjects("ssd-node", objs);
  EXPECT_EQ(codes[0], ErrorCode::OK);
  EXPECT_EQ(codes[1], ErrorCode::OK);
  EXPECT_EQ(codes[2], ErrorCode::INVALID_PARAMS);
  auto g = svc_->GetReplicaList("", "a");
  ASSERT_TRUE(g.ok());
  ASSERT_EQ(g->replicas.size(), 1u);
  EXPECT_EQ(g->replicas[0].kind, ReplicaKind::kLocalDisk);
  EXPECT_EQ(g->replicas[0].holder->node_id, "ssd-node");
  EXPECT_EQ(svc_->QueryReadOnly("t2", "b").size, 200u);
  // A key the pool already holds is never attached from a disk copy.
  ASSERT_TRUE(Put("c", 100).ok());
  EXPECT_EQ(svc_->RegisterDiskObjects("ssd-node", {{"default", "c", 100}})[0],
            ErrorCode::OBJECT_ALREADY_EXISTS);
  EXPECT_EQ(svc_->RegisterDiskObjects("stranger", {{"default", "x", 1}})[0],
            ErrorCode::CLIENT_NOT_FOUND);
}

TEST_F(MasterTieringTest, RemoveDiskReplicasIsTwoPhase) {
  svc_->RegisterDiskObjects("ssd-node",
                            {{"default", "a", 100}, {"default", "b", 100}});
  ASSERT_TRUE(svc_->GetReplicaList("", "b").ok());  // b is leased now
  auto codes = svc_->RemoveDiskReplicas(
      "ssd-node",
      {{"default", "a", 100}, {"default", "b", 100}, {"default", "zz", 1}});
  EXPECT_EQ(codes[0], ErrorCode::OK);
  EXPECT_EQ(codes[1], ErrorCode::OBJECT_HAS_LEASE);
  EXPECT_EQ(codes[2], ErrorCode::OK);  // unknown: free to drop
  EXPECT_EQ(svc_->QueryReadOnly("", "a").code, ErrorCode::OBJECT_NOT_FOUND);
  EXPECT_EQ(svc_->QueryReadOnly("", "b").code, ErrorCode::OK);
}

class PromotionTest : public MasterTieringTest {
 protected:
  void SetUp() override {
    config_.default_kv_lease_ttl = 1000;
    config_.promotion_on_hit = true;
    config_.promotion_admission_threshold = 2;
    Make();
    svc_->RegisterDiskObjects("ssd-node", {{"default", "cold", 4096}});
  }
  // Gets the key `n` times; returns the promotion tasks handed out.
  std::vector<PromotionTaskMsg> Hit(const std::string& key, int n) {
    for (int i = 0; i < n; ++i) EXPECT_TRUE(svc_->GetReplicaList("", key).ok());
    std::vector<PromotionTaskMsg> tasks;
    for (;;) {
      NodeTasks t = Poll(0);
      if (t.promotions.empty()) break;
      for (auto& p : t.promotions) tasks.push_back(p);
    }
    return tasks;
  }
};

TEST_F(PromotionTest, FrequencyGateThenChainSucceeds) {
  EXPECT_TRUE(Hit("cold", 1).empty());  // first hit: below the threshold
  auto tasks = Hit("cold", 1);
  ASSERT_EQ(tasks.size(), 1u);
  EXPECT_EQ(tasks[0].source, TriggerSource::kOnHit);
  auto staged =
      svc_->PromotionAllocStart("ssd-node", "", "cold", 4096, tasks[0].task_id);
  ASSERT_TRUE(staged.ok()) << staged.status().ToString();
  EXPECT_EQ(staged->status, ReplicaStatus::kProcessing);
  // Staging is a write grant: it has a write generation of its own.
  EXPECT_GT(staged->write_generation, 0u);
  EXPECT_FALSE(HasMemory("cold"));  // invisible until success
  ASSERT_TRUE(
      svc_->NotifyPromotion("ssd-node", "", "cold", tasks[0].task_id, true)
          .ok());
  auto g = svc_->GetReplicaList("", "cold");
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(g->replicas[0].kind, ReplicaKind::kMemory);
  EXPECT_EQ(svc_->promotion_counters().completed, 1u);
  ExpectInvariant();
}

TEST_F(PromotionTest, OffByDefault) {
  config_ = MasterConfig{};
  Make();
  svc_->RegisterDiskObjects("ssd-node", {{"default", "cold", 4096}});
  EXPECT_TRUE(Hit("cold", 5).empty());
  EXPECT_EQ(svc_->promotion_counters().admitted, 0u);
}

TEST_F(PromotionTest, DedupAllowsOneTaskPerKey) {
  auto tasks = Hit("cold", 6);
  EXPECT_EQ(tasks.size(), 1u);
  EXPECT_GE(svc_->metrics().CounterValue(
                "kvpool_master_promotion_rejected_total", "reason=\"dedup\""),
            1u);
  ExpectInvariant();
}

TEST_F(PromotionTest, WatermarkAndCapGates) {
  config_.promotion_queue_limit = 1;
  Make();
  svc_->RegisterDiskObjects("ssd-node",
                            {{"default", "a", 100}, {"default", "b", 100}});
  EXPECT_EQ(Hit("a", 2).size(), 1u);
  EXPECT_TRUE(Hit("b", 2).empty());  // cap of one in flight
  EXPECT_GE(svc_->metrics().CounterValue(
                "kvpool_master_promotion_rejected_total", "reason=\"cap\""),
            1u);
  // Fill DRAM above the high watermark: no admission.
  config_.promotion_queue_limit = 100;
  Make();
  svc_->RegisterDiskObjects("ssd-node", {{"default", "c", 100}});
  ASSERT_TRUE(Put("filler", 95 * 1024).ok());
  EXPECT_TRUE(Hit("c", 3).empty());
  EXPECT_GE(
      svc_->metrics().CounterValue("kvpool_master_promotion_rejected_total",
                                   "reason=\"watermark\""),
      1u);
}

TEST_F(PromotionTest, ChainChecksHolderAndSize) {
  SegmentInfo other;
  other.node_id = "other";
  other.capacity = 1 << 20;
  other.data_endpoint = "127.0.0.1:2";
  ASSERT_TRUE(svc_->MountSegment(other, true).ok());
  auto tasks = Hit("cold", 2);
  ASSERT_EQ(tasks.size(), 1u);
  uint64_t id = tasks[0].task_id;
  EXPECT_EQ(svc_->PromotionAllocStart("other", "", "cold", 4096, id).code(),
            ErrorCode::INVALID_PARAMS);
  EXPECT_EQ(svc_->PromotionAllocStart("ssd-node", "", "cold", 4095, id).code(),
            ErrorCode::INVALID_PARAMS);
  EXPECT_EQ(
      svc_->PromotionAllocStart("ssd-node", "", "cold", 4096, id + 99).code(),
      ErrorCode::OBJECT_NOT_FOUND);
  ASSERT_TRUE(svc_->PromotionAllocStart("ssd-node", "", "cold", 4096, id).ok());
  EXPECT_EQ(svc_->NotifyPromotion("other", "", "cold", id, true).code(),
            ErrorCode::INVALID_PARAMS);
  ExpectInvariant();
}

TEST_F(PromotionTest, FailureReleasesStagedMemoryAtOnce) {
  auto tasks = Hit("cold", 2);
  ASSERT_TRUE(
      svc_->PromotionAllocStart("ssd-node", "", "cold", 4096, tasks[0].task_id)
          .ok());
  EXPECT_EQ(svc_->segments().Usage(SegmentKind::kMain).used, 4096u);
  ASSERT_TRUE(
      svc_->NotifyPromotion("ssd-node", "", "cold", tasks[0].task_id, false)
          .ok());
  EXPECT_EQ(svc_->segments().Usage(SegmentKind::kMain).used, 0u);
  EXPECT_FALSE(HasMemory("cold"));
  EXPECT_TRUE(HasDisk("cold"));  // the source is intact
  EXPECT_EQ(svc_->promotion_counters().failed, 1u);
  ExpectInvariant();
}

TEST_F(PromotionTest, FailedRemoteStagingIsHeldForTheWriteGrace) {
  // The holder's own DRAM is full: the staged replica lands on another
  // node, which the holder writes over TCP.
  SegmentInfo info;
  info.node_id = "dram-node";
  info.capacity = 100 * 1024;
  info.data_endpoint = "127.0.0.1:2";
  ASSERT_TRUE(svc_->MountSegment(info).ok());
  PutOptions on_holder;
  on_holder.preferred_node = "ssd-node";
  on_holder.hard_pin = true;
  ASSERT_TRUE(svc_->PutStart("", "fill", 100 * 1024, on_holder).ok());
  ASSERT_TRUE(svc_->PutEnd("", "fill").ok());
  auto tasks = Hit("cold", 2);
  ASSERT_EQ(tasks.size(), 1u);
  auto staged =
      svc_->PromotionAllocStart("ssd-node", "", "cold", 4096, tasks[0].task_id);
  ASSERT_TRUE(staged.ok()) << staged.status().ToString();
  ASSERT_EQ(staged->segment->node_id, "dram-node");
  ASSERT_TRUE(
      svc_->NotifyPromotion("ssd-node", "", "cold", tasks[0].task_id, false)
          .ok());
  // The entry is released at once (the seed's rule); the remote range only
  // after the grace, since a late TCP write may still land in it.
  EXPECT_EQ(svc_->promotion_counters().in_flight, 0u);
  auto used = [&] {
    for (const auto& s : svc_->segments().Snapshot())
      if (s.info.node_id == "dram-node") return s.used;
    return uint64_t{0};
  };
  EXPECT_EQ(used(), 4096u);
  clock_.Advance(kTaskGraceMs + 1);
  ASSERT_TRUE(svc_->Heartbeat("ssd-node").ok());
  ASSERT_TRUE(svc_->Heartbeat("dram-node").ok());
  svc_->Housekeep();
  EXPECT_EQ(used(), 0u);
  ExpectInvariant();
}

TEST_F(PromotionTest, NoDramAtAllocStartIsPressureSignal) {
  auto tasks = Hit("cold", 2);
  ASSERT_TRUE(Put("filler", 97 * 1024).ok());
  EXPECT_EQ(
      svc_->PromotionAllocStart("ssd-node", "", "cold", 4096, tasks[0].task_id)
          .code(),
      ErrorCode::NO_AVAILABLE_HANDLE);
  ASSERT_TRUE(
      svc_->NotifyPromotion("ssd-node", "", "cold", tasks[0].task_id, false)
          .ok());
  ExpectInvariant();
}

TEST_F(PromotionTest, ReaperExpiresForgottenTasks) {
  auto tasks = Hit("cold", 2);
  ASSERT_TRUE(
      svc_->PromotionAllocStart("ssd-node", "", "cold", 4096, tasks[0].task_id)
          .ok());
  clock_.Advance(config_.promotion_task_ttl_sec * 1000 + 1001);
  ASSERT_TRUE(svc_->Heartbeat("ssd-node").ok());
  svc_->Housekeep();
  EXPECT_EQ(svc_->promotion_counters().expired, 1u);
  EXPECT_EQ(svc_->promotion_counters().in_flight, 0u);
  // A late report is refused and changes nothing.
  EXPECT_EQ(
      svc_->NotifyPromotion("ssd-node", "", "cold", tasks[0].task_id, true)
          .code(),
      ErrorCode::OBJECT_NOT_FOUND);
  EXPECT_FALSE(HasMemory("cold"));
  // The staged range waits out the grace period, then is reused.
  clock_.Advance(kTaskGraceMs + 1);
  ASSERT_TRUE(svc_->Heartbeat("ssd-node").ok());
  svc_->Housekeep();
  EXPECT_EQ(svc_->segments().Usage(SegmentKind::kMain).used, 0u);
  // A new promotion of the key may start.
  EXPECT_EQ(Hit("cold", 1).size(), 1u);
  ExpectInvariant();
}

TEST_F(PromotionTest, RemoveDuringPromotionCancelsIt) {
  auto tasks = Hit("cold", 2);
  ASSERT_TRUE(
      svc_->PromotionAllocStart("ssd-node", "", "cold", 4096, tasks[0].task_id)
          .ok());
  ASSERT_TRUE(svc_->Remove("", "cold", true).ok());
  EXPECT_EQ(svc_->promotion_counters().cancelled, 1u);
  EXPECT_EQ(
      svc_->NotifyPromotion("ssd-node", "", "cold", tasks[0].task_id, true)
          .code(),
      ErrorCode::OBJECT_NOT_FOUND);
  EXPECT_EQ(svc_->QueryReadOnly("", "cold").code, ErrorCode::OBJECT_NOT_FOUND);
  ExpectInvariant();
}

TEST_F(PromotionTest, SourcePinnedAgainstSsdEviction) {
  auto tasks = Hit("cold", 2);
  clock_.Advance(2000);
  EXPECT_EQ(
      svc_->RemoveDiskReplicas("ssd-node", {{"default", "cold", 4096}})[0],
      ErrorCode::UNAVAILABLE_IN_CURRENT_STATUS);
  EXPECT_TRUE(HasDisk("cold"));
}

TEST_F(PromotionTest, HolderDeathCancelsItsPromotionsAndCopies) {
  auto tasks = Hit("cold", 2);
  // The master runs on (housekeeping every 100 ms) while the holder is
  // silent.
  for (int64_t t = 0; t <= config_.client_ttl * 1000 + 1000; t += 100) {
    clock_.Advance(100);
    svc_->Housekeep();
  }
  EXPECT_EQ(svc_->promotion_counters().cancelled, 1u);
  EXPECT_EQ(svc_->QueryReadOnly("", "cold").code, ErrorCode::OBJECT_NOT_FOUND);
  ExpectInvariant();
}

}  // namespace
}  // namespace kvpool

namespace kvpool {
namespace {

class RegisterPrefetchTest : public MasterTieringTest {
 protected:
  void SetUp() override {
    config_.default_kv_lease_ttl = 1000;
    config_.enable_offload = false;
    Make();
    SegmentInfo other;
    other.node_id = "other";
    other.capacity = 1 << 20;
    other.data_endpoint = "127.0.0.1:2";
    ASSERT_TRUE(svc_->MountSegment(other, true).ok());
    svc_->RegisterDiskObjects(
        "ssd-node", {{"default", "cold", 4096}, {"default", "cold2", 4096}});
  }
  ErrorCode Reg(const std::string& node, const std::string& key,
                uint64_t* task = nullptr) {
    auto r = svc_->RegisterPrefetchTask(node, "", {key});
    if (task) *task = r[0].task_id;
    return r[0].code;
  }
};

TEST_F(RegisterPrefetchTest, DecisionFlow) {
  EXPECT_EQ(Reg("ssd-node", "missing"), ErrorCode::OBJECT_NOT_FOUND);
  ASSERT_TRUE(svc_->PutStart("", "in-put", 100, {}).ok());
  EXPECT_EQ(Reg("ssd-node", "in-put"), ErrorCode::REPLICA_IS_NOT_READY);
  ASSERT_TRUE(svc_->PutEnd("", "in-put").ok());
  EXPECT_EQ(Reg("ssd-node", "in-put"),
            ErrorCode::PROMOTION_ALREADY_EXISTS);              // in DRAM
  EXPECT_EQ(Reg("other", "cold"), ErrorCode::INVALID_PARAMS);  // not the holder
  uint64_t task = 0;
  EXPECT_EQ(Reg("ssd-node", "cold", &task), ErrorCode::OK);
  EXPECT_GT(task, 0u);
  EXPECT_EQ(Reg("ssd-node", "cold"),
            ErrorCode::PROMOTION_ALREADY_EXISTS);  // in flight
  // Tenants are looked up as given.
  EXPECT_EQ(svc_->RegisterPrefetchTask("ssd-node", "t9", {"cold2"})[0].code,
            ErrorCode::OBJECT_NOT_FOUND);
  // No mailbox push: the holder runs it itself.
  EXPECT_TRUE(Poll(0).promotions.empty());
  ExpectInvariant();
}

TEST_F(RegisterPrefetchTest, SharesTheInFlightCapWithPromoteOnHit) {
  config_.promotion_queue_limit = 1;
  config_.promotion_on_hit = true;
  Make();
  svc_->RegisterDiskObjects(
      "ssd-node", {{"default", "cold", 4096}, {"default", "cold2", 4096}});
  EXPECT_EQ(Reg("ssd-node", "cold"), ErrorCode::OK);
  EXPECT_EQ(Reg("ssd-node", "cold2"), ErrorCode::KEYS_ULTRA_LIMIT);
  // The on-hit path sees the same cap and the same per-key entry.
  for (int i = 0; i < 3; ++i)
    ASSERT_TRUE(svc_->GetReplicaList("", "cold2").ok());
  EXPECT_TRUE(Poll(0).promotions.empty());
  for (int i = 0; i < 3; ++i)
    ASSERT_TRUE(svc_->GetReplicaList("", "cold").ok());
  EXPECT_GE(svc_->metrics().CounterValue(
                "kvpool_master_promotion_rejected_total", "reason=\"dedup\""),
            1u);
  ExpectInvariant();
}

TEST_F(RegisterPrefetchTest, SuccessGrantsLeaseAndFateIsCounted) {
  uint64_t task = 0;
  ASSERT_EQ(Reg("ssd-node", "cold", &task), ErrorCode::OK);
  ASSERT_TRUE(
      svc_->PromotionAllocStart("ssd-node", "", "cold", 4096, task).ok());
  ASSERT_TRUE(svc_->NotifyPromotion("ssd-node", "", "cold", task, true).ok());
  EXPECT_GT(svc_->QueryReadOnly("", "cold").lease_remaining_ms, 0);
  // The prefetched replica survives eviction until the lease ends.
  EXPECT_EQ(svc_->EvictBytes(4096), 0u);
  ASSERT_TRUE(svc_->GetReplicaList("", "cold").ok());
  EXPECT_EQ(svc_->metrics().CounterValue("kvpool_master_prefetch_fate_total",
                                         "fate=\"read_from_dram\""),
            1u);
  // A second prefetched key that nobody reads is evicted unread.
  ASSERT_EQ(Reg("ssd-node", "cold2", &task), ErrorCode::OK);
  ASSERT_TRUE(
      svc_->PromotionAllocStart("ssd-node", "", "cold2", 4096, task).ok());
  ASSERT_TRUE(svc_->NotifyPromotion("ssd-node", "", "cold2", task, true).ok());
  clock_.Advance(2000);
  svc_->EvictBytes(1 << 20);
  EXPECT_EQ(svc_->metrics().CounterValue("kvpool_master_prefetch_fate_total",
                                         "fate=\"evicted_unread\""),
            1u);
  ExpectInvariant();
}

}  // namespace
}  // namespace kvpool

namespace kvpool {
namespace {

using PS = MasterService::PrefetchStatus;

class BatchPrefetchTest : public MasterTieringTest {
 protected:
  void SetUp() override {
    config_.default_kv_lease_ttl = 1000;
    config_.enable_offload = false;
    config_.enable_prefetch_trigger = true;
    config_.prefetch_trigger_lease_ttl_ms = 5000;
    Make();
    svc_->RegisterDiskObjects(
        "ssd-node", {{"default", "cold", 4096}, {"default", "cold2", 4096}});
  }
  PS One(const std::string& key) {
    return svc_->BatchPrefetchToMemory("", {key}).value()[0];
  }
};

TEST_F(BatchPrefetchTest, OffByDefaultAnswersDisabled) {
  config_.enable_prefetch_trigger = false;
  Make();
  auto r = svc_->BatchPrefetchToMemory("", {"cold"});
  EXPECT_EQ(r.code(), ErrorCode::UNAVAILABLE_IN_CURRENT_STATUS);
  EXPECT_EQ(svc_->promotion_counters().admitted, 0u);
}

TEST_F(BatchPrefetchTest, EveryStatusOfTheDecisionFlow) {
  EXPECT_EQ(One("missing"), PS::kNotFound);
  ASSERT_TRUE(Put("hot", 100).ok());
  EXPECT_EQ(One("hot"), PS::kInMemory);
  EXPECT_GT(svc_->QueryReadOnly("", "hot").lease_remaining_ms,
            1000);  // refreshed
  // Known, but neither in DRAM nor on SSD (its put is still in flight).
  ASSERT_TRUE(svc_->PutStart("", "no-disk", 100, {}).ok());
  EXPECT_EQ(One("no-disk"), PS::kNoLocalDisk);
  EXPECT_EQ(One("cold"), PS::kQueued);
  EXPECT_EQ(One("cold"), PS::kQueued);  // idempotent: still one task
  NodeTasks t = Poll(0);
  ASSERT_EQ(t.promotions.size(), 1u);
  EXPECT_EQ(t.promotions[0].source, TriggerSource::kRouter);
  EXPECT_TRUE(t.promotions[0].from_prefetch);
  EXPECT_EQ(svc_->promotion_counters().admitted, 1u);
  ExpectInvariant();
}

// A holder running the pipelined executor says how many tasks it can take
// (HeartbeatRequest.max_promotion_tasks): one task per beat would cap it at
// one per round trip. Never past kMaxPromotionRoom, never where the knob
// hands none; a full queue (room 0) gets none, and a holder that states no
// room (an older node, the sequential worker) gets the knob's count.
TEST_F(BatchPrefetchTest, AHoldersRoomWidensTheBeatUpToItsCap) {
  const size_t n = MasterService::kMaxPromotionRoom + 20;
  std::vector<DiskObjectIn> objects;
  std::vector<std::string> keys;
  for (size_t i = 0; i < n; ++i) {
    keys.push_back("k" + std::to_string(i));
    objects.push_back({"default", keys.back(), 4096});
  }
  svc_->RegisterDiskObjects("ssd-node", objects);
  auto r = svc_->BatchPrefetchToMemory("", keys);
  ASSERT_TRUE(r.ok());
  for (PS s : r.value()) ASSERT_EQ(s, PS::kQueued);
  auto beat = [&](std::optional<size_t> room) {
    NodeTasks t;
    EXPECT_TRUE(svc_->Heartbeat("ssd-node", 0, 0, &t, 0, room).ok());
    return t.promotions.size();
  };
  EXPECT_EQ(beat(std::nullopt), 1u);  // the knob's default: one per beat
  EXPECT_EQ(beat(0), 0u);
  EXPECT_EQ(beat(1), 1u);
  EXPECT_EQ(beat(16), 16u);
  EXPECT_EQ(beat(100000), MasterService::kMaxPromotionRoom);
  EXPECT_EQ(beat(100000), n - 18 - MasterService::kMaxPromotionRoom);
  ExpectInvariant();
}

TEST_F(BatchPrefetchTest, NoRoomWhereTheKnobHandsNoPromotions) {
  config_.promotion_max_per_heartbeat = 0;
  Make();
  svc_->RegisterDiskObjects("ssd-node", {{"default", "cold", 4096}});
  ASSERT_EQ(One("cold"), PS::kQueued);
  NodeTasks t;
  ASSERT_TRUE(svc_->Heartbeat("ssd-node", 0, 0, &t, 0, 64).ok());
  EXPECT_TRUE(t.promotions.empty());
}

TEST_F(BatchPrefetchTest, LeaseAtEnqueueProtectsTheKeyUntilTheGet) {
  EXPECT_EQ(One("cold"), PS::kQueued);
  // Granted at enqueue, before any promotion ran.
  EXPECT_GT(svc_->QueryReadOnly("", "cold").lease_remaining_ms, 4000);
  NodeTasks t = Poll(0);
  ASSERT_TRUE(svc_->PromotionAllocStart("ssd-node", "", "cold", 4096,
                                        t.promotions[0].task_id)
                  .ok());
  ASSERT_TRUE(svc_->NotifyPromotion("ssd-node", "", "cold",
                                    t.promotions[0].task_id, true)
                  .ok());
  clock_.Advance(2000);  // past the ordinary lease, inside the trigger lease
  EXPECT_EQ(svc_->EvictBytes(1 << 20), 0u);
  EXPECT_TRUE(HasMemory("cold"));
  // Unconsumed past its lease: free to evict; the SSD replica stays.
  clock_.Advance(4000);
  EXPECT_GT(svc_->EvictBytes(1 << 20), 0u);
  EXPECT_FALSE(HasMemory("cold"));
  EXPECT_TRUE(HasDisk("cold"));
  EXPECT_EQ(svc_->metrics().CounterValue("kvpool_master_prefetch_fate_total",
                                         "fate=\"evicted_unread\""),
            1u);
}

TEST_F(BatchPrefetchTest, WatermarkAndCapThrottle) {
  config_.promotion_queue_limit = 1;
  Make();
  svc_->RegisterDiskObjects(
      "ssd-node", {{"default", "cold", 4096}, {"default", "cold2", 4096}});
  EXPECT_EQ(One("cold"), PS::kQueued);
  EXPECT_EQ(One("cold2"), PS::kThrottledCap);
  config_.promotion_queue_limit = 100;
  Make();
  svc_->RegisterDiskObjects("ssd-node", {{"default", "cold", 4096}});
  ASSERT_TRUE(Put("filler", 95 * 1024).ok());
  EXPECT_EQ(One("cold"), PS::kThrottledWatermark);
  EXPECT_EQ(svc_->metrics().CounterValue("kvpool_master_prefetch_trigger_total",
                                         "status=\"THROTTLED_WATERMARK\""),
            1u);
}

TEST_F(BatchPrefetchTest, SharesTheEntryWithOtherPaths) {
  uint64_t task = 0;
  auto r = svc_->RegisterPrefetchTask("ssd-node", "", {"cold"});
  ASSERT_EQ(r[0].code, ErrorCode::OK);
  task = r[0].task_id;
  EXPECT_EQ(One("cold"), PS::kQueued);  // already in flight: no second task
  EXPECT_TRUE(Poll(0).promotions.empty());
  EXPECT_EQ(svc_->RegisterPrefetchTask("ssd-node", "", {"cold"})[0].code,
            ErrorCode::PROMOTION_ALREADY_EXISTS);
  (void)task;
  ExpectInvariant();
}

}  // namespace
}  // namespace kvpool
