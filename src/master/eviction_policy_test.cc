#include "master/eviction_policy.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <functional>
#include <iterator>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace kvpool {
namespace {

constexpr uint64_t kKiB = 1024;

// The policy over a real object table and real segments; the hooks stand in
// for MasterService: they free the ranges at once, erase the object and
// record what they were asked to do.
class EvictionPolicyTest : public ::testing::Test {
 protected:
  EvictionPolicyTest()
      : objects_(std::make_unique<ObjectStore>()),
        segments_(SegmentManager::Strategy::kFreeRatioFirst) {
    Make({});
  }

  void Make(EvictionPolicy::Options options) {
    EvictionPolicy::Hooks hooks;
    hooks.queue_offload = [this](EvictionPolicy::Shard& shard,
                                 const ObjectKey& k, const ObjectMeta&,
                                 bool* holder_ssd_full) {
      offload_asked_.push_back(std::string(k.key));
      *holder_ssd_full = holder_ssd_full_;
      // As OffloadScheduler::Queue: the task pins the memory it reads.
      if (offload_queued_) shard.offloads()[k] = OffloadState{1, 1, 0};
      return offload_queued_;
    };
    hooks.count_prefetch_fate = [this](ObjectMeta& m, const char* fate) {
      if (!m.prefetched_unread) return;
      m.prefetched_unread = false;
      fates_.push_back(fate);
    };
    hooks.release_replicas = [this](std::span<const Replica> replicas) {
      for (const Replica& r : replicas) {
        EXPECT_EQ(r.kind, ReplicaKind::kMemory);
        segments_.Free(Placement{r.segment, r.handle, r.offset});
        ++released_;
      }
      // Mid-pass, as another thread's change would land.
      if (auto f = std::exchange(on_release_, nullptr)) f();
    };
    hooks.erase_evicted = [this](EvictionPolicy::Shard& shard,
                                 EvictionPolicy::ObjectMap::iterator it) {
      erased_.push_back(std::string(it->first.key));
      auto next = std::next(it);
      shard.objects().erase(it);
      return next;
    };
    policy_ = std::make_unique<EvictionPolicy>(
        options, &clock_, *objects_, segments_, metrics_, std::move(hooks));
  }

  uint32_t Mount(const std::string& node, uint64_t capacity,
                 SegmentKind kind = SegmentKind::kMain, bool extra = false) {
    SegmentInfo info;
    info.node_id = node;
    info.capacity = capacity;
    info.kind = kind;
    info.extra = extra;
    auto r = segments_.Mount(info);
    EXPECT_TRUE(r.ok());
    return r.ok() ? r.value() : 0;
  }

  // A COMPLETE object of `size` bytes with one MEMORY replica in a segment
  // of `kind`, last accessed now; the clock then moves on, so objects added
  // later are more recently used.
  ObjectMeta& Add(const std::string& key, uint64_t size,
                  SegmentKind kind = SegmentKind::kMain) {
    std::vector<Placement> p = segments_.Allocate(size, 1, kind, "");
    EXPECT_EQ(p.size(), 1u) << key;
    if (p.empty()) std::abort();  // the test's segments are too small
    ObjectKey k{0, key};
    auto& shard = objects_->ShardFor(k);
    // Filled in place: GCC 12 takes a fresh local ObjectMeta's first
    // push_back for a read of uninitialized memory (absl::InlinedVector's,
    // before ReplicaList).
    ObjectMeta& m = shard.objects()[k];
    m.size = size;
    m.set_last_access_ms(clock_.NowMs());
    m.replicas.push_back(Replica{p[0].offset, p[0].segment, p[0].handle,
                                 ReplicaKind::kMemory,
                                 ReplicaStatus::kComplete});
    clock_.Advance(10);
    return m;
  }

