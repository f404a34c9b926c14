// What the master pushes into the KV events queue (docs/kv_events.md) for
// each change of a key's tiers, without ZMQ: the queue is drained directly.
#include <gtest/gtest.h>

#include "events/event_queue.h"
#include "master/master_service.h"

namespace kvpool {
namespace {

using events::TierEvent;
using events::TierEventKind;

class MasterEventsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    config_.default_kv_lease_ttl = 1000;
    config_.enable_offload = true;
    svc_ = std::make_unique<MasterService>(config_, &clock_);
    svc_->set_event_queue(&queue_);
    SegmentInfo info;
    info.node_id = "ssd-node";
    info.capacity = 100 * 1024;
    info.data_endpoint = "127.0.0.1:1";
    ASSERT_TRUE(svc_->MountSegment(info, /*ssd_enabled=*/true).ok());
  }
  Status Put(const std::string& key, uint64_t size,
             const std::string& tenant = "") {
    auto r = svc_->PutStart(tenant, key, size, {});
    if (!r.ok()) return r.status();
    return svc_->PutEnd(tenant, key);
  }
  void OffloadAll() {
    NodeTasks t;
    ASSERT_TRUE(svc_->Heartbeat("ssd-node", 0, 100, &t).ok());
    std::vector<OffloadResultIn> res;
    for (const auto& o : t.offloads)
      res.push_back({o.tenant, o.key, o.version, ErrorCode::OK});
    svc_->NotifyOffload("ssd-node", res);
  }
  std::vector<TierEvent> Drain() {
    std::vector<TierEvent> out;
    EXPECT_EQ(queue_.Drain(&out), 0u);
    return out;
  }

  MasterConfig config_;
  FakeClock clock_;
  events::EventQueue queue_{1000};
  std::unique_ptr<MasterService> svc_;
};

TEST_F(MasterEventsTest, PutOffloadEvictRemoveInOrder) {
  ASSERT_TRUE(Put("k", 4096, "t1").ok());
  OffloadAll();
  clock_.Advance(2000);  // past the read lease
  EXPECT_EQ(svc_->EvictBytes(4096), 4096u);
  ASSERT_TRUE(svc_->Remove("t1", "k", /*force=*/false).ok());
  auto evs = Drain();
  ASSERT_EQ(evs.size(), 4u);
  EXPECT_EQ(evs[0].kind, TierEventKind::kStored);
  EXPECT_EQ(evs[0].media, events::kMediumDram);
  EXPECT_EQ(evs[0].tenant, "t1");
  EXPECT_EQ(evs[0].key, "k");
  EXPECT_EQ(evs[0].size, 4096u);
  // Every event names the node holding the copy: here the only one.
  for (const auto& ev : evs) EXPECT_EQ(ev.node, "ssd-node");
  EXPECT_EQ(evs[1].kind, TierEventKind::kOffloaded);
  EXPECT_EQ(evs[1].media, events::kMediumSsd);
  EXPECT_EQ(evs[2].kind, TierEventKind::kEvicted);
  EXPECT_EQ(evs[2].media, events::kMediumDram);
  EXPECT_TRUE(evs[2].ssd_copy);
  // Only the SSD copy was left to remove.
  EXPECT_EQ(evs[3].kind, TierEventKind::kRemoved);
  EXPECT_EQ(evs[3].media, events::kMediumSsd);
}

TEST_F(MasterEventsTest, RemoveAllIsOneClearedEventAfterTheSweep) {
  ASSERT_TRUE(Put("a", 1024, "t1").ok());
  ASSERT_TRUE(Put("b", 1024, "t1").ok());
  ASSERT_TRUE(Put("c", 1024, "t2").ok());
  Drain();
  ASSERT_EQ(svc_->RemoveAll("t1", /*force=*/true).value(), 2u);
  auto evs = Drain();
  ASSERT_EQ(evs.size(), 1u);
  EXPECT_EQ(evs[0].kind, TierEventKind::kCleared);
  EXPECT_EQ(evs[0].tenant, "t1");
  // remove by regex is a removal per key.
  ASSERT_EQ(svc_->RemoveByRegex("t2", "c", /*force=*/true).value(), 1u);
  evs = Drain();
  ASSERT_EQ(evs.size(), 1u);
  EXPECT_EQ(evs[0].kind, TierEventKind::kRemoved);
  EXPECT_EQ(evs[0].key, "c");
  EXPECT_EQ(evs[0].media, events::kMediumDram);
}

