// Restarts from the master's side: the nodes' DRAM directories, remounted
// segments, and which re-registered copies become values again.
#include <gtest/gtest.h>

#include "master/master_service.h"

namespace kvpool {
namespace {

constexpr uint64_t kSeg = 1 << 20;

class MasterRecoveryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    config_.default_kv_lease_ttl = 1000;
    config_.client_ttl = 2;
    Restart();
  }
  // A new master process: nothing of the old one's state survives.
  void Restart() { svc_ = std::make_unique<MasterService>(config_, &clock_); }
  uint32_t Mount(const std::string& node, bool remount) {
    SegmentInfo info;
    info.node_id = node;
    info.capacity = kSeg;
    info.data_endpoint = node + ":1";
    auto r = svc_->MountSegment(info, false, false, remount,
                                /*keeps_dram_directory=*/true);
    EXPECT_TRUE(r.ok());
    return r.value();
  }
  Status Put(const std::string& key, uint64_t size, bool upsert = false) {
    PutOptions o;
    o.upsert = upsert;
    auto r = svc_->PutStart("", key, size, o);
    if (!r.ok()) return r.status();
    return svc_->PutEnd("", key);
  }
  // One heartbeat of `node` that acknowledges everything it had been sent
  // (as a node does after applying); returns the events handed over.
  std::vector<DramEventMsg> Beat(const std::string& node) {
    NodeTasks t;
    EXPECT_TRUE(svc_->Heartbeat(node, 0, 0, &t, acked_[node]).ok());
    for (const auto& e : t.dram_events) {
      acked_[node] = e.seq;
      if (e.placed) {
        dir_[node][e.offset] =
            MemoryObjectIn{e.tenant, e.key, e.offset, e.size, e.version};
      } else {
        dir_[node].erase(e.offset);
      }
    }
    return t.dram_events;
  }
  // The node's directory as it would re-register it after a remount.
  std::vector<MemoryObjectIn> Directory(const std::string& node) {
    std::vector<MemoryObjectIn> out;
    for (const auto& [off, o] : dir_[node]) out.push_back(o);
    return out;
  }
  void Run(int64_t ms) {
    for (int64_t t = 0; t < ms; t += 100) {
      clock_.Advance(std::min<int64_t>(100, ms - t));
      svc_->Housekeep();
    }
  }
  uint64_t Version(const std::string& key) {
    auto q = svc_->QueryReadOnly("", key);
    return q.code == ErrorCode::OK ? q.size : 0;
  }

  MasterConfig config_;
  FakeClock clock_;
  std::unique_ptr<MasterService> svc_;
  std::map<std::string, uint64_t> acked_;
  std::map<std::string, std::map<uint64_t, MemoryObjectIn>> dir_;
};

TEST_F(MasterRecoveryTest, RestartedMasterTakesBackWhatTheNodeHolds) {
  Mount("a", false);
  ASSERT_TRUE(Put("k1", 1000).ok());
  ASSERT_TRUE(Put("k2", 5000).ok());
  auto ev = Beat("a");
  ASSERT_EQ(ev.size(), 2u);
  EXPECT_TRUE(ev[0].placed);
  EXPECT_EQ(ev[0].key, "k1");
  EXPECT_NE(ev[0].version, 0u);
  const auto before = svc_->GetReplicaList("", "k2");
  ASSERT_TRUE(before.ok());

  Restart();
  EXPECT_EQ(svc_->GetReplicaList("", "k1").code(), ErrorCode::OBJECT_NOT_FOUND);
  const uint32_t seg = Mount("a", /*remount=*/true);
  // Closed: nothing new lands before the directory is in.
  EXPECT_EQ(Put("new", 100).code(), ErrorCode::NO_AVAILABLE_HANDLE);
  auto codes = svc_->RegisterMemoryObjects("a", seg, Directory("a"), true);
  ASSERT_TRUE(codes.ok()) << codes.status().ToString();
  EXPECT_EQ(codes.value(),
            (std::vector<ErrorCode>{ErrorCode::OK, ErrorCode::OK}));
  auto g = svc_->GetReplicaList("", "k2");
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_EQ(g->size, 5000u);
  EXPECT_EQ(g->replicas[0].offset, before->replicas[0].offset);
  // Still closed for the lease period of the earlier master.
  EXPECT_EQ(Put("new", 100).code(), ErrorCode::NO_AVAILABLE_HANDLE);
  Run(1100);
  ASSERT_TRUE(Put("new", 100).ok());
  // The new value's range is not one that came back.
  auto n = svc_->GetReplicaList("", "new");
  ASSERT_TRUE(n.ok());
  for (const auto& o : Directory("a")) {
    EXPECT_TRUE(n->replicas[0].offset >= o.offset + o.size ||
                n->replicas[0].offset + 100 <= o.offset);
  }
}

}  // namespace
}  // namespace kvpool
