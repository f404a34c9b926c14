// SegmentManager on its own: what segment_manager.h promises about ids,
// unmounted and closed segments, placement (kind, preferred and excluded
// nodes, distinct segments, the two strategies), the graveyard, holds and
// the usage figures. (master_service_test.cc has one more case, under the
// suite name SegmentManagerTest.)
#include "master/segment_manager.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

namespace kvpool {
namespace {

using Strategy = SegmentManager::Strategy;

constexpr uint64_t kCap = 64 * 1024;
constexpr uint64_t kBlock = 4096;

SegmentInfo Info(const std::string& node, uint64_t capacity = kCap,
                 SegmentKind kind = SegmentKind::kMain) {
  SegmentInfo info;
  info.node_id = node;
  info.capacity = capacity;
  info.kind = kind;
  return info;
}

std::set<uint32_t> SegmentsOf(const std::vector<Placement>& ps) {
  std::set<uint32_t> out;
  for (const auto& p : ps) out.insert(p.segment);
  return out;
}

class SegmentManagerUnitTest : public ::testing::Test {
 protected:
  uint32_t Mount(const std::string& node, uint64_t capacity = kCap,
                 SegmentKind kind = SegmentKind::kMain, bool closed = false) {
    auto r = segs_.Mount(Info(node, capacity, kind), closed);
    EXPECT_TRUE(r.ok());
    return r.ok() ? r.value() : 0;
  }
  uint64_t Used(uint32_t id) const {
    for (const auto& s : segs_.Snapshot())
      if (s.info.id == id) return s.used;
    return UINT64_MAX;
  }

