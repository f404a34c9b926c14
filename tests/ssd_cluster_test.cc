// The SSD tier end to end on a LocalCluster: offload (both modes), reads of
// SSD-only keys across nodes, restart recovery, promote-on-hit, corrupt
// records, and the pressure property: every acknowledged put stays readable.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "common/failpoint.h"
#include "tests/ssd_fixture.h"

namespace kvpool {
namespace {

using kvpool::testing::kValue;
using kvpool::testing::RandomBytes;
using kvpool::testing::WaitUntil;
namespace fs = std::filesystem;

class SsdClusterTest : public kvpool::testing::SsdFixture {
 protected:
  static std::string Key(int i) { return "blk-" + std::to_string(i); }
};

TEST_F(SsdClusterTest, ProactiveOffloadGivesEveryKeyAnSsdCopy) {
  Start();
  auto c = NewClient();
  for (int i = 0; i < 8; ++i)
    ASSERT_TRUE(c->Put(Key(i), RandomBytes(kValue, i)).ok());
  ASSERT_TRUE(WaitUntil(
      [&] {
        for (int i = 0; i < 8; ++i) {
          if (!HasDiskCopy(*c, Key(i))) return false;
        }
        return true;
      },
      std::chrono::seconds(20)));
  for (int i = 0; i < 8; ++i)
    EXPECT_EQ(Tier(*c, Key(i)), "memory");  // still in DRAM too
}

TEST_F(SsdClusterTest, PressureKeepsEveryAcknowledgedKeyReadable) {
  Start();
  auto c = NewClient(TransportMode::kTcp);
  const int n = 3 * 2 * 16;  // three times the pool's DRAM
  int acked = 0;
  for (int i = 0; i < n; ++i)
    acked += c->Put(Key(i), RandomBytes(kValue, i)).ok();
  EXPECT_EQ(acked, n);
  int ssd_only = 0;
  for (int i = 0; i < n; ++i) {
    auto r = c->Get(Key(i));
    ASSERT_TRUE(r.ok()) << Key(i) << ": " << r.status().ToString();
    EXPECT_EQ(r.value(), RandomBytes(kValue, i)) << Key(i);
  }
  for (int i = 0; i < n; ++i) ssd_only += Tier(*c, Key(i)) == "local_disk";
  EXPECT_GT(ssd_only, 0);
  EXPECT_GT(c->counters().ssd_bytes_read, 0u);
}

TEST_F(SsdClusterTest, OffloadOnEvictAlsoLosesNothing) {
  opts_.offload_on_evict = true;
  Start();
  auto c = NewClient();
  const int n = 3 * 2 * 16;
  int acked = 0;
  for (int i = 0; i < n; ++i)
    acked += c->Put(Key(i), RandomBytes(kValue, i)).ok();
  // A put may be refused (NO_AVAILABLE_HANDLE) while evicted keys are still
  // being copied, but a refused put was never acknowledged; every
  // acknowledged key must be readable.
  EXPECT_GT(acked, n / 2);
  for (int i = 0; i < n; ++i) {
    auto r = c->Get(Key(i));
    if (r.code() == ErrorCode::OBJECT_NOT_FOUND)
      continue;  // its put was refused
    ASSERT_TRUE(r.ok()) << Key(i) << ": " << r.status().ToString();
    EXPECT_EQ(r.value(), RandomBytes(kValue, i));
  }
  auto& svc = cluster_->master().service();
  EXPECT_EQ(svc.metrics().CounterValue(
                "kvpool_master_force_evicted_without_copy_total"),
            0u);
}

// The lease is judged per value, by when the transfer that carried it
// ended: a batch whose SSD read outlives the lease loses that value
// (LEASE_EXPIRED, never bytes that may be stale), not the DRAM values it
// copied before.
TEST_F(SsdClusterTest, ALongSsdReadExpiresItsOwnValueNotTheBatchsDramOnes) {
  Start();
  auto c = NewClient();
  auto cold = MakeSsdOnly(*c, 1);
  ASSERT_TRUE(c->Put("hot", RandomBytes(kValue, 7)).ok());
  ASSERT_EQ(Tier(*c, "hot"), "memory");
  // The SSD read is held three times the fixture's 500 ms lease.
  ASSERT_TRUE(ArmFailpoints("node.get_read.during=pause:1500@1").ok());
  kvpool::testing::DisarmFailpointsAtExit disarm;
  auto got = c->BatchGet({"hot", cold[0]});
  ASSERT_EQ(got.size(), 2u);
  ASSERT_TRUE(got[0].ok()) << got[0].status().ToString();
  EXPECT_EQ(got[0].value(), RandomBytes(kValue, 7));
  EXPECT_EQ(got[1].status().code(), ErrorCode::LEASE_EXPIRED);
  EXPECT_EQ(FailpointPasses("node.get_read.during"), 1u);
  // Read again without the pause, the value is whole.
  EXPECT_EQ(c->Get(cold[0]).value(), RandomBytes(kValue, 0));
}

TEST_F(SsdClusterTest, RemoteHolderServesSsdReadOverTcp) {
  Start();
  auto c = NewClient(TransportMode::kTcp);
  ReplicateConfig on1;
  on1.preferred_segment = cluster_->node(1).node_id();
  ASSERT_TRUE(c->Put("far", RandomBytes(kValue, 99), on1).ok());
  ASSERT_TRUE(WaitUntil([&] { return HasDiskCopy(*c, "far"); },
                        std::chrono::seconds(20)));
  // Push "far" out of DRAM with newer keys.
  for (int i = 0; i < 40; ++i)
    ASSERT_TRUE(c->Put(Key(i), RandomBytes(kValue, i), on1).ok());
  ASSERT_TRUE(WaitUntil([&] { return Tier(*c, "far") == "local_disk"; },
                        std::chrono::seconds(20)));
  auto r = c->Get("far");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r.value(), RandomBytes(kValue, 99));
  EXPECT_GE(c->counters().ssd_bytes_read, kValue);
}

TEST_F(SsdClusterTest, EmptyTenantReadsAndPrefetchesItsSsdCopies) {
  // "" is the master's "default" tenant; the holder must agree, or SSD reads
  // and prefetches of such a client miss.
  Start();
  ClientConfig cc;
  cc.tenant = "";
  cc.transport = TransportMode::kTcp;
  cc.enable_ssd_prefetch = true;
  auto c = cluster_->NewClient(cc).value();
  auto keys = MakeSsdOnly(*c, 2);
  auto r = c->Get(keys[0]);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r.value(), RandomBytes(kValue, 0));
  EXPECT_GE(c->counters().ssd_bytes_read, kValue);
  // Prefetch-on-exist of the other key brings it to DRAM.
  ExistOptions eo;
  eo.prefetch_to_memory = true;
  ASSERT_TRUE(c->IsExist(keys[1], eo).value());
  EXPECT_TRUE(WaitUntil([&] { return Tier(*c, keys[1]) == "memory"; },
                        std::chrono::seconds(20)));
}

