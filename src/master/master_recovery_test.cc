// Restarts from the master's side: the nodes' DRAM directories, remounted
// segments, and which re-registered copies become values again.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "master/master_service.h"
#include "tests/test_util.h"

namespace kvpool {
namespace {

constexpr uint64_t kSeg = 1 << 20;

class MasterRecoveryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    config_.default_kv_lease_ttl = 1000;
    config_.client_ttl = 2;
    // Removes here answer at once unless a test says otherwise: most tests
    // play the node's heartbeats themselves, after the call.
    config_.holder_ack_timeout_ms = 0;
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

namespace kvpool {
namespace {

TEST_F(MasterRecoveryTest, AFreedRangeIsReusedOnlyOnceTheNodeAppliedTheFree) {
  Mount("a", false);
  ASSERT_TRUE(Put("k1", kSeg / 2).ok());
  Beat("a");
  ASSERT_TRUE(svc_->Remove("", "k1", true).ok());
  // The node's directory still names k1's range: it is held, not reused,
  // though it no longer counts as used.
  EXPECT_EQ(svc_->segments().HeldBytes(SegmentKind::kMain), kSeg / 2);
  EXPECT_EQ(svc_->segments().Usage(SegmentKind::kMain).used, 0u);
  EXPECT_EQ(svc_->segments().AllocateOn(kSeg / 2 + 64, SegmentKind::kMain, "a"),
            std::nullopt);
  // A hand-over whose reply was lost is sent again: the node acks less.
  NodeTasks lost;
  ASSERT_TRUE(svc_->Heartbeat("a", 0, 0, &lost, acked_["a"]).ok());
  ASSERT_EQ(lost.dram_events.size(), 1u);
  EXPECT_FALSE(lost.dram_events[0].placed);
  EXPECT_EQ(svc_->segments().HeldBytes(SegmentKind::kMain), kSeg / 2);
  auto again = Beat("a");
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].seq, lost.dram_events[0].seq);
  Beat("a");  // acknowledges it
  EXPECT_EQ(svc_->segments().HeldBytes(SegmentKind::kMain), 0u);
  EXPECT_TRUE(Put("k2", kSeg / 2 + 64).ok());
}

TEST_F(MasterRecoveryTest, TheNewestVersionWinsAndEqualVersionsAreOneValue) {
  Restart();
  const uint32_t a = Mount("a", true), b = Mount("b", true);
  using V = std::vector<ErrorCode>;
  // b holds the newer value of "k" (an upsert that landed on b).
  EXPECT_EQ(svc_->RegisterMemoryObjects("a", a, {{"", "k", 0, 100, 7}}, false)
                .value(),
            V{ErrorCode::OK});
  EXPECT_EQ(
      svc_->RegisterMemoryObjects("b", b, {{"", "k", 4096, 100, 9}}, false)
          .value(),
      V{ErrorCode::OK});
  auto g = svc_->GetReplicaList("", "k");
  ASSERT_TRUE(g.ok());
  ASSERT_EQ(g->replicas.size(), 1u);
  EXPECT_EQ(g->replicas[0].segment->node_id, "b");
  // Another copy of version 9 is a second replica; version 7 is refused.
  EXPECT_EQ(
      svc_->RegisterMemoryObjects("a", a, {{"", "k", 8192, 100, 9}}, false)
          .value(),
      V{ErrorCode::OK});
  EXPECT_EQ(svc_->GetReplicaList("", "k")->replicas.size(), 2u);
  EXPECT_EQ(svc_->RegisterMemoryObjects("a", a, {{"", "j", 0, 100, 1}}, false)
                .value(),
            V{ErrorCode::INVALID_PARAMS});  // held until a applies its free
  // An SSD record of the same version attaches; an older one is refused.
  ASSERT_TRUE(
      svc_->MountSegment({0, "c", SegmentKind::kMain, kSeg, "", "", "c:1"},
                         /*ssd_enabled=*/true)
          .ok());
  EXPECT_EQ(svc_->RegisterDiskObjects("c", {{"", "k", 100, 9}}),
            V{ErrorCode::OK});
  EXPECT_EQ(svc_->RegisterDiskObjects("c", {{"", "old", 100, 3}}),
            V{ErrorCode::OK});
  EXPECT_EQ(svc_->RegisterMemoryObjects("b", b, {{"", "old", 0, 100, 2}}, true)
                .value(),
            V{ErrorCode::OBJECT_ALREADY_EXISTS});
  // A put after all this gets a version above every one it saw.
  Run(1100);
  ASSERT_TRUE(Put("k", 100, /*upsert=*/true).ok());
  ASSERT_TRUE(svc_->Heartbeat("b").ok());
}

TEST_F(MasterRecoveryTest, ANodeBackFromTheDeadBringsBackOnlyWhatNoOneChanged) {
  Mount("a", false);
  Mount("b", false);
  for (const char* k : {"gone", "new", "kept"}) {
    PutOptions o;
    o.preferred_node = "a";
    ASSERT_TRUE(svc_->PutStart("", k, 1000, o).ok());
    ASSERT_TRUE(svc_->PutEnd("", k).ok());
  }
  Beat("a");
  // a falls silent: declared dead after client_ttl, b keeps beating.
  for (int i = 0; i < 30; ++i) {
    Run(100);
    Beat("b");
  }
  ASSERT_EQ(svc_->GetReplicaList("", "kept").code(),
            ErrorCode::OBJECT_NOT_FOUND);
  // Meanwhile "gone" is removed (a miss, but remembered) and "new" put anew.
  EXPECT_EQ(svc_->Remove("", "gone", false).code(),
            ErrorCode::OBJECT_NOT_FOUND);
  ASSERT_TRUE(Put("new", 2000).ok());
  const uint32_t seg = Mount("a", true);
  acked_["a"] = 0;
  auto codes = svc_->RegisterMemoryObjects("a", seg, Directory("a"), true);
  ASSERT_TRUE(codes.ok());
  std::map<std::string, ErrorCode> by_key;
  auto dir = Directory("a");
  for (size_t i = 0; i < dir.size(); ++i) by_key[dir[i].key] = codes.value()[i];
  EXPECT_EQ(by_key["gone"], ErrorCode::OBJECT_NOT_FOUND);
  EXPECT_EQ(by_key["new"], ErrorCode::OBJECT_ALREADY_EXISTS);
  EXPECT_EQ(by_key["kept"], ErrorCode::OK);
  EXPECT_EQ(svc_->GetReplicaList("", "new")->size, 2000u);
  EXPECT_TRUE(svc_->GetReplicaList("", "kept").ok());
}

TEST_F(MasterRecoveryTest, RemoveAllBeforeReRegistrationRemovesThoseCopiesToo) {
  Mount("a", false);
  ASSERT_TRUE(Put("x", 100).ok());
  ASSERT_TRUE(Put("y", 100).ok());
  Beat("a");
  Restart();
  // The client's remove_all reaches the new master before the node.
  EXPECT_EQ(svc_->RemoveAll("", true).value(), 0u);
  const uint32_t seg = Mount("a", true);
  auto codes = svc_->RegisterMemoryObjects("a", seg, Directory("a"), true);
  ASSERT_TRUE(codes.ok());
  for (ErrorCode c : codes.value()) EXPECT_EQ(c, ErrorCode::OBJECT_NOT_FOUND);
  EXPECT_EQ(svc_->GetReplicaList("", "x").code(), ErrorCode::OBJECT_NOT_FOUND);
}

TEST_F(MasterRecoveryTest, BadDirectoriesAreRefusedWithoutHarm) {
  const uint32_t seg = Mount("a", true);
  EXPECT_EQ(svc_->RegisterMemoryObjects("stranger", seg, {}, true).code(),
            ErrorCode::CLIENT_NOT_FOUND);
  Mount("b", false);
  EXPECT_EQ(svc_->RegisterMemoryObjects("b", seg, {}, true).code(),
            ErrorCode::SEGMENT_NOT_FOUND);  // not b's segment
  auto codes = svc_->RegisterMemoryObjects(
      "a", seg,
      {{"", "", 0, 10, 1},               // empty key
       {"", "zero", 0, 0, 1},            // no bytes
       {"", "past", kSeg - 64, 128, 1},  // beyond the segment
       {"", "ok", 0, 128, 1},
       {"", "overlap", 64, 128, 1}},  // inside "ok"
      true);
  ASSERT_TRUE(codes.ok());
  EXPECT_EQ(codes.value(),
            (std::vector<ErrorCode>{ErrorCode::INVALID_PARAMS,
                                    ErrorCode::INVALID_PARAMS,
                                    ErrorCode::INVALID_PARAMS, ErrorCode::OK,
                                    ErrorCode::INVALID_PARAMS}));
  EXPECT_TRUE(svc_->GetReplicaList("", "ok").ok());
  EXPECT_EQ(svc_->GetReplicaList("", "overlap").code(),
            ErrorCode::OBJECT_NOT_FOUND);
}

TEST_F(MasterRecoveryTest, ANodeWithoutADirectoryIsFreedAtOnceAsBefore) {
  SegmentInfo info;
  info.node_id = "old";
  info.capacity = kSeg;
  ASSERT_TRUE(svc_->MountSegment(info).ok());
  ASSERT_TRUE(Put("k", kSeg / 2).ok());
  NodeTasks t;
  ASSERT_TRUE(svc_->Heartbeat("old", 0, 0, &t).ok());
  EXPECT_TRUE(t.dram_events.empty());
  ASSERT_TRUE(svc_->Remove("", "k", true).ok());
  EXPECT_EQ(svc_->segments().HeldBytes(SegmentKind::kMain), 0u);
  EXPECT_TRUE(Put("k2", kSeg / 2 + 64).ok());
}

}  // namespace
}  // namespace kvpool