  const ObjectMeta* Find(const std::string& key) {
    ObjectKey k{0, key};
    auto& shard = objects_->ShardFor(k);
    auto it = shard.objects().find(k);
    return it == shard.objects().end() ? nullptr : &it->second;
  }
  size_t ShardOf(const std::string& key) {
    ObjectKey k{0, key};
    EvictionPolicy::Shard* shard = &objects_->ShardFor(k);
    for (size_t i = 0; i < ObjectStore::kShards; ++i) {
      if (&objects_->shard(i) == shard) return i;
    }
    std::abort();
  }
  bool InMemory(const std::string& key) {
    const ObjectMeta* m = Find(key);
    return m != nullptr && m->HasCompleteMemory();
  }
  uint64_t Counter(const std::string& name) {
    return metrics_.CounterValue(name);
  }

  FakeClock clock_;
  std::unique_ptr<ObjectStore> objects_;
  SegmentManager segments_;
  MetricsRegistry metrics_;
  std::unique_ptr<EvictionPolicy> policy_;

  // What the hooks did or answer.
  bool offload_queued_ = false;
  bool holder_ssd_full_ = false;
  std::vector<std::string> offload_asked_;
  std::vector<std::string> fates_;
  std::vector<std::string> erased_;
  size_t released_ = 0;
  std::function<void()> on_release_;  // once, from the next release
};

// Below the high watermark nothing goes; at it, the least recently used
// objects go until use is back at the watermark less eviction_ratio, and
// every eviction is counted.
TEST_F(EvictionPolicyTest, EvictsLruDownToTheWatermarkLessTheRatio) {
  Make({.eviction_high_watermark_ratio = 0.8, .eviction_ratio = 0.1});
  Mount("a", 100 * kKiB);
  for (int i = 0; i < 75; ++i) Add("k" + std::to_string(i), kKiB);
  EXPECT_EQ(policy_->EvictIfNeeded(), 0u);
  EXPECT_EQ(policy_->evicted_objects(), 0u);
  EXPECT_EQ(Counter("kvpool_master_eviction_passes_total"), 0u);

  for (int i = 75; i < 85; ++i) Add("k" + std::to_string(i), kKiB);
  // 85 KiB used of 100: 5 KiB over the mark, and 10 KiB more.
  EXPECT_EQ(policy_->EvictIfNeeded(), 15 * kKiB);
  EXPECT_EQ(segments_.Usage(SegmentKind::kMain).used, 70 * kKiB);
  for (int i = 0; i < 15; ++i)
    EXPECT_EQ(Find("k" + std::to_string(i)), nullptr);
  for (int i = 15; i < 85; ++i) EXPECT_TRUE(InMemory("k" + std::to_string(i)));
  EXPECT_EQ(policy_->evicted_objects(), 15u);
  EXPECT_EQ(policy_->evicted_bytes(), 15 * kKiB);
  EXPECT_EQ(erased_.size(), 15u);
  EXPECT_EQ(released_, 15u);
  EXPECT_EQ(Counter("kvpool_master_evicted_bytes_total"), 15 * kKiB);
  EXPECT_EQ(Counter("kvpool_master_eviction_passes_total"), 1u);
  // Back under the mark: the next check does nothing.
  EXPECT_EQ(policy_->EvictIfNeeded(), 0u);
  EXPECT_EQ(policy_->evicted_objects(), 15u);
}

// Hard-pinned, leased, half-written and offloading objects are never
// evicted, however much is asked for; soft-pinned ones only when allowed.
TEST_F(EvictionPolicyTest, NeverEvictsPinnedLeasedWrittenOrOffloadingObjects) {
  Make({.allow_evict_soft_pinned_objects = false});
  Mount("a", 100 * kKiB);
  Add("hard", kKiB).hard_pin = true;
  Add("soft", kKiB).set_soft_pin_deadline_ms(clock_.NowMs() + 60'000);
  Add("leased", kKiB).set_lease_deadline_ms(clock_.NowMs() + 60'000);
  Add("writing", kKiB).replicas[0].status = ReplicaStatus::kProcessing;
  Add("offloading", kKiB);
  ObjectKey off{0, "offloading"};
  objects_->ShardFor(off).offloads()[off] = OffloadState{1, 1, clock_.NowMs()};
  Add("plain", kKiB);

  EXPECT_EQ(policy_->EvictBytes(50 * kKiB), kKiB);
  EXPECT_EQ(Find("plain"), nullptr);
  for (const char* k : {"hard", "soft", "leased", "offloading"})
    EXPECT_TRUE(InMemory(k)) << k;
  EXPECT_NE(Find("writing"), nullptr);
  EXPECT_EQ(policy_->evicted_objects(), 1u);

  Make({.allow_evict_soft_pinned_objects = true});
  EXPECT_EQ(policy_->EvictBytes(50 * kKiB), kKiB);
  EXPECT_EQ(Find("soft"), nullptr);
  for (const char* k : {"hard", "leased", "offloading"})
    EXPECT_TRUE(InMemory(k)) << k;
  EXPECT_NE(Find("writing"), nullptr);
}

// A soft pin outranks recency: the newer unpinned object goes first.
TEST_F(EvictionPolicyTest, SoftPinnedGoOnlyAfterUnpinned) {
  Mount("a", 100 * kKiB);
  Add("soft", kKiB).set_soft_pin_deadline_ms(clock_.NowMs() + 60'000);
  Add("plain", kKiB);
  EXPECT_EQ(policy_->EvictBytes(kKiB), kKiB);
  EXPECT_EQ(Find("plain"), nullptr);
  EXPECT_TRUE(InMemory("soft"));
}

// An object with an SSD copy goes before an older one without, and only its
// memory replica goes: it stays readable from the SSD.
TEST_F(EvictionPolicyTest, ObjectsWithAnSsdCopyGoFirstAndStaySsdOnly) {
  Mount("a", 100 * kKiB);
  Add("no_copy", kKiB);
  Add("copy", kKiB)
      .replicas.push_back(
          Replica{0, 7, 0, ReplicaKind::kLocalDisk, ReplicaStatus::kComplete});
  EXPECT_EQ(policy_->EvictBytes(kKiB), kKiB);
  const ObjectMeta* copy = Find("copy");
  ASSERT_NE(copy, nullptr);
  ASSERT_EQ(copy->replicas.size(), 1u);
  EXPECT_EQ(copy->replicas[0].kind, ReplicaKind::kLocalDisk);
  EXPECT_TRUE(InMemory("no_copy"));
  EXPECT_TRUE(erased_.empty());
  EXPECT_EQ(policy_->evicted_objects(), 1u);

  EXPECT_EQ(policy_->EvictBytes(kKiB), kKiB);
  EXPECT_EQ(Find("no_copy"), nullptr);
  EXPECT_EQ(erased_, std::vector<std::string>{"no_copy"});
}

// With offload on, a value with no SSD copy is copied rather than dropped;
// it is dropped only when its holder's SSD is full, when it lies only in
// extra segments, or with offload_force_evict -- each counted.
TEST_F(EvictionPolicyTest, WithOffloadAnUncopiedValueIsCopiedNotDropped) {
  // No soft-pinned rounds, so each pass looks at an unpinned object once.
  Make({.allow_evict_soft_pinned_objects = false, .enable_offload = true});
  Mount("a", 100 * kKiB);
  Add("k", kKiB);

  offload_queued_ = true;
  EXPECT_EQ(policy_->EvictBytes(kKiB), 0u);
  EXPECT_TRUE(InMemory("k"));
  EXPECT_EQ(offload_asked_, std::vector<std::string>{"k"});
  EXPECT_EQ(Counter("kvpool_master_evict_offload_queued_total"), 1u);

  // Pinned by its offload until the holder answers.
  EXPECT_EQ(policy_->EvictBytes(kKiB), 0u);
  EXPECT_EQ(offload_asked_.size(), 1u);
  ObjectKey k{0, "k"};
  objects_->ShardFor(k).offloads().clear();  // the holder's NACK

  offload_queued_ = false;  // no holder could take it
  EXPECT_EQ(policy_->EvictBytes(kKiB), 0u);
  EXPECT_TRUE(InMemory("k"));
  EXPECT_EQ(Counter("kvpool_master_evict_kept_no_copy_total"), 1u);
  EXPECT_EQ(policy_->evicted_objects(), 0u);

  holder_ssd_full_ = true;
  EXPECT_EQ(policy_->EvictBytes(kKiB), kKiB);
  EXPECT_EQ(Find("k"), nullptr);
  EXPECT_EQ(Counter("kvpool_master_evicted_without_copy_ssd_full_total"), 1u);

  holder_ssd_full_ = false;
  Make({.allow_evict_soft_pinned_objects = false,
        .enable_offload = true,
        .offload_force_evict = true});
  Add("forced", kKiB);
  EXPECT_EQ(policy_->EvictBytes(kKiB), kKiB);
  EXPECT_EQ(Find("forced"), nullptr);
  EXPECT_EQ(Counter("kvpool_master_force_evicted_without_copy_total"), 1u);
}

TEST_F(EvictionPolicyTest, ValuesOnlyInExtraSegmentsAreDroppedWithoutCopy) {
  Make({.enable_offload = true});
  Mount("x", 100 * kKiB, SegmentKind::kMain, /*extra=*/true);
  Add("k", kKiB);
  EXPECT_EQ(policy_->EvictBytes(kKiB), kKiB);
  EXPECT_EQ(Find("k"), nullptr);
  EXPECT_EQ(Counter("kvpool_master_evicted_without_copy_extra_segment_total"),
            1u);
  EXPECT_EQ(Counter("kvpool_master_evict_kept_no_copy_total"), 0u);
}

// Evicting the prefetch buffer touches only its replicas, and gives up
// what was read before unread prefetches, whatever their age; an unread
// one's fate is counted.
TEST_F(EvictionPolicyTest, PrefetchBufferGivesUpReadReplicasFirst) {
  Mount("a", 100 * kKiB);
  Mount("a", 100 * kKiB, SegmentKind::kPrefetchBuffer);
  Add("main", kKiB);
  Add("unread", kKiB, SegmentKind::kPrefetchBuffer).prefetched_unread = true;
  Add("read", kKiB, SegmentKind::kPrefetchBuffer);

  EXPECT_EQ(policy_->EvictBytes(kKiB, SegmentKind::kPrefetchBuffer), kKiB);
  EXPECT_EQ(Find("read"), nullptr);
  EXPECT_TRUE(InMemory("unread"));
  EXPECT_TRUE(fates_.empty());

  EXPECT_EQ(policy_->EvictBytes(10 * kKiB, SegmentKind::kPrefetchBuffer), kKiB);
  EXPECT_EQ(Find("unread"), nullptr);
  EXPECT_EQ(fates_, std::vector<std::string>{"evicted_unread"});
  EXPECT_TRUE(InMemory("main"));
  EXPECT_EQ(segments_.Usage(SegmentKind::kPrefetchBuffer).used, 0u);
}

// A closed segment takes no put, so nothing in it is evicted for room.
TEST_F(EvictionPolicyTest, ReplicasInClosedSegmentsAreNotEvicted) {
  uint32_t a = Mount("a", 100 * kKiB);
  Add("k", kKiB);
  segments_.SetClosed(a, true);
  EXPECT_EQ(policy_->EvictBytes(kKiB), 0u);
  EXPECT_TRUE(InMemory("k"));
  segments_.SetClosed(a, false);
  EXPECT_EQ(policy_->EvictBytes(kKiB), kKiB);
}

// A node re-registering its directory while a pass runs (a new leader's
// first puts evict while the nodes come back, docs/failure_model.md): its
// segment, mounted closed after the pass began, took no part in the pass's
// decision, so nothing in it goes -- also what lies in shards the pass has
// yet to reach, and also once the pass has freed less than it wants.
TEST_F(EvictionPolicyTest, ReplicasOfASegmentMountedDuringAPassAreNotEvicted) {
  Mount("a", 100 * kKiB);
  std::string first = "first";
  for (int i = 0; ShardOf(first) + 1 >= ObjectStore::kShards; ++i)
    first = "first-" + std::to_string(i);
  std::string late = "late";
  for (int i = 0; ShardOf(late) <= ShardOf(first); ++i)
    late = "late-" + std::to_string(i);
  const int64_t first_access = Add(first, kKiB).last_access_ms();
  on_release_ = [&] {
    SegmentInfo info;
    info.node_id = "b";
    info.capacity = 100 * kKiB;
    auto id = segments_.Mount(info, /*closed=*/true);
    ASSERT_TRUE(id.ok());
    auto p = segments_.AllocateAt(id.value(), 0, kKiB);
    ASSERT_TRUE(p.has_value());
    ObjectMeta& m =
        objects_->ShardFor(ObjectKey{0, late}).objects()[ObjectKey{0, late}];
    m.size = kKiB;
    m.set_last_access_ms(first_access - 5);  // older: below any cutoff
    m.replicas.push_back(Replica{p->offset, p->segment, p->handle,
                                 ReplicaKind::kMemory,
                                 ReplicaStatus::kComplete});
  };
  EXPECT_EQ(policy_->EvictBytes(2 * kKiB), kKiB);
  EXPECT_FALSE(InMemory(first));
  EXPECT_TRUE(InMemory(late));
}

// A throttled trigger's request drains the buffer at the next check even
// below its watermark, once.
TEST_F(EvictionPolicyTest, BufferRoomRequestDrainsTheBufferOnce) {
  Make({.eviction_high_watermark_ratio = 0.9, .eviction_ratio = 0.05});
  Mount("a", 100 * kKiB, SegmentKind::kPrefetchBuffer);
  for (int i = 0; i < 84; ++i)
    Add("b" + std::to_string(i), kKiB, SegmentKind::kPrefetchBuffer);
  EXPECT_EQ(policy_->EvictIfNeeded(), 0u);  // under 0.85, its mark

  // Reserved for queued promotions: 5 KiB; this one wants 2 KiB more. Back
  // at the low mark (85 KiB) with both: 84 + 5 + 2 - 85 = 6 KiB.
  policy_->RequestBufferRoom(segments_.Usage(SegmentKind::kPrefetchBuffer),
                             5 * kKiB, 2 * kKiB);
  EXPECT_EQ(policy_->EvictIfNeeded(), 6 * kKiB);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(Find("b" + std::to_string(i)), nullptr);
  EXPECT_TRUE(InMemory("b6"));
  EXPECT_EQ(policy_->EvictIfNeeded(), 0u);
}

// Past 64Ki candidates the cutoff comes from an age histogram of a sample
// of the shards, not a sort of every candidate: what goes is still the
// oldest (within the histogram's 1/16 of the age and the sample's margin),
// and as many bytes as asked.
TEST_F(EvictionPolicyTest, LargeTablesEvictTheOldestFromASample) {
  constexpr int kObjects = 200000;
  Mount("a", uint64_t{kObjects} * 64);
  for (int i = 0; i < kObjects; ++i) Add("k" + std::to_string(i), 64);
  const uint64_t want = uint64_t{kObjects} / 10 * 64;
  EXPECT_GE(policy_->EvictBytes(want), want);
  ASSERT_FALSE(erased_.empty());
  for (const std::string& key : erased_) {
    EXPECT_LT(std::stoi(key.substr(1)), kObjects / 5) << key;
  }
  EXPECT_TRUE(InMemory("k" + std::to_string(kObjects - 1)));
}

}  // namespace
}  // namespace kvpool