TEST_F(SsdClusterTest, RemovedKeyStaysGoneAfterANodeRestart) {
  // The master tells the holder to delete the SSD record of a removed key;
  // before, the restarted node re-registered it and served the old value.
  opts_.num_nodes = 1;
  Start();
  auto c = NewClient();
  ASSERT_TRUE(c->Put("k1", RandomBytes(kValue, 1)).ok());
  ASSERT_TRUE(WaitUntil([&] { return HasDiskCopy(*c, "k1"); },
                        std::chrono::seconds(20)));
  ASSERT_TRUE(c->Remove("k1").ok());
  FileStorage* st = cluster_->node(0).ssd()->storage();
  ASSERT_TRUE(WaitUntil([&] { return !st->LookupSize("default", "k1").ok(); },
                        std::chrono::seconds(20)));
  ASSERT_TRUE(cluster_->RestartNode(0).ok());
  c = NewClient();
  ASSERT_TRUE(WaitUntil([&] { return c->Stat()->segments.size() == 1; },
                        std::chrono::seconds(20)));
  EXPECT_EQ(c->Get("k1").code(), ErrorCode::OBJECT_NOT_FOUND);
}

TEST_F(SsdClusterTest, UpsertNeverLetsARestartServeTheOldValue) {
  // Offload at eviction only: the new value stays in DRAM, and the old
  // value's SSD record is all the disk has of the key. Before, a restart
  // re-registered that record and served the old bytes as current.
  opts_.num_nodes = 1;
  opts_.offload_on_evict = true;
  Start();
  auto c = NewClient();
  const std::string key = "k";
  ASSERT_TRUE(c->Put(key, RandomBytes(kValue, 0)).ok());
  // Newer keys push it out of DRAM; eviction copies it to the SSD first.
  for (int i = 0; i < 40 && Tier(*c, key) != "local_disk"; ++i)
    ASSERT_TRUE(c->Put(Key(i), RandomBytes(kValue, 100 + i)).ok());
  ASSERT_TRUE(WaitUntil([&] { return Tier(*c, key) == "local_disk"; },
                        std::chrono::seconds(20)));
  for (int i = 0; i < 40; ++i) c->Remove(Key(i), true).IgnoreError();
  const std::string v2 = RandomBytes(kValue / 2, 2);
  ASSERT_TRUE(c->Upsert(key, v2).ok());
  FileStorage* st = cluster_->node(0).ssd()->storage();
  ASSERT_TRUE(WaitUntil([&] { return !st->LookupSize("default", key).ok(); },
                        std::chrono::seconds(20)));
  ASSERT_TRUE(cluster_->RestartNode(0).ok());  // v2 was only in its DRAM
  c = NewClient();
  ASSERT_TRUE(WaitUntil([&] { return c->Stat()->segments.size() == 1; },
                        std::chrono::seconds(20)));
  auto r = c->Get(key);
  EXPECT_EQ(r.code(), ErrorCode::OBJECT_NOT_FOUND)
      << (r.ok() && r.value() == RandomBytes(kValue, 0) ? "the old value"
                                                        : "other bytes");
}