namespace kvpool {
namespace {

TEST_F(MasterRecoveryTest, ARemoveAnswersOnceTheHolderHasDeletedTheValue) {
  config_.holder_ack_timeout_ms = 60000;
  Restart();
  Mount("a", false);
  ASSERT_TRUE(Put("k", 1000).ok());
  Beat("a");
  Beat("a");  // acknowledges the placement: nothing is queued
  ASSERT_EQ(svc_->nodes().dram_events_queued(), 0u);
  std::atomic<bool> answered{false};
  std::thread rm([&] {
    EXPECT_TRUE(svc_->Remove("", "k", false).ok());
    answered = true;
  });
  // The free is queued for the node; the remove waits for it to be applied.
  ASSERT_TRUE(testing::WaitUntil(
      [&] { return svc_->nodes().dram_events_queued() == 1; },
      std::chrono::seconds(10)));
  EXPECT_FALSE(answered.load());
  Beat("a");  // hands the free over
  Beat("a");  // acknowledges it
  rm.join();
  EXPECT_TRUE(answered.load());
  EXPECT_TRUE(Directory("a").empty());
}

TEST_F(MasterRecoveryTest, APausedHolderDelaysARemoveOnlyUpToTheTimeout) {
  config_.holder_ack_timeout_ms = 100;
  Restart();
  Mount("a", false);
  ASSERT_TRUE(Put("k", 1000).ok());
  Beat("a");
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_TRUE(svc_->Remove("", "k", false).ok());  // nobody acknowledges
  EXPECT_GE(std::chrono::steady_clock::now() - t0,
            std::chrono::milliseconds(100));
  EXPECT_EQ(svc_->metrics().CounterValue(
                "kvpool_master_holder_ack_timeouts_total", ""),
            1u);
  // A node without a directory is never waited for.
  SegmentInfo info;
  info.node_id = "old";
  info.capacity = kSeg;
  ASSERT_TRUE(svc_->MountSegment(info).ok());
  PutOptions o;
  o.preferred_node = "old";
  ASSERT_TRUE(svc_->PutStart("", "j", 1000, o).ok());
  ASSERT_TRUE(svc_->PutEnd("", "j").ok());
  EXPECT_EQ(svc_->QueryReadOnly("", "j").replicas[0].segment->node_id, "old");
  EXPECT_TRUE(svc_->Remove("", "j", false).ok());
  EXPECT_EQ(svc_->metrics().CounterValue(
                "kvpool_master_holder_ack_timeouts_total", ""),
            1u);
}

}  // namespace
}  // namespace kvpool

