#include "master/master_service.h"

#include <gtest/gtest.h>

#include <chrono>

namespace kvpool {
namespace {

class MasterServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    config_.default_kv_lease_ttl = 1000;
    Make();
  }
  void Make() { svc_ = std::make_unique<MasterService>(config_, &clock_); }
  uint32_t Mount(const std::string& node, uint64_t size) {
    SegmentInfo info;
    info.node_id = node;
    info.capacity = size;
    info.data_endpoint = node + ":1";
    auto r = svc_->MountSegment(info);
    EXPECT_TRUE(r.ok());
    return r.value();
  }
  Status Put(const std::string& key, uint64_t size, PutOptions opts = {}) {
    auto r = svc_->PutStart("", key, size, opts);
    if (!r.ok()) return r.status();
    return svc_->PutEnd("", key);
  }
  // The master running for `ms`: housekeeping every 100 ms, as the
  // background thread does (a single Advance is a pause instead).
  void Run(int64_t ms) {
    for (int64_t t = 0; t < ms; t += 100) {
      clock_.Advance(std::min<int64_t>(100, ms - t));
      svc_->Housekeep();
    }
  }

  MasterConfig config_;
  FakeClock clock_;
  std::unique_ptr<MasterService> svc_;
};

TEST_F(MasterServiceTest, PutRefusalsSayWhyWithTheirOwnCodes) {
  // Nothing mounted yet: no room anywhere, not a bad argument.
  auto none = svc_->PutStart("", "k", 1000, {});
  EXPECT_EQ(none.code(), ErrorCode::NO_AVAILABLE_HANDLE);
  EXPECT_NE(none.status().message().find("no DRAM segment is mounted"),
            std::string::npos);
  EXPECT_EQ(svc_->PutStart("", "", 1000, {}).code(), ErrorCode::INVALID_KEY);
  Mount("a", 1 << 20);
  auto big = svc_->PutStart("", "k", 2 << 20, {});
  EXPECT_EQ(big.code(), ErrorCode::INVALID_PARAMS);
  EXPECT_NE(big.status().message().find("exceeds the largest segment"),
            std::string::npos);
  EXPECT_EQ(svc_->PutStart("", "k", 0, {}).code(), ErrorCode::INVALID_PARAMS);
  EXPECT_TRUE(svc_->PutStart("", "k", 1000, {}).ok());
}

// Every write grant carries a write generation greater than that of every
// earlier one, also when it takes the range of a removed value (the node
// refuses the older value's WRITE token by it); descriptions for readers
// carry none.
TEST_F(MasterServiceTest, WriteGrantsCarryIncreasingGenerations) {
  Mount("a", 1 << 20);
  auto first = svc_->PutStart("", "first", 1000, {});
  ASSERT_TRUE(first.ok());
  const ReplicaDesc a = (*first)[0];
  EXPECT_GT(a.write_generation, 0u);
  ASSERT_TRUE(svc_->PutEnd("", "first").ok());
  ASSERT_TRUE(svc_->Remove("", "first", false).ok());
  auto second = svc_->PutStart("", "second", 1000, {});
  ASSERT_TRUE(second.ok());
  const ReplicaDesc b = (*second)[0];
  EXPECT_EQ(b.offset, a.offset);  // the removed value's range
  EXPECT_GT(b.write_generation, a.write_generation);
  ASSERT_TRUE(svc_->PutEnd("", "second").ok());
  auto got = svc_->GetReplicaList("", "second");
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->replicas[0].write_generation, 0u);
  PutOptions upsert;
  upsert.upsert = true;
  auto third = svc_->PutStart("", "second", 1000, upsert);
  ASSERT_TRUE(third.ok());
  EXPECT_GT((*third)[0].write_generation, b.write_generation);
}

TEST_F(MasterServiceTest, PutGetLifecycle) {
  Mount("a", 1 << 20);
  auto r = svc_->PutStart("", "k", 1000, {});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->size(), 1u);
  EXPECT_EQ((*r)[0].status, ReplicaStatus::kProcessing);
  // Readers never see a PROCESSING replica.
  EXPECT_EQ(svc_->GetReplicaList("", "k").code(),
            ErrorCode::REPLICA_IS_NOT_READY);
  EXPECT_EQ(svc_->ExistKey("", "k", true), ErrorCode::OBJECT_NOT_FOUND);
  ASSERT_TRUE(svc_->PutEnd("", "k").ok());
  auto g = svc_->GetReplicaList("", "k");
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(g->size, 1000u);
  ASSERT_EQ(g->replicas.size(), 1u);
  EXPECT_EQ(g->replicas[0].segment->node_id, "a");
  EXPECT_EQ(svc_->ExistKey("", "k", true), ErrorCode::OK);
}

TEST_F(MasterServiceTest, PutOfExistingKeyDoesNotOverwrite) {
  Mount("a", 1 << 20);
  ASSERT_TRUE(Put("k", 100).ok());
  auto before = svc_->GetReplicaList("", "k");
  EXPECT_EQ(svc_->PutStart("", "k", 200, {}).code(),
            ErrorCode::OBJECT_ALREADY_EXISTS);
  EXPECT_EQ(svc_->GetReplicaList("", "k")->size, 100u);
  EXPECT_EQ(before->replicas[0].offset,
            svc_->GetReplicaList("", "k")->replicas[0].offset);
}