  SegmentManager segs_{Strategy::kFreeRatioFirst};
};

TEST_F(SegmentManagerUnitTest, MountRefusesAnEmptySegmentOrNode) {
  EXPECT_EQ(segs_.Mount(Info("n", 0)).status().code(),
            ErrorCode::INVALID_PARAMS);
  EXPECT_EQ(segs_.Mount(Info("")).status().code(), ErrorCode::INVALID_PARAMS);
  EXPECT_EQ(segs_.segment_count(), 0u);
}

TEST_F(SegmentManagerUnitTest, IdsAreNeverReusedAfterUnmount) {
  std::set<uint32_t> seen;
  for (int i = 0; i < 5; ++i) {
    const uint32_t id = Mount("n");
    EXPECT_NE(id, 0u);
    EXPECT_TRUE(seen.insert(id).second) << "id " << id << " handed out twice";
    EXPECT_EQ(segs_.Info(id)->id, id);
    ASSERT_TRUE(segs_.Unmount(id).ok());
    EXPECT_FALSE(segs_.IsMounted(id));
  }
  EXPECT_EQ(segs_.Unmount(*seen.begin()).code(), ErrorCode::SEGMENT_NOT_FOUND);
}

// HolderOf answers from this thread's cache after the first ask, and never
// for a segment unmounted since (by id, or with its whole node).
TEST_F(SegmentManagerUnitTest, HolderOfForgetsWhatWasUnmounted) {
  const uint32_t a = Mount("na"),
                 b = Mount("nb", kCap, SegmentKind::kPrefetchBuffer);
  std::string_view node;
  SegmentKind kind = SegmentKind::kMain;
  for (int round = 0; round < 2; ++round) {  // the second from the cache
    ASSERT_TRUE(segs_.HolderOf(a, &node, &kind));
    EXPECT_EQ(node, "na");
    EXPECT_EQ(kind, SegmentKind::kMain);
    ASSERT_TRUE(segs_.HolderOf(b, &node, &kind));
    EXPECT_EQ(node, "nb");
    EXPECT_EQ(kind, SegmentKind::kPrefetchBuffer);
  }
  ASSERT_TRUE(segs_.Unmount(a).ok());
  node = "untouched";
  EXPECT_FALSE(segs_.HolderOf(a, &node, &kind));
  EXPECT_EQ(node, "untouched");
  ASSERT_TRUE(segs_.HolderOf(b, &node, &kind));  // still there
  EXPECT_EQ(segs_.UnmountNode("nb").size(), 1u);
  EXPECT_FALSE(segs_.HolderOf(b, &node, &kind));
  // Another manager's segment of the same id is its own.
  SegmentManager other(Strategy::kFreeRatioFirst);
  for (int i = 0; i < 2; ++i) {
    auto id = other.Mount(Info("other"));
    ASSERT_TRUE(id.ok());
    if (id.value() != b) continue;
    ASSERT_TRUE(other.HolderOf(b, &node, &kind));
    EXPECT_EQ(node, "other");
  }
}

TEST_F(SegmentManagerUnitTest, AStalePlacementNeverFreesANewerSegmentsRange) {
  const uint32_t old_id = Mount("n");
  auto old = segs_.Allocate(kBlock, 1, SegmentKind::kMain, "");
  ASSERT_EQ(old.size(), 1u);
  ASSERT_TRUE(segs_.Unmount(old_id).ok());
  const uint32_t new_id = Mount("n");
  ASSERT_NE(new_id, old_id);
  auto fresh = segs_.Allocate(kBlock, 1, SegmentKind::kMain, "");
  ASSERT_EQ(fresh.size(), 1u);
  segs_.Free(old[0]);  // ignored: its segment is gone
  segs_.FreeAt(old[0], 0);
  EXPECT_EQ(segs_.ReleaseDue(1), 1u);
  EXPECT_EQ(Used(new_id), kBlock);
}

TEST_F(SegmentManagerUnitTest, UnmountedSegmentIsNeverAllocatedFrom) {
  const uint32_t a = Mount("a");
  Mount("b");
  ASSERT_TRUE(segs_.Unmount(a).ok());
  for (int i = 0; i < 8; ++i) {
    for (const auto& p : segs_.Allocate(kBlock, 2, SegmentKind::kMain, "a"))
      EXPECT_NE(p.segment, a);
  }
  EXPECT_FALSE(segs_.AllocateOn(kBlock, SegmentKind::kMain, "a").has_value());
  EXPECT_FALSE(segs_.AllocateAt(a, 0, kBlock).has_value());
  EXPECT_TRUE(segs_.AllocateAllOf(a).empty());
  EXPECT_EQ(segs_.Info(a), nullptr);
}

TEST_F(SegmentManagerUnitTest, UnmountNodeTakesEveryOneOfItsSegments) {
  const uint32_t a1 = Mount("a");
  const uint32_t b = Mount("b");
  const uint32_t a2 = Mount("a", kCap, SegmentKind::kPrefetchBuffer);
  auto gone = segs_.UnmountNode("a");
  std::sort(gone.begin(), gone.end());
  EXPECT_EQ(gone, (std::vector<uint32_t>{a1, a2}));
  EXPECT_TRUE(segs_.IsMounted(b));
  EXPECT_EQ(segs_.segment_count(), 1u);
  EXPECT_TRUE(segs_.UnmountNode("a").empty());
}

TEST_F(SegmentManagerUnitTest, ClosedSegmentTakesNoNewAllocation) {
  const uint32_t c = Mount("a", kCap, SegmentKind::kMain, /*closed=*/true);
  EXPECT_TRUE(segs_.IsClosed(c));
  EXPECT_EQ(segs_.ClosedIds(), std::vector<uint32_t>{c});
  EXPECT_TRUE(segs_.Allocate(kBlock, 1, SegmentKind::kMain, "a").empty());
  EXPECT_FALSE(segs_.AllocateOn(kBlock, SegmentKind::kMain, "a").has_value());
  // Left out of Usage, capacity and all.
  EXPECT_EQ(segs_.Usage(SegmentKind::kMain).capacity, 0u);
  EXPECT_EQ(segs_.UsageOf(SegmentKind::kMain, "a").capacity, 0u);
  // AllocateAt and Free still work (a remount's directory).
  auto at = segs_.AllocateAt(c, 0, kBlock);
  ASSERT_TRUE(at.has_value());
  EXPECT_EQ(Used(c), kBlock);
  segs_.Free(*at);
  EXPECT_EQ(Used(c), 0u);
  // Opened, it takes allocations again.
  segs_.SetClosed(c, false);
  EXPECT_FALSE(segs_.IsClosed(c));
  EXPECT_EQ(segs_.Allocate(kBlock, 1, SegmentKind::kMain, "").size(), 1u);
  EXPECT_EQ(segs_.Usage(SegmentKind::kMain).capacity, kCap);
}

TEST_F(SegmentManagerUnitTest, AllocateHonoursKind) {
  const uint32_t main = Mount("a");
  const uint32_t buf = Mount("a", kCap, SegmentKind::kPrefetchBuffer);
  auto m = segs_.Allocate(kBlock, 2, SegmentKind::kMain, "");
  ASSERT_EQ(m.size(), 1u);  // one MAIN segment: one range
  EXPECT_EQ(m[0].segment, main);
  auto b = segs_.Allocate(kBlock, 1, SegmentKind::kPrefetchBuffer, "");
  ASSERT_EQ(b.size(), 1u);
  EXPECT_EQ(b[0].segment, buf);
  EXPECT_EQ(segs_.IdsOfKind(SegmentKind::kPrefetchBuffer),
            std::vector<uint32_t>{buf});
  auto on = segs_.AllocateOn(kBlock, SegmentKind::kPrefetchBuffer, "a");
  ASSERT_TRUE(on.has_value());
  EXPECT_EQ(on->segment, buf);
  EXPECT_FALSE(segs_.AllocateOn(kBlock, SegmentKind::kMain, "b").has_value());
}

TEST_F(SegmentManagerUnitTest, ReplicasGoToDistinctSegments) {
  for (const char* n : {"a", "b", "c"}) Mount(n);
  auto ps = segs_.Allocate(kBlock, 3, SegmentKind::kMain, "");
  ASSERT_EQ(ps.size(), 3u);
  EXPECT_EQ(SegmentsOf(ps).size(), 3u);
  // More replicas than segments: fewer ranges, never two in one segment.
  ps = segs_.Allocate(kBlock, 5, SegmentKind::kMain, "");
  EXPECT_EQ(ps.size(), 3u);
  EXPECT_EQ(SegmentsOf(ps).size(), 3u);
}

TEST_F(SegmentManagerUnitTest, PreferredNodesComeFirstInTheirOrder) {
  const uint32_t a = Mount("a"), b = Mount("b"), c = Mount("c");
  // Make c the emptiest, so the strategy alone would pick it first.
  ASSERT_TRUE(segs_.AllocateOn(kBlock, SegmentKind::kMain, "a").has_value());
  ASSERT_TRUE(segs_.AllocateOn(kBlock, SegmentKind::kMain, "b").has_value());
  auto one = segs_.Allocate(kBlock, 1, SegmentKind::kMain, "b");
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0].segment, b);
  auto two = segs_.Allocate(kBlock, 2, SegmentKind::kMain,
                            std::vector<std::string>{"b", "a"});
  ASSERT_EQ(two.size(), 2u);
  EXPECT_EQ(two[0].segment, b);
  EXPECT_EQ(two[1].segment, a);
  // Without a preference: the most free share first.
  auto free_first = segs_.Allocate(kBlock, 1, SegmentKind::kMain, "");
  ASSERT_EQ(free_first.size(), 1u);
  EXPECT_EQ(free_first[0].segment, c);
}