namespace kvpool {
namespace {

TEST_F(MasterRecoveryTest, EveryCopyOfADeadNodeComesBackWhenNothingChanged) {
  // Keys share version-floor slots by hash; a node's loss must not raise
  // them, or keys that share a slot refuse each other on return (13 of 5k,
  // 102k of 500k with 2^20 slots, measured by kvpool bench restart).
  Mount("a", false);
  Mount("b", false);
  constexpr int kN = 5000;
  PutOptions o;
  o.preferred_node = "a";
  for (int i = 0; i < kN; ++i) {
    const std::string k = "k" + std::to_string(i);
    ASSERT_TRUE(svc_->PutStart("", k, 64, o).ok());
    ASSERT_TRUE(svc_->PutEnd("", k).ok());
  }
  while (!Beat("a").empty()) {
  }  // 4096 events per hand-over at most
  for (int i = 0; i < 30; ++i) {
    Run(100);
    Beat("b");
  }
  ASSERT_EQ(svc_->GetReplicaList("", "k0").code(), ErrorCode::OBJECT_NOT_FOUND);
  const uint32_t seg = Mount("a", true);
  auto codes = svc_->RegisterMemoryObjects("a", seg, Directory("a"), true);
  ASSERT_TRUE(codes.ok());
  ASSERT_EQ(codes.value().size(), size_t(kN));
  int refused = 0;
  for (ErrorCode c : codes.value()) refused += c != ErrorCode::OK;
  EXPECT_EQ(refused, 0);
}

}  // namespace
}  // namespace kvpool