TEST_F(MasterServiceTest, UpsertReplacesOnlyWhenComplete) {
  Mount("a", 1 << 20);
  ASSERT_TRUE(Put("k", 100).ok());
  PutOptions up;
  up.upsert = true;
  auto r = svc_->PutStart("", "k", 300, up);
  ASSERT_TRUE(r.ok());
  // The old value stays readable until the upsert completes.
  EXPECT_EQ(svc_->GetReplicaList("", "k")->size, 100u);
  ASSERT_TRUE(svc_->PutEnd("", "k").ok());
  EXPECT_EQ(svc_->GetReplicaList("", "k")->size, 300u);
}

TEST_F(MasterServiceTest, TenantsAreIsolated) {
  Mount("a", 1 << 20);
  ASSERT_TRUE(svc_->PutStart("t1", "k", 10, {}).ok());
  ASSERT_TRUE(svc_->PutEnd("t1", "k").ok());
  EXPECT_EQ(svc_->ExistKey("t2", "k", false), ErrorCode::OBJECT_NOT_FOUND);
  EXPECT_EQ(svc_->ExistKey("", "k", false), ErrorCode::OBJECT_NOT_FOUND);
  EXPECT_EQ(svc_->ExistKey("t1", "k", false), ErrorCode::OK);
}

TEST_F(MasterServiceTest, BadInputIsAClearError) {
  Mount("a", 1 << 20);
  EXPECT_EQ(svc_->PutStart("", "", 10, {}).code(), ErrorCode::INVALID_KEY);
  EXPECT_EQ(
      svc_->PutStart("", std::string(kMaxKeyLength + 1, 'x'), 10, {}).code(),
      ErrorCode::INVALID_KEY);
  EXPECT_EQ(svc_->PutStart("", "k", 0, {}).code(), ErrorCode::INVALID_PARAMS);
  EXPECT_EQ(svc_->PutStart("", "k", (1 << 20) + 1, {}).code(),
            ErrorCode::INVALID_PARAMS);
  EXPECT_EQ(svc_->GetReplicaList("", "nope").code(),
            ErrorCode::OBJECT_NOT_FOUND);
  EXPECT_EQ(svc_->Remove("", "nope", false).code(),
            ErrorCode::OBJECT_NOT_FOUND);
  EXPECT_EQ(svc_->PutEnd("", "nope").code(), ErrorCode::OBJECT_NOT_FOUND);
  // Nothing above left state behind.
  EXPECT_EQ(svc_->Stats().objects, 0u);
  EXPECT_EQ(svc_->segments().Usage(SegmentKind::kMain).used, 0u);
}

TEST_F(MasterServiceTest, ReplicasLandOnDistinctSegments) {
  Mount("a", 1 << 20);
  Mount("b", 1 << 20);
  Mount("c", 1 << 20);
  PutOptions opts;
  opts.replica_num = 2;
  auto r = svc_->PutStart("", "k", 100, opts);
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->size(), 2u);
  EXPECT_NE((*r)[0].segment->id, (*r)[1].segment->id);
  // More replicas than segments: as many as possible.
  opts.replica_num = 5;
  auto r2 = svc_->PutStart("", "k2", 100, opts);
  ASSERT_TRUE(r2.ok());
  EXPECT_EQ(r2->size(), 3u);
}

TEST_F(MasterServiceTest, PreferredSegmentIsUsed) {
  Mount("a", 1 << 20);
  Mount("b", 1 << 20);
  for (int i = 0; i < 10; ++i) {
    PutOptions opts;
    opts.preferred_node = "b";
    auto r = svc_->PutStart("", "k" + std::to_string(i), 100, opts);
    ASSERT_TRUE(r.ok());
    EXPECT_EQ((*r)[0].segment->node_id, "b");
  }
}

TEST_F(MasterServiceTest, LeaseBlocksRemoveUntilItExpires) {
  Mount("a", 1 << 20);
  ASSERT_TRUE(Put("k", 100).ok());
  ASSERT_TRUE(svc_->GetReplicaList("", "k").ok());
  EXPECT_EQ(svc_->Remove("", "k", false).code(), ErrorCode::OBJECT_HAS_LEASE);
  clock_.Advance(config_.default_kv_lease_ttl + 1);
  EXPECT_TRUE(svc_->Remove("", "k", false).ok());
  EXPECT_EQ(svc_->GetReplicaList("", "k").code(), ErrorCode::OBJECT_NOT_FOUND);
}

TEST_F(MasterServiceTest, ForcedRemoveKeepsBytesUntilLeaseEnds) {
  Mount("a", 1 << 20);
  ASSERT_TRUE(Put("k", 4096).ok());
  ASSERT_TRUE(svc_->GetReplicaList("", "k").ok());
  ASSERT_TRUE(svc_->Remove("", "k", true).ok());
  // The reader that holds the lease may still be copying: range not reused.
  EXPECT_EQ(svc_->segments().Usage(SegmentKind::kMain).used, 4096u);
  clock_.Advance(config_.default_kv_lease_ttl + 1);
  svc_->Housekeep();
  EXPECT_EQ(svc_->segments().Usage(SegmentKind::kMain).used, 0u);
}