TEST_F(MasterEventsTest, AnUpsertReplacesThenStores) {
  ASSERT_TRUE(Put("k", 1024).ok());
  Drain();
  PutOptions up;
  up.upsert = true;
  ASSERT_TRUE(svc_->PutStart("", "k", 2048, up).ok());
  ASSERT_TRUE(svc_->PutEnd("", "k").ok());
  auto evs = Drain();
  ASSERT_EQ(evs.size(), 2u);
  EXPECT_EQ(evs[0].kind, TierEventKind::kReplaced);
  EXPECT_EQ(evs[0].size, 1024u);
  EXPECT_EQ(evs[1].kind, TierEventKind::kStored);
  EXPECT_EQ(evs[1].size, 2048u);
}

TEST_F(MasterEventsTest, EvictionWithoutACopySaysSo) {
  config_.enable_offload = false;
  svc_ = std::make_unique<MasterService>(config_, &clock_);
  svc_->set_event_queue(&queue_);
  SegmentInfo info;
  info.node_id = "dram-node";
  info.capacity = 100 * 1024;
  info.data_endpoint = "127.0.0.1:1";
  ASSERT_TRUE(svc_->MountSegment(info).ok());
  ASSERT_TRUE(Put("k", 4096).ok());
  clock_.Advance(2000);
  EXPECT_EQ(svc_->EvictBytes(4096), 4096u);
  auto evs = Drain();
  ASSERT_EQ(evs.size(), 2u);
  EXPECT_EQ(evs[1].kind, TierEventKind::kEvicted);
  EXPECT_FALSE(evs[1].ssd_copy);  // the key is gone
}

TEST_F(MasterEventsTest, OneEventPerHolderNode) {
  SegmentInfo info;
  info.node_id = "other-node";
  info.capacity = 100 * 1024;
  info.data_endpoint = "127.0.0.1:2";
  ASSERT_TRUE(svc_->MountSegment(info, /*ssd_enabled=*/true).ok());
  PutOptions two;
  two.replica_num = 2;
  two.preferred_nodes = {"other-node", "ssd-node"};
  ASSERT_TRUE(svc_->PutStart("", "k", 1024, two).ok());
  ASSERT_TRUE(svc_->PutEnd("", "k").ok());
  // Published last holder first, so that a subscriber putting each new
  // memory copy in front lists them in the master's order.
  auto evs = Drain();
  ASSERT_EQ(evs.size(), 2u);
  EXPECT_EQ(evs[0].kind, TierEventKind::kStored);
  EXPECT_EQ(evs[0].node, "ssd-node");
  EXPECT_EQ(evs[1].node, "other-node");
  EXPECT_EQ(evs[1].media, events::kMediumDram);
  ASSERT_TRUE(svc_->Remove("", "k", /*force=*/true).ok());
  evs = Drain();
  ASSERT_EQ(evs.size(), 2u);
  EXPECT_EQ(evs[0].kind, TierEventKind::kRemoved);
  EXPECT_EQ(evs[0].node, "other-node");
  EXPECT_EQ(evs[1].node, "ssd-node");
  // A dead node's copies are lost on that node.
  ASSERT_TRUE(svc_->PutStart("", "j", 1024, two).ok());
  ASSERT_TRUE(svc_->PutEnd("", "j").ok());
  Drain();
  for (int64_t t = 0; t < config_.client_ttl * 1000 + 1000; t += 100) {
    clock_.Advance(100);  // other-node falls silent, ssd-node beats
    ASSERT_TRUE(svc_->Heartbeat("ssd-node", 0, 0, nullptr).ok());
    svc_->Housekeep();
  }
  evs = Drain();
  ASSERT_EQ(evs.size(), 1u);
  EXPECT_EQ(evs[0].kind, TierEventKind::kLost);
  EXPECT_EQ(evs[0].node, "other-node");
}

TEST_F(MasterEventsTest, NoQueueNoEvents) {
  svc_->set_event_queue(nullptr);
  ASSERT_TRUE(Put("k", 1024).ok());
  EXPECT_TRUE(Drain().empty());
}

}  // namespace
}  // namespace kvpool