TEST_F(SegmentManagerUnitTest, ExcludedNodesGetNothing) {
  const uint32_t a = Mount("a");
  Mount("b");
  Mount("c");
  for (int i = 0; i < 4; ++i) {
    auto ps = segs_.Allocate(kBlock, 3, SegmentKind::kMain,
                             std::vector<std::string>{"b", "c"},
                             std::vector<std::string>{"b", "c"});
    ASSERT_EQ(ps.size(), 1u);  // preferred but excluded: excluded wins
    EXPECT_EQ(ps[0].segment, a);
  }
}

TEST_F(SegmentManagerUnitTest, FullSegmentsYieldFewerRanges) {
  Mount("a", kBlock);
  Mount("b", kBlock);
  EXPECT_EQ(segs_.Allocate(kBlock, 2, SegmentKind::kMain, "").size(), 2u);
  EXPECT_TRUE(segs_.Allocate(kBlock, 1, SegmentKind::kMain, "").empty());
  // Larger than any segment: none.
  EXPECT_TRUE(segs_.Allocate(2 * kBlock, 1, SegmentKind::kMain, "").empty());
  EXPECT_EQ(segs_.LargestCapacity(SegmentKind::kMain), kBlock);
  EXPECT_EQ(segs_.LargestCapacity(SegmentKind::kPrefetchBuffer), 0u);
}