TEST_F(MasterServiceTest, ExistWithoutLeaseLeavesKeyEvictable) {
  Mount("a", 1 << 20);
  ASSERT_TRUE(Put("k", 100).ok());
  EXPECT_EQ(svc_->ExistKey("", "k", /*grant_lease=*/false), ErrorCode::OK);
  EXPECT_LE(svc_->QueryReadOnly("", "k").lease_remaining_ms, 0);
  EXPECT_TRUE(svc_->Remove("", "k", false).ok());
  ASSERT_TRUE(Put("k2", 100).ok());
  EXPECT_EQ(svc_->ExistKey("", "k2", /*grant_lease=*/true), ErrorCode::OK);
  EXPECT_GT(svc_->QueryReadOnly("", "k2").lease_remaining_ms, 0);
}

TEST_F(MasterServiceTest, QueryReadOnlyHasNoSideEffects) {
  Mount("a", 1 << 20);
  ASSERT_TRUE(Put("k", 100).ok());
  uint64_t gets =
      svc_->metrics().CounterValue("kvpool_master_gets_total", "result=\"OK\"");
  QueryResult q = svc_->QueryReadOnly("", "k");
  EXPECT_EQ(q.code, ErrorCode::OK);
  EXPECT_EQ(q.size, 100u);
  EXPECT_EQ(q.replicas.size(), 1u);
  EXPECT_LE(q.lease_remaining_ms, 0);
  EXPECT_EQ(
      svc_->metrics().CounterValue("kvpool_master_gets_total", "result=\"OK\""),
      gets);
  EXPECT_TRUE(svc_->Remove("", "k", false).ok());  // no lease was granted
  EXPECT_EQ(svc_->QueryReadOnly("", "k").code, ErrorCode::OBJECT_NOT_FOUND);
}

// A batch is looked up with stages running a few keys ahead (prefetching);
// every item must still be exactly what a lone lookup of its key returns,
// for present, absent, invalid and repeated keys, at any batch length.
TEST_F(MasterServiceTest, BatchLookupMatchesLoneLookups) {
  Mount("a", 64 << 20);
  Mount("b", 64 << 20);
  for (int i = 0; i < 200; ++i) {
    if (i % 3 == 0) continue;  // absent
    ASSERT_TRUE(Put("k" + std::to_string(i), 100 + i,
                    [&] {
                      PutOptions o;
                      o.replica_num = 1 + i % 2;
                      return o;
                    }())
                    .ok());
  }
  ASSERT_EQ(svc_->GetReplicaList("", "k4").status().code(), ErrorCode::OK);
  std::vector<std::string> keys;
  for (int i = 0; i < 200; ++i) keys.push_back("k" + std::to_string(i));
  keys.push_back("");                                   // invalid
  keys.push_back(std::string(kMaxKeyLength + 1, 'x'));  // invalid
  keys.push_back("k4");                                 // repeated
  for (size_t len : {size_t{1}, size_t{2}, size_t{5}, size_t{9}, keys.size()}) {
    std::vector<std::string_view> batch(keys.begin(), keys.begin() + len);
    BatchQueryResult out;
    svc_->QueryReadOnlyBatch("", batch, &out);
    ASSERT_EQ(out.items.size(), len);
    for (size_t i = 0; i < len; ++i) {
      const QueryResult lone = svc_->QueryReadOnly("", keys[i]);
      const QueryItem& item = out.items[i];
      EXPECT_EQ(item.code, lone.code) << keys[i];
      EXPECT_EQ(item.size, lone.size) << keys[i];
      EXPECT_EQ(item.lease_remaining_ms, lone.lease_remaining_ms) << keys[i];
      ASSERT_EQ(item.num_replicas, lone.replicas.size()) << keys[i];
    }
  }
  EXPECT_EQ(svc_->QueryReadOnly("", "").code, ErrorCode::INVALID_KEY);
  EXPECT_EQ(svc_->QueryReadOnly("", "k3").code, ErrorCode::OBJECT_NOT_FOUND);
  EXPECT_EQ(svc_->QueryReadOnly("", "k5").replicas.size(), 2u);
  EXPECT_GT(svc_->QueryReadOnly("", "k4").lease_remaining_ms, 0);
}

TEST_F(MasterServiceTest, EvictionIsLruAndSkipsLeasedAndPinned) {
  Mount("a", 100 * 1024);
  // 10 objects of 9 KiB = 90 KiB: at the watermark.
  for (int i = 0; i < 10; ++i) {
    PutOptions opts;
    opts.hard_pin = (i == 1);
    ASSERT_TRUE(Put("k" + std::to_string(i), 9 * 1024, opts).ok());
    clock_.Advance(10);
  }
  clock_.Advance(config_.default_kv_lease_ttl + 1);
  // k2 is leased now; k0 is the least recently used unpinned, unleased key.
  ASSERT_TRUE(svc_->GetReplicaList("", "k2").ok());
  uint64_t freed = svc_->EvictIfNeeded();
  EXPECT_GT(freed, 0u);
  EXPECT_EQ(svc_->ExistKey("", "k0", false), ErrorCode::OBJECT_NOT_FOUND);
  EXPECT_EQ(svc_->ExistKey("", "k1", false), ErrorCode::OK);  // hard pinned
  EXPECT_EQ(svc_->ExistKey("", "k2", false), ErrorCode::OK);  // leased
  EXPECT_EQ(svc_->ExistKey("", "k9", false), ErrorCode::OK);  // most recent
  auto u = svc_->segments().Usage(SegmentKind::kMain);
  EXPECT_LT(u.ratio(), config_.eviction_high_watermark_ratio);
}