TEST_F(SsdClusterTest, OffloadBatchWithTwoVersionsKeepsTheNewOnesCopy) {
  // Both versions' offload tasks reach the holder in one heartbeat: the
  // refused old one used to be rolled back by key, deleting the new one's
  // record while the master recorded a copy of it.
  opts_.num_nodes = 1;
  Start();
  auto c = NewClient();
  cluster_->node(0).PauseHeartbeats(true);
  ASSERT_TRUE(
      WaitUntil([&] { return !cluster_->node(0).heartbeat_in_flight(); },
                std::chrono::seconds(20)));
  const std::string v1 = RandomBytes(kValue, 1),
                    v2 = RandomBytes(kValue / 2, 2);
  ASSERT_TRUE(c->Put("k", v1).ok());
  ASSERT_TRUE(c->Upsert("k", v2).ok());  // v1's task is stale from here
  cluster_->node(0).PauseHeartbeats(false);
  ASSERT_TRUE(WaitUntil([&] { return HasDiskCopy(*c, "k"); },
                        std::chrono::seconds(20)));
  FileStorage* st = cluster_->node(0).ssd()->storage();
  auto n = st->LookupSize("default", "k");
  ASSERT_TRUE(n.ok()) << "the master records a copy the holder deleted";
  EXPECT_EQ(n.value(), v2.size());
}