namespace kvpool {
namespace {

TEST_F(MasterRecoveryTest, AnOlderCopyNeverReplacesANewerValueLostWithItsNode) {
  Restart();
  const uint32_t a = Mount("a", true), b = Mount("b", true);
  using V = std::vector<ErrorCode>;
  // b holds k's newer value; then b is declared dead and k is lost.
  ASSERT_EQ(
      svc_->RegisterMemoryObjects("b", b, {{"", "k", 0, 100, 9}}, true).value(),
      V{ErrorCode::OK});
  for (int i = 0; i < 30; ++i) {
    Run(100);
    Beat("a");
  }
  ASSERT_EQ(svc_->GetReplicaList("", "k").code(), ErrorCode::OBJECT_NOT_FOUND);
  // a still has the older value (its free was never applied, or its SSD
  // kept an older record): it must not become k's value.
  EXPECT_EQ(
      svc_->RegisterMemoryObjects("a", a, {{"", "k", 0, 100, 5}}, true).value(),
      V{ErrorCode::OBJECT_ALREADY_EXISTS});
  EXPECT_EQ(svc_->GetReplicaList("", "k").code(), ErrorCode::OBJECT_NOT_FOUND);
  // The lost value itself may come back (b woke up).
  const uint32_t b2 = Mount("b", true);
  EXPECT_EQ(svc_->RegisterMemoryObjects("b", b2, {{"", "k", 0, 100, 9}}, true)
                .value(),
            V{ErrorCode::OK});
}

}  // namespace
}  // namespace kvpool