TEST_F(MasterServiceTest, SoftPinnedEvictedOnlyAfterOthers) {
  Mount("a", 100 * 1024);
  PutOptions soft;
  soft.soft_pin = true;
  ASSERT_TRUE(Put("soft", 10 * 1024, soft).ok());
  clock_.Advance(10);
  ASSERT_TRUE(Put("plain", 10 * 1024).ok());
  clock_.Advance(config_.default_kv_lease_ttl + 1);
  EXPECT_GE(svc_->EvictBytes(10 * 1024), 10u * 1024);
  EXPECT_EQ(svc_->ExistKey("", "plain", false), ErrorCode::OBJECT_NOT_FOUND);
  EXPECT_EQ(svc_->ExistKey("", "soft", false), ErrorCode::OK);
}

TEST_F(MasterServiceTest, SoftPinEndsAfterItsTtlUnlessRenewedByGets) {
  config_.default_kv_soft_pin_ttl = 5000;
  Make();
  Mount("a", 100 * 1024);
  PutOptions soft;
  soft.soft_pin = true;
  ASSERT_TRUE(Put("renewed", 10 * 1024, soft).ok());
  soft.soft_pin_ttl_ms = 2000;  // per put, overrides the default
  ASSERT_TRUE(Put("short", 10 * 1024, soft).ok());
  clock_.Advance(3000);  // "short" is no longer pinned
  ASSERT_TRUE(svc_->GetReplicaList("", "renewed").ok());  // renews to +5 s
  ASSERT_TRUE(Put("plain", 10 * 1024).ok());
  clock_.Advance(4000);  // "renewed" still pinned; all leases over
  EXPECT_GE(svc_->EvictBytes(10 * 1024), 10u * 1024);
  // LRU among unpinned: "short" (older than "plain") goes first.
  EXPECT_EQ(svc_->ExistKey("", "short", false), ErrorCode::OBJECT_NOT_FOUND);
  EXPECT_EQ(svc_->ExistKey("", "renewed", false), ErrorCode::OK);
  EXPECT_EQ(svc_->ExistKey("", "plain", false), ErrorCode::OK);
}

TEST_F(MasterServiceTest, SoftPinnedNeverEvictedWhenNotAllowed) {
  config_.allow_evict_soft_pinned_objects = false;
  Make();
  Mount("a", 100 * 1024);
  PutOptions soft;
  soft.soft_pin = true;
  ASSERT_TRUE(Put("soft", 10 * 1024, soft).ok());
  ASSERT_TRUE(Put("hard", 10 * 1024, PutOptions{.hard_pin = true}).ok());
  clock_.Advance(config_.default_kv_lease_ttl + 1);
  EXPECT_EQ(svc_->EvictBytes(20 * 1024), 0u);
  EXPECT_EQ(svc_->ExistKey("", "soft", false), ErrorCode::OK);
  config_.allow_evict_soft_pinned_objects = true;
  Make();
  Mount("a", 100 * 1024);
  ASSERT_TRUE(Put("soft", 10 * 1024, soft).ok());
  ASSERT_TRUE(Put("hard", 10 * 1024, PutOptions{.hard_pin = true}).ok());
  clock_.Advance(config_.default_kv_lease_ttl + 1);
  EXPECT_EQ(svc_->EvictBytes(20 * 1024), 10u * 1024);  // never the hard one
  EXPECT_EQ(svc_->ExistKey("", "soft", false), ErrorCode::OBJECT_NOT_FOUND);
  EXPECT_EQ(svc_->ExistKey("", "hard", false), ErrorCode::OK);
}

TEST_F(MasterServiceTest, PreferredSegmentsAreTriedInOrder) {
  Mount("a", 64 * 1024);
  Mount("b", 64 * 1024);
  Mount("c", 64 * 1024);
  PutOptions opts;
  opts.preferred_nodes = {"c", "b"};
  ASSERT_TRUE(Put("k1", 40 * 1024, opts).ok());
  EXPECT_EQ(svc_->GetReplicaList("", "k1")->replicas[0].segment->node_id, "c");
  // "c" has no room for a second one: the next preference, not "a".
  ASSERT_TRUE(Put("k2", 40 * 1024, opts).ok());
  EXPECT_EQ(svc_->GetReplicaList("", "k2")->replicas[0].segment->node_id, "b");
}