TEST_F(SsdClusterTest, RestartedNodeReRegistersItsSsdObjects) {
  opts_.client_ttl = 1;
  Start();
  auto c = NewClient();
  ReplicateConfig on0;
  on0.preferred_segment = cluster_->node(0).node_id();
  for (int i = 0; i < 6; ++i)
    ASSERT_TRUE(c->Put(Key(i), RandomBytes(kValue, i), on0).ok());
  ASSERT_TRUE(WaitUntil(
      [&] {
        for (int i = 0; i < 6; ++i) {
          if (!HasDiskCopy(*c, Key(i))) return false;
        }
        return true;
      },
      std::chrono::seconds(20)));
  // The master forgets node0 entirely (as after a crash) ...
  cluster_->CrashNode(0);
  ASSERT_TRUE(WaitUntil([&] { return Tier(*c, Key(0)) == "absent"; },
                        std::chrono::seconds(10)));
  // ... and the restarted node brings its SSD objects back.
  ASSERT_TRUE(cluster_->RestartNode(0).ok());
  ASSERT_TRUE(WaitUntil([&] { return Tier(*c, Key(5)) == "local_disk"; },
                        std::chrono::seconds(10)));
  for (int i = 0; i < 6; ++i) {
    auto r = c->Get(Key(i));
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r.value(), RandomBytes(kValue, i));
  }
}

TEST_F(SsdClusterTest, PromoteOnHitBringsHotKeyBackToDram) {
  opts_.promotion_on_hit = true;
  Start();
  auto c = NewClient();
  ASSERT_TRUE(c->Put("hot", RandomBytes(kValue, 7)).ok());
  ASSERT_TRUE(WaitUntil([&] { return HasDiskCopy(*c, "hot"); },
                        std::chrono::seconds(20)));
  for (int i = 0; i < 40; ++i)
    ASSERT_TRUE(c->Put(Key(i), RandomBytes(kValue, i)).ok());
  ASSERT_TRUE(WaitUntil([&] { return Tier(*c, "hot") == "local_disk"; },
                        std::chrono::seconds(20)));
  // Make room so the watermark gate admits the promotion.
  for (int i = 0; i < 40; ++i) c->Remove(Key(i), true).IgnoreError();
  for (int i = 0; i < 3; ++i)
    ASSERT_EQ(c->Get("hot").value(), RandomBytes(kValue, 7));
  ASSERT_TRUE(WaitUntil([&] { return Tier(*c, "hot") == "memory"; },
                        std::chrono::seconds(20)));
  EXPECT_EQ(c->Get("hot").value(), RandomBytes(kValue, 7));
  auto counters = cluster_->master().service().promotion_counters();
  EXPECT_EQ(counters.completed, 1u);
  EXPECT_EQ(counters.admitted, counters.completed + counters.failed +
                                   counters.cancelled + counters.expired +
                                   counters.in_flight);
}

TEST_F(SsdClusterTest, CorruptSsdRecordIsACleanMissNeverWrongBytes) {
  opts_.num_nodes = 1;
  Start();
  auto c = NewClient();
  ASSERT_TRUE(c->Put("victim", RandomBytes(kValue, 5)).ok());
  ASSERT_TRUE(WaitUntil([&] { return HasDiskCopy(*c, "victim"); },
                        std::chrono::seconds(20)));
  for (int i = 0; i < 20; ++i)
    ASSERT_TRUE(c->Put(Key(i), RandomBytes(kValue, i)).ok());
  ASSERT_TRUE(WaitUntil([&] { return Tier(*c, "victim") == "local_disk"; },
                        std::chrono::seconds(20)));
  // Flip bytes in the middle of every segment file's first record data.
  for (const auto& e : fs::recursive_directory_iterator(root_)) {
    if (!e.is_regular_file()) continue;
    std::fstream f(e.path(), std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(8192 + 1000);
    f.write("\xde\xad\xbe\xef", 4);
  }
  auto r = c->Get("victim");
  EXPECT_FALSE(r.ok());
  EXPECT_NE(r.code(), ErrorCode::OK);
}

}  // namespace
}  // namespace kvpool

