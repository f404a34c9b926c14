// LeasePolicy on its own: one ObjectMeta, an explicit `now`, real segments
// (a MAIN one and a prefetch buffer) and the master's metric series. The
// same rules seen through MasterService are in prefetch_buffer_test.cc
// (BufferRecycleTest) and master_tiering_test.cc.
#include "master/lease_policy.h"

#include <gtest/gtest.h>

#include "master/tiering_metrics.h"

namespace kvpool {
namespace {

constexpr int64_t kTtl = 1000;
constexpr int64_t kConsumed = 200;
constexpr int64_t kNow = 50000;
constexpr const char* kRecycled =
    "kvpool_master_prefetch_buffer_recycled_total";
constexpr const char* kFate = "kvpool_master_prefetch_fate_total";
constexpr const char* kWindow = "kvpool_master_prefetch_window_seconds";

class LeasePolicyTest : public ::testing::Test {
 protected:
  LeasePolicyTest() {
    SegmentInfo info;
    info.node_id = "n1";
    info.capacity = 1 << 20;
    main_ = segments_.Mount(info).value();
    info.kind = SegmentKind::kPrefetchBuffer;
    buffer_ = segments_.Mount(info).value();
    buffer2_ = segments_.Mount(info).value();
  }
  LeasePolicy Make(int64_t consumed_ms) {
    LeasePolicy::Options o;
    o.default_kv_lease_ttl = kTtl;
    o.prefetch_consumed_lease_ms = consumed_ms;
    return LeasePolicy(o, segments_,
                       LeasePolicy::Metrics{
                           .registry = &registry_,
                           .prefetch_window = tiering_.prefetch_window,
                           .prefetch_fate = &tiering_.prefetch_fate,
                       });
  }
  static Replica Memory(uint32_t segment,
                        ReplicaStatus st = ReplicaStatus::kComplete) {
    return Replica{0, segment, 0, ReplicaKind::kMemory, st};
  }
  static Replica Disk() {
    return Replica{0, 7, 0, ReplicaKind::kLocalDisk, ReplicaStatus::kComplete};
  }
  // An object in the buffer after a router trigger at `trigger_ms` whose
  // lease (the trigger's) runs until `lease_ms`.
  ObjectMeta Buffered(int pending, int64_t trigger_ms, int64_t lease_ms) {
    ObjectMeta m;
    m.replicas.push_back(Memory(buffer_));
    m.pending_prefetch_reads = static_cast<uint8_t>(pending);
    m.pending_trigger_ms32 = static_cast<uint32_t>(trigger_ms);
    m.set_lease_deadline_ms(lease_ms);
    return m;
  }
  uint64_t Recycled() const { return registry_.CounterValue(kRecycled); }