TEST_F(MasterServiceTest, RemoveByRegexIsLinearAndRefusesWhatItCannotBound) {
  // (a|a)*b against 26 a's: a backtracking engine took 5-7 s of master CPU
  // under a shard lock (doubling per character); RE2 is linear.
  Mount("a", 1 << 20);
  ASSERT_TRUE(Put(std::string(26, 'a'), 100).ok());
  ASSERT_TRUE(Put("ab", 100).ok());
  const auto t0 = std::chrono::steady_clock::now();
  auto r = svc_->RemoveByRegex("", "(a|a)*b", false);
  const double sec =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
          .count();
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r.value(), 1u);  // "ab" only
  EXPECT_LT(sec, 1.0);       // a bound on a DoS, not a speed target
  // Backreferences cannot be matched in linear time: a clear refusal.
  EXPECT_EQ(svc_->RemoveByRegex("", "(a)\\1", false).code(),
            ErrorCode::INVALID_PARAMS);
  EXPECT_EQ(svc_->RemoveByRegex("", std::string(5000, 'a'), false).code(),
            ErrorCode::INVALID_PARAMS);
}

TEST_F(MasterServiceTest, RemoveByRegexRemovesOnlyMatches) {
  Mount("a", 1 << 20);
  for (const char* k : {"req1/blk0", "req1/blk1", "req2/blk0", "other"})
    ASSERT_TRUE(Put(k, 100).ok());
  clock_.Advance(config_.default_kv_lease_ttl + 1);
  auto r = svc_->RemoveByRegex("", "req1/.*", false);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r.value(), 2u);
  EXPECT_EQ(svc_->ExistKey("", "req1/blk0", false),
            ErrorCode::OBJECT_NOT_FOUND);
  EXPECT_EQ(svc_->ExistKey("", "req2/blk0", false), ErrorCode::OK);
  // A partial match is not a match: the whole key must match.
  EXPECT_EQ(svc_->RemoveByRegex("", "blk0", false).value(), 0u);
  EXPECT_EQ(svc_->RemoveByRegex("", "([unclosed", false).code(),
            ErrorCode::INVALID_PARAMS);
  EXPECT_EQ(svc_->ExistKey("", "other", false), ErrorCode::OK);
}

TEST_F(MasterServiceTest, FullPoolPutEvictsThenSucceeds) {
  Mount("a", 64 * 1024);
  for (int i = 0; i < 8; ++i)
    ASSERT_TRUE(Put("k" + std::to_string(i), 8 * 1024).ok());
  clock_.Advance(config_.default_kv_lease_ttl + 1);
  EXPECT_TRUE(Put("new", 8 * 1024).ok());
  EXPECT_EQ(svc_->ExistKey("", "new", false), ErrorCode::OK);
}

TEST_F(MasterServiceTest, FullPoolOfLeasedKeysFailsWithNoHandle) {
  Mount("a", 64 * 1024);
  for (int i = 0; i < 8; ++i) {
    ASSERT_TRUE(Put("k" + std::to_string(i), 8 * 1024).ok());
    ASSERT_TRUE(svc_->GetReplicaList("", "k" + std::to_string(i)).ok());
  }
  EXPECT_EQ(svc_->PutStart("", "new", 8 * 1024, {}).code(),
            ErrorCode::NO_AVAILABLE_HANDLE);
  EXPECT_EQ(svc_->Stats().objects, 8u);
}

TEST_F(MasterServiceTest, AbandonedPutIsDiscardedThenReleased) {
  Mount("a", 1 << 20);
  ASSERT_TRUE(svc_->PutStart("", "k", 4096, {}).ok());
  EXPECT_EQ(svc_->PutStart("", "k", 4096, {}).code(),
            ErrorCode::OBJECT_ALREADY_EXISTS);
  clock_.Advance(config_.put_start_discard_timeout_sec * 1000 + 1);
  // After the discard timeout a new put of the key may proceed ...
  ASSERT_TRUE(svc_->PutStart("", "k", 4096, {}).ok());
  // ... but the old range is still reserved: its writer may be writing.
  EXPECT_EQ(svc_->segments().Usage(SegmentKind::kMain).used, 8192u);
  clock_.Advance(config_.put_start_release_timeout_sec * 1000);
  ASSERT_TRUE(svc_->Heartbeat("a").ok());  // the node itself stays alive
  svc_->Housekeep();
  EXPECT_EQ(svc_->segments().segment_count(), 1u);
  // Both the discarded range and the second (also abandoned) put are gone.
  EXPECT_EQ(svc_->segments().Usage(SegmentKind::kMain).used, 0u);
  EXPECT_EQ(svc_->Stats().objects, 0u);
}

// The reclaim pass visits only keys that got a PROCESSING replica; an
// abandoned upsert is released while the value it would have replaced stays,
// and finished puts are left alone.
TEST_F(MasterServiceTest, AbandonedUpsertIsReleasedOldValueStays) {
  Mount("a", 1 << 20);
  ASSERT_TRUE(Put("done", 4096).ok());
  ASSERT_TRUE(Put("old", 4096).ok());
  PutOptions up;
  up.upsert = true;
  ASSERT_TRUE(svc_->PutStart("", "old", 8192, up).ok());
  EXPECT_EQ(svc_->segments().Usage(SegmentKind::kMain).used, 16384u);
  clock_.Advance(config_.put_start_release_timeout_sec * 1000 + 1);
  ASSERT_TRUE(svc_->Heartbeat("a").ok());
  svc_->Housekeep();
  EXPECT_EQ(svc_->segments().Usage(SegmentKind::kMain).used, 8192u);
  EXPECT_EQ(svc_->Stats().objects, 2u);
  auto old = svc_->GetReplicaList("", "old");
  ASSERT_TRUE(old.ok());
  EXPECT_EQ(old->size, 4096u);
  // A later pass finds nothing left to reclaim.
  clock_.Advance(2000);
  ASSERT_TRUE(svc_->Heartbeat("a").ok());
  svc_->Housekeep();
  EXPECT_EQ(svc_->segments().Usage(SegmentKind::kMain).used, 8192u);
  EXPECT_TRUE(svc_->GetReplicaList("", "done").ok());
}