TEST_F(SegmentManagerUnitTest, FreeRatioFirstBalancesAcrossSegments) {
  const uint32_t a = Mount("a"), b = Mount("b");
  for (int i = 0; i < 8; ++i)
    ASSERT_EQ(segs_.Allocate(kBlock, 1, SegmentKind::kMain, "").size(), 1u);
  EXPECT_EQ(Used(a), 4 * kBlock);
  EXPECT_EQ(Used(b), 4 * kBlock);
}

TEST(SegmentManagerRandomTest, RandomStrategySpreadsOverEverySegment) {
  SegmentManager segs(Strategy::kRandom, /*seed=*/7);
  std::set<uint32_t> ids;
  for (const char* n : {"a", "b", "c"})
    ids.insert(segs.Mount(Info(n, 1 << 20)).value());
  std::set<uint32_t> used;
  for (int i = 0; i < 60; ++i) {
    auto ps = segs.Allocate(kBlock, 1, SegmentKind::kMain, "");
    ASSERT_EQ(ps.size(), 1u);
    used.insert(ps[0].segment);
  }
  EXPECT_EQ(used, ids);
  // A preference still wins over the shuffle.
  for (int i = 0; i < 10; ++i) {
    auto ps = segs.Allocate(kBlock, 1, SegmentKind::kMain, "b");
    ASSERT_EQ(ps.size(), 1u);
    EXPECT_EQ(segs.Info(ps[0].segment)->node_id, "b");
  }
}

TEST_F(SegmentManagerUnitTest, GraveyardRangeIsNotReusedUntilItsDeadline) {
  const uint32_t id = Mount("a", kBlock);  // room for one range
  auto ps = segs_.Allocate(kBlock, 1, SegmentKind::kMain, "");
  ASSERT_EQ(ps.size(), 1u);
  segs_.FreeAt(ps[0], /*deadline_ms=*/100);
  EXPECT_EQ(segs_.graveyard_size(), 1u);
  EXPECT_EQ(segs_.ReleaseDue(99), 0u);
  EXPECT_EQ(Used(id), kBlock);
  EXPECT_TRUE(segs_.Allocate(kBlock, 1, SegmentKind::kMain, "").empty());
  EXPECT_EQ(segs_.ReleaseDue(100), 1u);  // due at its deadline
  EXPECT_EQ(segs_.graveyard_size(), 0u);
  EXPECT_EQ(Used(id), 0u);
  EXPECT_EQ(segs_.Allocate(kBlock, 1, SegmentKind::kMain, "").size(), 1u);
}

TEST_F(SegmentManagerUnitTest, ReleaseDueFreesOnlyWhatIsDue) {
  Mount("a");
  auto ps = segs_.Allocate(kBlock, 1, SegmentKind::kMain, "");
  auto qs = segs_.Allocate(kBlock, 1, SegmentKind::kMain, "");
  ASSERT_EQ(ps.size() + qs.size(), 2u);
  segs_.FreeAt(ps[0], 50);
  segs_.FreeAt(qs[0], 500);
  EXPECT_EQ(segs_.ReleaseDue(60), 1u);
  EXPECT_EQ(segs_.graveyard_size(), 1u);
  EXPECT_EQ(segs_.Usage(SegmentKind::kMain).used, kBlock);
  EXPECT_EQ(segs_.ReleaseDue(1000), 1u);
  EXPECT_EQ(segs_.Usage(SegmentKind::kMain).used, 0u);
}