namespace kvpool {
namespace {

using S = PrefetchToMemoryStatus;

class RouterTriggerTest : public kvpool::testing::SsdFixture {};

TEST_F(RouterTriggerTest, OffByDefaultAnswersDisabled) {
  Start();
  auto c = NewClient();
  auto keys = MakeSsdOnly(*c, 1);
  EXPECT_EQ(c->BatchPrefetchToMemory(keys).code(),
            ErrorCode::UNAVAILABLE_IN_CURRENT_STATUS);
  EXPECT_EQ(Tier(*c, keys[0]), "local_disk");
}

TEST_F(RouterTriggerTest, QueuedKeysArePromotedBeforeTheGet) {
  opts_.enable_prefetch_trigger = true;
  Start();
  auto c = NewClient();
  auto keys = MakeSsdOnly(*c, 2);
  ASSERT_TRUE(c->Put("hot", "in dram").ok());
  auto r = c->BatchPrefetchToMemory({keys[0], keys[1], "hot", "unknown"});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r.value()[0], S::kQueued);
  EXPECT_EQ(r.value()[1], S::kQueued);
  EXPECT_EQ(r.value()[2], S::kInMemory);
  EXPECT_EQ(r.value()[3], S::kNotFound);
  // Two routers triggering the same keys: server-side idempotency.
  auto again = c->BatchPrefetchToMemory({keys[0]});
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again.value()[0] == S::kQueued ||
              again.value()[0] == S::kInMemory);
  ASSERT_TRUE(kvpool::testing::WaitUntil(
      [&] {
        return Tier(*c, keys[0]) == "memory" && Tier(*c, keys[1]) == "memory";
      },
      std::chrono::seconds(20)));
  uint64_t ssd_before = c->counters().ssd_bytes_read;
  EXPECT_EQ(c->Get(keys[1]).value(),
            kvpool::testing::RandomBytes(kvpool::testing::kValue, 1));
  EXPECT_EQ(c->counters().ssd_bytes_read, ssd_before);  // served from DRAM
  auto pc = cluster_->master().service().promotion_counters();
  EXPECT_EQ(pc.admitted, 2u);
  EXPECT_EQ(pc.admitted, pc.completed + pc.failed + pc.cancelled + pc.expired +
                             pc.in_flight);
}

}  // namespace
}  // namespace kvpool

namespace kvpool {
namespace {

// A node that offers its SSD records to a master that does not know it
// (the master restarted, or declared it dead, after the node's mount) must
// keep them: that refusal is not "this copy is stale". It once deleted
// them, losing every SSD-only value.
TEST_F(SsdClusterTest, SsdRecordsOfferedToAMasterThatForgotTheNodeAreKept) {
  opts_.num_nodes = 1;
  opts_.client_ttl = 1;
  Start();
  auto c = NewClient();
  for (int i = 0; i < 4; ++i)
    ASSERT_TRUE(c->Put(Key(i), RandomBytes(kValue, i)).ok());
  ASSERT_TRUE(WaitUntil(
      [&] {
        for (int i = 0; i < 4; ++i) {
          if (!HasDiskCopy(*c, Key(i))) return false;
        }
        return true;
      },
      std::chrono::seconds(20)));
  Node& node = cluster_->node(0);
  SsdTier* tier = node.ssd();
  const size_t records = tier->storage()->List().size();
  ASSERT_EQ(records, 4u);
  // Silent past client_ttl: the master forgets the node.
  node.PauseHeartbeats(true);
  tier->PausePullForTest(true);
  ASSERT_TRUE(WaitUntil([&] { return c->Stat()->segments.empty(); },
                        std::chrono::seconds(20)));
  tier->RegisterWithMaster();  // answered CLIENT_NOT_FOUND for every record
  EXPECT_EQ(tier->storage()->List().size(), records);
  // Back: it mounts again and its SSD copies serve every key.
  tier->PausePullForTest(false);
  node.PauseHeartbeats(false);
  ASSERT_TRUE(WaitUntil(
      [&] {
        for (int i = 0; i < 4; ++i) {
          auto v = c->Get(Key(i));
          if (!v.ok() || v.value() != RandomBytes(kValue, i)) return false;
        }
        return true;
      },
      std::chrono::seconds(20)));
}

}  // namespace
}  // namespace kvpool