TEST_F(MasterServiceTest, PutRevokeLeavesNothingAfterTheWriteGrace) {
  Mount("a", 1 << 20);
  ASSERT_TRUE(svc_->PutStart("", "k", 4096, {}).ok());
  ASSERT_TRUE(svc_->PutRevoke("", "k").ok());
  EXPECT_EQ(svc_->Stats().objects, 0u);
  // A write the client gave up on may still land over TCP: the range is
  // not reused before the grace.
  EXPECT_EQ(svc_->segments().Usage(SegmentKind::kMain).used, 4096u);
  Run(kTaskGraceMs + 200);
  EXPECT_EQ(svc_->segments().Usage(SegmentKind::kMain).used, 0u);
}

TEST_F(MasterServiceTest, SilentNodeIsDroppedAndItsKeysBecomeMisses) {
  Mount("a", 1 << 20);
  Mount("b", 1 << 20);
  PutOptions on_a, on_b;
  on_a.preferred_node = "a";
  on_b.preferred_node = "b";
  ASSERT_TRUE(Put("ka", 100, on_a).ok());
  ASSERT_TRUE(Put("kb", 100, on_b).ok());
  Run(config_.client_ttl * 1000 / 2);
  ASSERT_TRUE(svc_->Heartbeat("b").ok());
  Run(config_.client_ttl * 1000 / 2 + 100);
  EXPECT_EQ(svc_->GetReplicaList("", "ka").code(), ErrorCode::OBJECT_NOT_FOUND);
  EXPECT_TRUE(svc_->GetReplicaList("", "kb").ok());
  EXPECT_EQ(svc_->Heartbeat("a").code(), ErrorCode::CLIENT_NOT_FOUND);
  EXPECT_EQ(svc_->segments().segment_count(), 1u);
}

TEST_F(MasterServiceTest, PausedMasterGivesNodesAFreshGracePeriod) {
  // SIGSTOP of the master for longer than client_ttl: on resuming, the
  // silence it slept through must not count against the nodes.
  Mount("a", 1 << 20);
  ASSERT_TRUE(Put("ka", 100).ok());
  Run(1000);
  ASSERT_TRUE(svc_->Heartbeat("a").ok());
  clock_.Advance(config_.client_ttl * 1000 + 5000);  // the pause
  svc_->Housekeep();                                 // first tick after it
  EXPECT_TRUE(svc_->GetReplicaList("", "ka").ok());
  EXPECT_TRUE(svc_->Heartbeat("a").ok());
  EXPECT_EQ(svc_->Stats().pauses_survived, 1u);
  // Liveness itself still works: a node that stays silent while the master
  // runs is dropped after client_ttl.
  Run(config_.client_ttl * 1000 + 1100);
  EXPECT_EQ(svc_->Heartbeat("a").code(), ErrorCode::CLIENT_NOT_FOUND);
  EXPECT_EQ(svc_->GetReplicaList("", "ka").code(), ErrorCode::OBJECT_NOT_FOUND);
}

TEST_F(MasterServiceTest, UnreachableNodeIsAvoidedUntilItHeartbeats) {
  Mount("a", 1 << 20);
  Mount("b", 1 << 20);
  PutOptions opts;
  opts.excluded_nodes = {"b"};  // a client's write to b just failed
  for (int i = 0; i < 4; ++i) {
    auto r = svc_->PutStart("", "x" + std::to_string(i), 4096, opts);
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r.value()[0].segment->node_id, "a");
  }
  // Every other put avoids b too, until b shows it is alive.
  for (int i = 0; i < 4; ++i) {
    auto r = svc_->PutStart("", "y" + std::to_string(i), 4096, {});
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r.value()[0].segment->node_id, "a");
  }
  ASSERT_TRUE(svc_->Heartbeat("b").ok());
  auto r = svc_->PutStart("", "z", 4096, {});  // b is the emptiest again
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r.value()[0].segment->node_id, "b");
  // Excluding every node leaves no room: a clean refusal.
  opts.excluded_nodes = {"a", "b"};
  EXPECT_EQ(svc_->PutStart("", "none", 4096, opts).code(),
            ErrorCode::NO_AVAILABLE_HANDLE);
}