  MetricsRegistry registry_;
  TieringMetrics tiering_{&registry_};
  SegmentManager segments_{SegmentManager::Strategy::kFreeRatioFirst};
  uint32_t main_ = 0, buffer_ = 0, buffer2_ = 0;
};

TEST_F(LeasePolicyTest, DefaultGetExtendsBothLeasesToTheDefaultTtl) {
  const LeasePolicy p = Make(/*consumed_ms=*/0);
  ObjectMeta m;
  m.replicas.push_back(Memory(main_));
  m.set_lease_deadline_ms(kNow - 5);  // an old, ended lease
  EXPECT_EQ(p.GrantReadLease(m, kNow), kTtl);
  EXPECT_EQ(m.lease_deadline_ms(), kNow + kTtl);
  EXPECT_EQ(m.reader_lease_deadline_ms(), kNow + kTtl);
  // A later get moves both on.
  EXPECT_EQ(p.GrantReadLease(m, kNow + 300), kTtl);
  EXPECT_EQ(m.lease_deadline_ms(), kNow + 300 + kTtl);
  EXPECT_EQ(m.reader_lease_deadline_ms(), kNow + 300 + kTtl);
}

TEST_F(LeasePolicyTest, KnobOffGrantsTheDefaultTtlEvenInTheBuffer) {
  const LeasePolicy p = Make(/*consumed_ms=*/0);
  ObjectMeta m = Buffered(1, kNow - 10, kNow + 5000);
  EXPECT_EQ(p.GrantReadLease(m, kNow), kTtl);
  EXPECT_EQ(m.lease_deadline_ms(), kNow + 5000);  // the trigger's stays
  EXPECT_EQ(m.reader_lease_deadline_ms(), kNow + kTtl);
  EXPECT_EQ(m.pending_prefetch_reads, 0);
  EXPECT_EQ(Recycled(), 0u);
}

TEST_F(LeasePolicyTest, ALeaseIsNeverShortenedForAReader) {
  const LeasePolicy p = Make(kConsumed);
  // A main-cache object with a longer lease than a get grants.
  ObjectMeta m;
  m.replicas.push_back(Memory(main_));
  m.set_lease_deadline_ms(kNow + 9000);
  m.set_reader_lease_deadline_ms(kNow + 9000);
  EXPECT_EQ(p.GrantReadLease(m, kNow), kTtl);
  EXPECT_EQ(m.lease_deadline_ms(), kNow + 9000);
  EXPECT_EQ(m.reader_lease_deadline_ms(), kNow + 9000);

  // A buffered block an earlier reader (exist) holds until kNow + 900: the
  // consuming get drops the trigger's lease to that, not to its own 200.
  ObjectMeta b = Buffered(1, kNow - 10, kNow + 5000);
  b.set_reader_lease_deadline_ms(kNow + 900);
  EXPECT_EQ(p.GrantReadLease(b, kNow), kConsumed);
  EXPECT_EQ(b.reader_lease_deadline_ms(), kNow + 900);
  EXPECT_EQ(b.lease_deadline_ms(), kNow + 900);
  EXPECT_EQ(Recycled(), 1u);
}

TEST_F(LeasePolicyTest, RecycleOnlyForReplicasLivingOnlyInAPrefetchBuffer) {
  const LeasePolicy p = Make(kConsumed);
  ObjectMeta buffered;
  buffered.replicas.push_back(Memory(buffer_));
  buffered.replicas.push_back(Memory(buffer2_));
  buffered.replicas.push_back(Disk());  // an SSD copy does not count
  // A PROCESSING main replica (an upsert on its way) does not either.
  buffered.replicas.push_back(Memory(main_, ReplicaStatus::kProcessing));
  EXPECT_TRUE(p.OnlyInPrefetchBuffer(buffered));
  EXPECT_EQ(p.GrantReadLease(buffered, kNow), kConsumed);
  EXPECT_EQ(buffered.reader_lease_deadline_ms(), kNow + kConsumed);

  ObjectMeta both;
  both.replicas.push_back(Memory(buffer_));
  both.replicas.push_back(Memory(main_));
  EXPECT_FALSE(p.OnlyInPrefetchBuffer(both));
  EXPECT_EQ(p.GrantReadLease(both, kNow), kTtl);

  ObjectMeta ssd_only;
  ssd_only.replicas.push_back(Disk());
  EXPECT_FALSE(p.OnlyInPrefetchBuffer(ssd_only));  // no memory replica
  EXPECT_EQ(p.GrantReadLease(ssd_only, kNow), kTtl);

  // A replica of a segment that is gone is not in a buffer any more.
  ObjectMeta gone;
  gone.replicas.push_back(Memory(buffer2_));
  ASSERT_TRUE(segments_.Unmount(buffer2_).ok());
  EXPECT_FALSE(p.OnlyInPrefetchBuffer(gone));
  EXPECT_EQ(p.GrantReadLease(gone, kNow), kTtl);
}

TEST_F(LeasePolicyTest, RecycleNeverLengthensTheTtlPastTheDefault) {
  const LeasePolicy p = Make(/*consumed_ms=*/5 * kTtl);
  ObjectMeta m = Buffered(0, 0, 0);
  EXPECT_EQ(p.GrantReadLease(m, kNow), kTtl);
}

TEST_F(LeasePolicyTest, ConsumingGetOfTheLastTriggerDropsTheTriggerLease) {
  const LeasePolicy p = Make(kConsumed);
  ObjectMeta m = Buffered(1, kNow - 100, kNow + 5000);
  EXPECT_EQ(p.GrantReadLease(m, kNow), kConsumed);
  EXPECT_EQ(m.pending_prefetch_reads, 0);
  EXPECT_EQ(m.reader_lease_deadline_ms(), kNow + kConsumed);
  EXPECT_EQ(m.lease_deadline_ms(), kNow + kConsumed);
  EXPECT_EQ(Recycled(), 1u);
  // A further get (no trigger pending) extends as usual and recycles
  // nothing more.
  EXPECT_EQ(p.GrantReadLease(m, kNow + 100), kConsumed);
  EXPECT_EQ(m.lease_deadline_ms(), kNow + 100 + kConsumed);
  EXPECT_EQ(Recycled(), 1u);
}

TEST_F(LeasePolicyTest, GetWithoutAPendingTriggerKeepsTheLandingLease) {
  const LeasePolicy p = Make(kConsumed);
  // Landed with its lease, but no router trigger announced this get.
  ObjectMeta m = Buffered(0, 0, kNow + 5000);
  EXPECT_EQ(p.GrantReadLease(m, kNow), kConsumed);
  EXPECT_EQ(m.lease_deadline_ms(), kNow + 5000);
  EXPECT_EQ(Recycled(), 0u);
}

TEST_F(LeasePolicyTest, EarlierGetsOfSeveralPendingTriggersDoNotDropIt) {
  const LeasePolicy p = Make(kConsumed);
  ObjectMeta m = Buffered(3, kNow - 100, kNow + 5000);
  for (int left = 2; left >= 1; --left) {
    EXPECT_EQ(p.GrantReadLease(m, kNow), kConsumed);
    EXPECT_EQ(m.pending_prefetch_reads, left);
    EXPECT_EQ(m.lease_deadline_ms(), kNow + 5000);
    EXPECT_EQ(Recycled(), 0u);
  }
  EXPECT_EQ(p.GrantReadLease(m, kNow + 10), kConsumed);
  EXPECT_EQ(m.pending_prefetch_reads, 0);
  EXPECT_EQ(m.lease_deadline_ms(), kNow + 10 + kConsumed);
  EXPECT_EQ(Recycled(), 1u);
}

TEST_F(LeasePolicyTest, EachConsumedTriggerObservesItsWindowOnce) {
  const LeasePolicy p = Make(/*consumed_ms=*/0);
  ObjectMeta m = Buffered(2, kNow - 2500, kNow + 5000);
  p.GrantReadLease(m, kNow);
  EXPECT_EQ(registry_.HistogramCount(kWindow), 1u);
  // The next pending trigger's window counts from this get.
  EXPECT_EQ(m.pending_trigger_ms32, static_cast<uint32_t>(kNow));
  p.GrantReadLease(m, kNow + 40);
  EXPECT_EQ(registry_.HistogramCount(kWindow), 2u);
  p.GrantReadLease(m, kNow + 80);  // no trigger pending: nothing observed
  EXPECT_EQ(registry_.HistogramCount(kWindow), 2u);
  EXPECT_EQ(m.pending_prefetch_reads, 0);
}

TEST_F(LeasePolicyTest, AFateIsCountedOnce) {
  const LeasePolicy p = Make(kConsumed);
  ObjectMeta m;
  m.prefetched_unread = true;
  p.CountPrefetchFate(m, "read_from_dram");
  EXPECT_FALSE(m.prefetched_unread);
  p.CountPrefetchFate(m, "read_from_dram");
  p.CountPrefetchFate(m, "evicted_unread");
  EXPECT_EQ(registry_.CounterValue(kFate, "fate=\"read_from_dram\""), 1u);
  EXPECT_EQ(registry_.CounterValue(kFate, "fate=\"evicted_unread\""), 0u);
  // A replica that did not come from a prefetch has no fate.
  ObjectMeta put;
  p.CountPrefetchFate(put, "removed_unread");
  EXPECT_EQ(registry_.CounterValue(kFate, "fate=\"removed_unread\""), 0u);
}

// A consuming get that arrives after the trigger's lease ran out: the
// reader's lease is the object's lease too, so eviction or a non-forced
// remove cannot free the range while the reader copies. (The drop branch
// once only lowered lease_deadline_ms and left it ended here.)
TEST_F(LeasePolicyTest, LateConsumingGetStillLeasesTheObject) {
  const LeasePolicy p = Make(kConsumed);
  ObjectMeta m = Buffered(1, kNow - 6000, kNow - 1000);  // trigger lease over
  EXPECT_EQ(p.GrantReadLease(m, kNow), kConsumed);
  EXPECT_EQ(m.reader_lease_deadline_ms(), kNow + kConsumed);
  EXPECT_TRUE(m.LeaseLive(kNow + kConsumed - 1));
  EXPECT_GE(m.lease_deadline_ms(), m.reader_lease_deadline_ms());
}

}  // namespace
}  // namespace kvpool