namespace kvpool {
namespace {

// Issue #41, hole 2: every way a key's value can change, times every way its
// holder can drop out and come back, with its copy in the DRAM directory,
// in an SSD record, or both. What was current when the holder stopped comes
// back; what was removed or replaced does not.
enum class Op { kPut, kUpsert, kRemove, kReplace };
enum class Outage { kNodeDeclaredDead, kMasterRestarted };
enum class Tier { kDram, kSsd, kBoth };

struct VersionOrderCase {
  Op op;
  Outage outage;
  Tier tier;
};

std::string CaseName(const ::testing::TestParamInfo<VersionOrderCase>& info) {
  static const char* ops[] = {"Put", "Upsert", "Remove", "Replace"};
  static const char* outages[] = {"NodeDeclaredDead", "MasterRestarted"};
  static const char* tiers[] = {"Dram", "Ssd", "DramAndSsd"};
  return std::string(ops[int(info.param.op)]) +
         outages[int(info.param.outage)] + tiers[int(info.param.tier)];
}

class VersionOrderTest
    : public MasterRecoveryTest,
      public ::testing::WithParamInterface<VersionOrderCase> {};

TEST_P(VersionOrderTest, OnlyTheCurrentValueComesBack) {
  const VersionOrderCase c = GetParam();
  Mount("a", false);
  Mount("b", false);
  PutOptions on_a;
  on_a.preferred_node = "a";
  auto put = [&](uint64_t size, bool upsert) {
    PutOptions o = on_a;
    o.upsert = upsert;
    ASSERT_TRUE(svc_->PutStart("", "k", size, o).ok());
    ASSERT_TRUE(svc_->PutEnd("", "k").ok());
    Beat("a");
  };
  // Sizes name the values: 100 the first, 200 its upsert, 300 a new put.
  put(100, false);
  const uint64_t first_version = Directory("a").at(0).version;
  uint64_t want_size = 100;
  switch (c.op) {
    case Op::kPut:
      break;
    case Op::kUpsert:
      put(200, true);
      want_size = 200;
      break;
    case Op::kRemove:
      ASSERT_TRUE(svc_->Remove("", "k", false).ok());
      Beat("a");
      want_size = 0;
      break;
    case Op::kReplace:
      ASSERT_TRUE(svc_->Remove("", "k", false).ok());
      Beat("a");
      put(300, false);
      want_size = 300;
      break;
  }
  const std::vector<MemoryObjectIn> dir = Directory("a");
  ASSERT_EQ(dir.size(), want_size == 0 ? 0u : 1u);
  // The SSD copy of the current value (offloaded after its commit), and,
  // where the key changed, a record of the first value whose drop the node
  // never applied: the version floor alone must refuse it.
  std::vector<DiskObjectIn> ssd;
  for (const auto& o : dir) ssd.push_back({"", "k", o.size, o.version});
  const bool stale_record =
      c.op != Op::kPut && c.outage == Outage::kNodeDeclaredDead;
  if (stale_record) ssd.push_back({"", "k", 100, first_version});

  if (c.outage == Outage::kNodeDeclaredDead) {
    for (int i = 0; i < 30; ++i) {  // a silent past client_ttl, b beats
      Run(100);
      Beat("b");
    }
    ASSERT_EQ(svc_->GetReplicaList("", "k").code(),
              ErrorCode::OBJECT_NOT_FOUND);
  } else {
    Restart();
    Mount("b", true);
  }
  const uint32_t seg = Mount("a", true);
  std::vector<ErrorCode> codes;
  if (c.tier != Tier::kSsd) {
    auto r = svc_->RegisterMemoryObjects("a", seg, dir, true);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    codes = r.value();
  } else {
    ASSERT_TRUE(svc_->RegisterMemoryObjects("a", seg, {}, true).ok());
  }
  if (c.tier != Tier::kDram) {
    auto d = svc_->RegisterDiskObjects("a", ssd);
    codes.insert(codes.end(), d.begin(), d.end());
  }
  for (size_t i = 0; i < codes.size(); ++i) {
    const bool is_stale =
        stale_record && i + 1 == codes.size() && c.tier != Tier::kDram;
    if (is_stale) {
      EXPECT_NE(codes[i], ErrorCode::OK) << "the replaced value came back";
    } else {
      EXPECT_EQ(codes[i], ErrorCode::OK) << "copy " << i << " refused";
    }
  }
  auto g = svc_->GetReplicaList("", "k");
  if (want_size == 0) {
    EXPECT_EQ(g.code(), ErrorCode::OBJECT_NOT_FOUND);
  } else {
    ASSERT_TRUE(g.ok()) << g.status().ToString();
    EXPECT_EQ(g->size, want_size);
  }
}

std::vector<VersionOrderCase> AllVersionOrderCases() {
  std::vector<VersionOrderCase> out;
  for (Op op : {Op::kPut, Op::kUpsert, Op::kRemove, Op::kReplace}) {
    for (Outage o : {Outage::kNodeDeclaredDead, Outage::kMasterRestarted}) {
      for (Tier t : {Tier::kDram, Tier::kSsd, Tier::kBoth}) {
        out.push_back({op, o, t});
      }
    }
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(AllChangesAndOutages, VersionOrderTest,
                         ::testing::ValuesIn(AllVersionOrderCases()), CaseName);

}  // namespace
}  // namespace kvpool