TEST_F(MasterServiceTest, RemoveAllRespectsLeasesUnlessForced) {
  Mount("a", 1 << 20);
  for (int i = 0; i < 5; ++i)
    ASSERT_TRUE(Put("k" + std::to_string(i), 100).ok());
  ASSERT_TRUE(svc_->GetReplicaList("", "k0").ok());
  EXPECT_EQ(svc_->RemoveAll("", false).value(), 4u);
  EXPECT_EQ(svc_->RemoveAll("", true).value(), 1u);
  EXPECT_EQ(svc_->Stats().objects, 0u);
}

// A node that opens its segment itself (opens_when_served): nothing is
// placed in it between the mount and the node's word that it serves it,
// since the key and the segment id reach the node only with the mount's
// reply. (Before, a put in that window was granted a range the node could
// not serve yet: its write failed and the client marked the node
// unreachable.) An older node's segment takes puts at once, as before.
TEST_F(MasterServiceTest, ASegmentItsNodeOpensTakesNoPutUntilOpened) {
  SegmentInfo info;
  info.node_id = "a";
  info.capacity = 1 << 20;
  info.data_endpoint = "a:1";
  auto id = svc_->MountSegment(info, false, false, /*remount=*/false,
                               /*keeps_dram_directory=*/false,
                               /*opens_when_served=*/true);
  ASSERT_TRUE(id.ok());
  EXPECT_EQ(Put("early", 4096).code(), ErrorCode::NO_AVAILABLE_HANDLE);
  // Not listed before it is served, so a client that waits to see it can
  // put into it at once.
  EXPECT_TRUE(svc_->Stats().segments.empty());
  EXPECT_EQ(svc_->OpenExtraSegment("b", id.value()).code(),
            ErrorCode::SEGMENT_NOT_FOUND);  // not b's
  ASSERT_TRUE(svc_->OpenExtraSegment("a", id.value()).ok());
  EXPECT_TRUE(svc_->OpenExtraSegment("a", id.value()).ok());  // idempotent
  EXPECT_EQ(svc_->Stats().segments.size(), 1u);
  EXPECT_TRUE(Put("served", 4096).ok());
  // An older node (no flag): open at once, and not a segment it opens.
  const uint32_t old_id = Mount("b", 1 << 20);
  EXPECT_EQ(svc_->OpenExtraSegment("b", old_id).code(),
            ErrorCode::SEGMENT_NOT_FOUND);
  PutOptions on_b;
  on_b.preferred_node = "b";
  auto r = svc_->PutStart("", "old-node", 4096, on_b);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ((*r)[0].segment->id, old_id);
  // Mounted again (a master that forgot it): closed for the lease period
  // even once the node serves it.
  auto again = svc_->MountSegment(info, false, false, /*remount=*/true, false,
                                  /*opens_when_served=*/true);
  ASSERT_TRUE(again.ok());
  ASSERT_TRUE(svc_->OpenExtraSegment("a", again.value()).ok());
  EXPECT_TRUE(svc_->segments().IsClosed(again.value()));
}

// Mooncake's mount_segment: a further segment of a running node. It joins
// the node (its key, endpoint and host; the node stays registered as it
// is), and takes nothing until the node says it serves it.
TEST_F(MasterServiceTest, AnExtraSegmentJoinsItsNodeAndOpensWhenServed) {
  const uint32_t main_id = Mount("a", 1 << 20);
  auto main_info = svc_->segments().Info(main_id);
  EXPECT_EQ(svc_->MountExtraSegment("nobody", 1 << 20, "", false).code(),
            ErrorCode::CLIENT_NOT_FOUND);
  EXPECT_EQ(svc_->MountExtraSegment("a", 0, "", false).code(),
            ErrorCode::INVALID_PARAMS);
  auto extra = svc_->MountExtraSegment("a", 4 << 20, "", false);
  ASSERT_TRUE(extra.ok());
  auto info = svc_->segments().Info(extra.value());
  ASSERT_NE(info, nullptr);
  EXPECT_TRUE(info->extra);
  EXPECT_FALSE(main_info->extra);
  EXPECT_EQ(info->kind, SegmentKind::kMain);
  EXPECT_EQ(info->cap_key, main_info->cap_key);  // the node's key, unchanged
  EXPECT_EQ(info->data_endpoint, main_info->data_endpoint);
  EXPECT_TRUE(info->shm_path.empty());               // TCP only
  EXPECT_TRUE(svc_->segments().IsMounted(main_id));  // the node was not reset
  // Closed: a value too big for the main segment finds no room yet.
  EXPECT_FALSE(svc_->PutStart("", "big", 2 << 20, {}).ok());
  EXPECT_EQ(svc_->OpenExtraSegment("a", main_id).code(),
            ErrorCode::SEGMENT_NOT_FOUND);
  EXPECT_EQ(svc_->OpenExtraSegment("b", extra.value()).code(),
            ErrorCode::SEGMENT_NOT_FOUND);
  ASSERT_TRUE(svc_->OpenExtraSegment("a", extra.value()).ok());
  EXPECT_TRUE(svc_->OpenExtraSegment("a", extra.value()).ok());  // idempotent
  auto big = svc_->PutStart("", "big", 2 << 20, {});
  ASSERT_TRUE(big.ok()) << big.status().ToString();
  EXPECT_EQ((*big)[0].segment->id, extra.value());
  ASSERT_TRUE(svc_->PutEnd("", "big").ok());
  EXPECT_EQ(svc_->Stats().segments.size(), 2u);
}