TEST_F(SegmentManagerUnitTest, HeldRangeIsLeftOutOfUsageButNotReused) {
  const uint32_t id = Mount("a", 2 * kBlock);
  auto ps = segs_.Allocate(kBlock, 1, SegmentKind::kMain, "");
  ASSERT_EQ(ps.size(), 1u);
  segs_.Hold(ps[0]);
  EXPECT_EQ(segs_.HeldBytes(SegmentKind::kMain), kBlock);
  EXPECT_EQ(segs_.HeldBytes(SegmentKind::kPrefetchBuffer), 0u);
  EXPECT_EQ(segs_.Usage(SegmentKind::kMain).used, 0u);
  EXPECT_EQ(segs_.UsageOf(SegmentKind::kMain, "a").used, 0u);
  EXPECT_EQ(Used(id), kBlock);  // still allocated
  // Only the other half is free.
  EXPECT_EQ(segs_.Allocate(kBlock, 1, SegmentKind::kMain, "").size(), 1u);
  EXPECT_TRUE(segs_.Allocate(kBlock, 1, SegmentKind::kMain, "").empty());
  EXPECT_EQ(segs_.Usage(SegmentKind::kMain).used, kBlock);
  segs_.Unhold(ps[0]);
  segs_.Free(ps[0]);
  EXPECT_EQ(segs_.HeldBytes(SegmentKind::kMain), 0u);
  EXPECT_EQ(segs_.Usage(SegmentKind::kMain).used, kBlock);
  EXPECT_EQ(segs_.Allocate(kBlock, 1, SegmentKind::kMain, "").size(), 1u);
}

TEST_F(SegmentManagerUnitTest, UsageAddsUpPerKindAndNode) {
  Mount("a", kCap);
  Mount("b", 2 * kCap);
  Mount("a", kCap, SegmentKind::kPrefetchBuffer);
  ASSERT_TRUE(segs_.AllocateOn(kBlock, SegmentKind::kMain, "a").has_value());
  ASSERT_TRUE(
      segs_.AllocateOn(2 * kBlock, SegmentKind::kMain, "b").has_value());
  ASSERT_TRUE(
      segs_.AllocateOn(kBlock, SegmentKind::kPrefetchBuffer, "a").has_value());
  const SegmentUsage main = segs_.Usage(SegmentKind::kMain);
  EXPECT_EQ(main.capacity, 3 * kCap);
  EXPECT_EQ(main.used, 3 * kBlock);
  EXPECT_DOUBLE_EQ(main.ratio(), double(3 * kBlock) / double(3 * kCap));
  const SegmentUsage a = segs_.UsageOf(SegmentKind::kMain, "a");
  EXPECT_EQ(a.capacity, kCap);
  EXPECT_EQ(a.used, kBlock);
  const SegmentUsage buf = segs_.Usage(SegmentKind::kPrefetchBuffer);
  EXPECT_EQ(buf.capacity, kCap);
  EXPECT_EQ(buf.used, kBlock);
  EXPECT_EQ(segs_.UsageOf(SegmentKind::kMain, "nobody").capacity, 0u);
  EXPECT_DOUBLE_EQ(SegmentUsage{}.ratio(), 0.0);
}

TEST_F(SegmentManagerUnitTest, AllocateAtTakesExactlyAFreeRange) {
  const uint32_t id = Mount("a");
  auto p = segs_.AllocateAt(id, 2 * kBlock, kBlock);
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->segment, id);
  EXPECT_EQ(p->offset, 2 * kBlock);
  EXPECT_FALSE(segs_.AllocateAt(id, 2 * kBlock, kBlock).has_value());  // taken
  EXPECT_FALSE(segs_.AllocateAt(id, kCap, kBlock).has_value());     // past end
  EXPECT_FALSE(segs_.AllocateAt(id + 100, 0, kBlock).has_value());  // unknown
  segs_.Free(*p);
  EXPECT_TRUE(segs_.AllocateAt(id, 2 * kBlock, kBlock).has_value());
}

TEST_F(SegmentManagerUnitTest, AllocateAllOfTakesEveryFreeByte) {
  const uint32_t id = Mount("a");
  auto mid = segs_.AllocateAt(id, 4 * kBlock, kBlock);
  ASSERT_TRUE(mid.has_value());
  auto all = segs_.AllocateAllOf(id);
  EXPECT_FALSE(all.empty());
  EXPECT_EQ(Used(id), kCap);
  EXPECT_TRUE(segs_.Allocate(64, 1, SegmentKind::kMain, "").empty());
  for (const auto& p : all) segs_.Free(p);
  EXPECT_EQ(Used(id), kBlock);
  EXPECT_TRUE(segs_.AllocateAllOf(id + 100).empty());
}

}  // namespace
}  // namespace kvpool