// Unmounting an extra segment (the caller takes its memory back): its
// values are clean misses at once, values elsewhere stay, and nothing is
// ever placed in it again.
TEST_F(MasterServiceTest, UnmountedExtraSegmentTakesItsValuesAndNothingMore) {
  Mount("a", 1 << 20);
  const uint32_t extra =
      svc_->MountExtraSegment("a", 1 << 20, "/dev/shm/x", false).value();
  ASSERT_TRUE(svc_->OpenExtraSegment("a", extra).ok());
  PutOptions opts;
  for (int i = 0; i < 8; ++i) {
    ASSERT_TRUE(Put("k" + std::to_string(i), 100 * 1024, opts).ok());
  }
  int in_extra = 0;
  for (int i = 0; i < 8; ++i) {
    auto q = svc_->QueryReadOnly("", "k" + std::to_string(i));
    in_extra += q.replicas[0].segment->id == extra;
  }
  ASSERT_GT(in_extra, 0);
  ASSERT_LT(in_extra, 8);
  EXPECT_EQ(svc_->UnmountSegment("b", extra).code(),
            ErrorCode::SEGMENT_NOT_FOUND);
  ASSERT_TRUE(svc_->UnmountSegment("a", extra).ok());
  int left = 0;
  for (int i = 0; i < 8; ++i) {
    auto got = svc_->GetReplicaList("", "k" + std::to_string(i));
    if (got.ok()) {
      ++left;
      for (const auto& r : got->replicas) EXPECT_NE(r.segment->id, extra);
    } else {
      EXPECT_EQ(got.code(), ErrorCode::OBJECT_NOT_FOUND);
    }
  }
  EXPECT_EQ(left, 8 - in_extra);
  for (int i = 0; i < 20; ++i) {
    auto r = svc_->PutStart("", "after" + std::to_string(i), 4096, {});
    ASSERT_TRUE(r.ok());
    EXPECT_NE((*r)[0].segment->id, extra);
  }
  EXPECT_EQ(svc_->UnmountSegment("a", extra).code(),
            ErrorCode::SEGMENT_NOT_FOUND);
  EXPECT_EQ(svc_->OpenExtraSegment("a", extra).code(),
            ErrorCode::SEGMENT_NOT_FOUND);
}

// Mounted again after the master forgot the node: held closed for a lease
// period even once the node serves it, as a remounted main segment.
TEST_F(MasterServiceTest, RemountedExtraSegmentWaitsOutOldLeases) {
  Mount("a", 64 * 1024);
  const uint32_t extra =
      svc_->MountExtraSegment("a", 1 << 20, "", /*remount=*/true).value();
  ASSERT_TRUE(svc_->OpenExtraSegment("a", extra).ok());
  EXPECT_TRUE(svc_->segments().IsClosed(extra));
  EXPECT_FALSE(svc_->PutStart("", "k", 512 * 1024, {}).ok());
  Run(config_.default_kv_lease_ttl + 100);
  EXPECT_FALSE(svc_->segments().IsClosed(extra));
  EXPECT_TRUE(svc_->PutStart("", "k", 512 * 1024, {}).ok());
}

// One the node never opens stays closed: memory it stopped serving is
// never handed out.
TEST_F(MasterServiceTest, UnopenedExtraSegmentStaysClosed) {
  Mount("a", 64 * 1024);
  const uint32_t extra =
      svc_->MountExtraSegment("a", 1 << 20, "", false).value();
  Run(10 * config_.default_kv_lease_ttl);
  EXPECT_TRUE(svc_->segments().IsClosed(extra));
  EXPECT_FALSE(svc_->PutStart("", "k", 512 * 1024, {}).ok());
}

// An allocation that picked a segment before it was unmounted places
// nothing in it afterwards.
TEST(SegmentManagerTest, NothingIsAllocatedInAnUnmountedSegment) {
  SegmentManager m(SegmentManager::Strategy::kFreeRatioFirst);
  SegmentInfo info;
  info.node_id = "a";
  info.capacity = 1 << 20;
  const uint32_t id = m.Mount(info).value();
  auto at = m.AllocateAt(id, 0, 4096);
  ASSERT_TRUE(at.has_value());
  ASSERT_TRUE(m.Unmount(id).ok());
  EXPECT_TRUE(m.Allocate(4096, 1, SegmentKind::kMain, "").empty());
  EXPECT_FALSE(m.AllocateOn(4096, SegmentKind::kMain, "a").has_value());
  EXPECT_FALSE(m.AllocateAt(id, 8192, 4096).has_value());
  EXPECT_TRUE(m.AllocateAllOf(id).empty());
  m.Free(*at);  // ignored
  // Mounted closed: allocations skip it until it is opened.
  const uint32_t closed = m.Mount(info, /*closed=*/true).value();
  EXPECT_TRUE(m.IsClosed(closed));
  EXPECT_TRUE(m.Allocate(4096, 1, SegmentKind::kMain, "").empty());
  m.SetClosed(closed, false);
  EXPECT_EQ(m.Allocate(4096, 1, SegmentKind::kMain, "").size(), 1u);
}

}  // namespace
}  // namespace kvpool
