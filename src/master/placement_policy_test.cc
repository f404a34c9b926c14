#include "master/placement_policy.h"

#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/clock.h"
#include "master/object_store.h"

namespace kvpool {
namespace {

constexpr uint64_t kKiB = 1024;

// The policy over real segments, a real node registry and a real offload
// scheduler; eviction is a callback the test scripts.
class PlacementPolicyTest : public ::testing::Test {
 protected:
  PlacementPolicyTest()
      : objects_(std::make_unique<ObjectStore>()),
        segments_(SegmentManager::Strategy::kFreeRatioFirst),
        nodes_(&clock_),
        offloads_(OffloadScheduler::Options{}, &clock_, segments_, nodes_,
                  metrics_, [](uint32_t) { return std::string("t"); }) {
    Make({});
  }

  void Make(PlacementPolicy::Options options) {
    policy_ = std::make_unique<PlacementPolicy>(
        options, segments_, nodes_, offloads_, metrics_,
        [this](uint64_t bytes, const std::vector<uint32_t>&) {
          evict_requests_.push_back(bytes);
          return on_evict_ ? on_evict_() : 0;
        });
  }

  // A node with one segment of `kind`; returns the segment's id.
  uint32_t Mount(const std::string& node, uint64_t capacity,
                 SegmentKind kind = SegmentKind::kMain) {
    nodes_.Register(node, node + ":1", "host-" + node, /*ssd_enabled=*/true);
    SegmentInfo info;
    info.node_id = node;
    info.kind = kind;
    info.capacity = capacity;
    auto r = segments_.Mount(info);
    EXPECT_TRUE(r.ok());
    return r.ok() ? r.value() : 0;
  }

  // Takes every 1 KiB range MAIN segments have left.
  std::vector<Placement> FillMain() {
    std::vector<Placement> taken;
    for (;;) {
      auto p = segments_.Allocate(kKiB, 1, SegmentKind::kMain,
                                  std::vector<std::string>{});
      if (p.empty()) return taken;
      taken.push_back(p[0]);
    }
  }

  std::vector<Placement> Allocate(
      uint64_t size, int replicas = 1, std::string preferred = "",
      const std::vector<std::string>& preferred_nodes = {},
      const std::vector<std::string>& excluded = {}) {
    return policy_->Allocate(PlacementPolicy::Request{
        .size = size,
        .replica_num = replicas,
        .preferred_node = preferred,
        .preferred_nodes = preferred_nodes,
        .excluded_nodes = excluded,
    });
  }

  std::string NodeOf(const Placement& p) {
    auto info = segments_.Info(p.segment);
    return info ? info->node_id : "";
  }

  // An offload in flight: a COMPLETE object on `node` queued for its SSD.
  void StartOffload(const std::string& node) {
    auto p = segments_.Allocate(kKiB, 1, SegmentKind::kMain,
                                std::vector<std::string>{node});
    ASSERT_EQ(p.size(), 1u);
    ObjectKey key{0, "offloading"};
    auto& shard = objects_->ShardFor(key);
    MutexLock lock(&shard.mu());
    // Filled in place, as offload_scheduler_test.cc does (GCC 12).
    ObjectMeta& m = shard.objects()[key];
    m.size = kKiB;
    m.version = 1;
    m.replicas.push_back(Replica{p[0].offset, p[0].segment, p[0].handle,
                                 ReplicaKind::kMemory,
                                 ReplicaStatus::kComplete});
    ASSERT_TRUE(offloads_.Queue(shard, key, m));
    ASSERT_EQ(offloads_.in_flight(), 1);
  }

  uint64_t Counter(const std::string& name) {
    return metrics_.CounterValue(name);
  }

  FakeClock clock_;
  std::unique_ptr<ObjectStore> objects_;
  SegmentManager segments_;
  NodeRegistry nodes_;
  MetricsRegistry metrics_;
  OffloadScheduler offloads_;
  std::unique_ptr<PlacementPolicy> policy_;
  std::vector<uint64_t> evict_requests_;
  std::function<uint64_t()> on_evict_;
};

TEST_F(PlacementPolicyTest, MainDramFirst) {
  const uint32_t buffer = Mount("a", 64 * kKiB, SegmentKind::kPrefetchBuffer);
  const uint32_t main = Mount("b", 64 * kKiB);
  auto p = Allocate(kKiB);
  ASSERT_EQ(p.size(), 1u);
  EXPECT_EQ(p[0].segment, main);
  EXPECT_NE(p[0].segment, buffer);
  EXPECT_TRUE(evict_requests_.empty());
  EXPECT_EQ(Counter("kvpool_master_put_evictions_total"), 0u);
  EXPECT_EQ(Counter("kvpool_master_put_buffer_overflow_total"), 0u);
}

TEST_F(PlacementPolicyTest, PreferredNodesAreHonouredInOrder) {
  Mount("a", 64 * kKiB);
  Mount("b", 64 * kKiB);
  Mount("c", 64 * kKiB);
  auto p = Allocate(kKiB, 1, "b");
  ASSERT_EQ(p.size(), 1u);
  EXPECT_EQ(NodeOf(p[0]), "b");
  p = Allocate(kKiB, 1, "", {"c"});
  ASSERT_EQ(p.size(), 1u);
  EXPECT_EQ(NodeOf(p[0]), "c");
  // preferred_node, then preferred_nodes in order.
  p = Allocate(kKiB, 2, "c", {"a"});
  ASSERT_EQ(p.size(), 2u);
  EXPECT_EQ(NodeOf(p[0]), "c");
  EXPECT_EQ(NodeOf(p[1]), "a");
}

TEST_F(PlacementPolicyTest, ExcludedNodeIsAvoidedUntilItHeartbeats) {
  Mount("a", 64 * kKiB);
  Mount("b", 64 * kKiB);
  auto p = Allocate(kKiB, 1, "a", {}, {"a"});
  ASSERT_EQ(p.size(), 1u);
  EXPECT_EQ(NodeOf(p[0]), "b");
  // Reported to the registry: later puts avoid it too, even preferring it.
  EXPECT_EQ(nodes_.Unreachable(), std::vector<std::string>{"a"});
  p = Allocate(kKiB, 2, "a");
  ASSERT_EQ(p.size(), 1u);
  EXPECT_EQ(NodeOf(p[0]), "b");
  ASSERT_TRUE(nodes_.Touch("a"));
  p = Allocate(kKiB, 1, "a");
  ASSERT_EQ(p.size(), 1u);
  EXPECT_EQ(NodeOf(p[0]), "a");
}

TEST_F(PlacementPolicyTest, UnreachableNodeIsNeverUsedEvenWhenOnlyItHasRoom) {
  Mount("a", 64 * kKiB);
  nodes_.ReportUnreachable("a");
  EXPECT_TRUE(Allocate(kKiB).empty());
  // It looked for room by evicting rather than place there.
  EXPECT_EQ(evict_requests_.size(), 1u);
}

TEST_F(PlacementPolicyTest, EvictsWhenMainIsFullAndPlacesAfterIt) {
  PlacementPolicy::Options options;
  options.eviction_ratio = 0.5;
  Make(options);
  const uint32_t main = Mount("a", 8 * kKiB);
  std::vector<Placement> taken = FillMain();
  ASSERT_FALSE(taken.empty());
  on_evict_ = [&] {
    segments_.Free(taken.back());
    return kKiB;
  };
  auto p = Allocate(kKiB);
  ASSERT_EQ(p.size(), 1u);
  EXPECT_EQ(p[0].segment, main);
  // One pass, asking for eviction_ratio of the capacity (more than the put).
  ASSERT_EQ(evict_requests_.size(), 1u);
  EXPECT_EQ(evict_requests_[0], 4 * kKiB);
  EXPECT_EQ(Counter("kvpool_master_put_evictions_total"), 1u);
  EXPECT_EQ(Counter("kvpool_master_put_buffer_overflow_total"), 0u);
  EXPECT_EQ(Counter("kvpool_master_put_waited_for_offload_total"), 0u);
}

// Every MAIN segment closed (re-mounted, in its lease hold or awaiting its
// directory, as all are right after a new leader takes over): the put
// fails, and nothing is evicted -- no eviction opens a closed segment, and
// a pass then could reach values that are coming back just then.
TEST_F(PlacementPolicyTest, NoEvictionWhileEveryMainSegmentIsClosed) {
  const uint32_t a = Mount("a", 4 * kKiB);
  segments_.SetClosed(a, true);
  EXPECT_TRUE(policy_->Allocate({.size = kKiB}).empty());
  EXPECT_TRUE(evict_requests_.empty());
  EXPECT_EQ(Counter("kvpool_master_put_evictions_total"), 0u);
}

TEST_F(PlacementPolicyTest, EvictionAsksAtLeastThePutsSize) {
  Mount("a", 8 * kKiB);  // eviction_ratio 0.05 of it is under 1 KiB
  FillMain();
  EXPECT_TRUE(Allocate(kKiB).empty());
  ASSERT_EQ(evict_requests_.size(), 1u);
  EXPECT_EQ(evict_requests_[0], kKiB);
}

TEST_F(PlacementPolicyTest, OverflowsIntoAPrefetchBufferWhenEvictionFreesNone) {
  Mount("a", 8 * kKiB);
  const uint32_t buffer = Mount("b", 8 * kKiB, SegmentKind::kPrefetchBuffer);
  FillMain();
  auto p = Allocate(kKiB);
  ASSERT_EQ(p.size(), 1u);
  EXPECT_EQ(p[0].segment, buffer);
  EXPECT_EQ(evict_requests_.size(), 1u);  // eviction came first
  EXPECT_EQ(Counter("kvpool_master_put_buffer_overflow_total"), 1u);
  // Both tiers full: no room, and no overflow counted.
  while (!segments_
              .Allocate(kKiB, 1, SegmentKind::kPrefetchBuffer,
                        std::vector<std::string>{})
              .empty()) {
  }
  EXPECT_TRUE(Allocate(kKiB).empty());
  EXPECT_EQ(Counter("kvpool_master_put_buffer_overflow_total"), 1u);
}

TEST_F(PlacementPolicyTest, WaitsForAnOffloadInFlightAndGivesUpAtTheDeadline) {
  PlacementPolicy::Options options;
  options.enable_offload = true;
  // Long enough that even a descheduled first pass finds it not yet over.
  options.put_offload_wait_ms = 200;
  Make(options);
  Mount("a", 8 * kKiB);
  StartOffload("a");
  FillMain();
  EXPECT_TRUE(Allocate(kKiB).empty());
  // It evicted again after waiting, then gave up: no overflow without a
  // buffer, and the wait is counted.
  EXPECT_GE(evict_requests_.size(), 2u);
  EXPECT_EQ(Counter("kvpool_master_put_waited_for_offload_total"), 1u);
  EXPECT_EQ(Counter("kvpool_master_put_evictions_total"), 1u);
}

TEST_F(PlacementPolicyTest, WaitsForAnOffloadInFlightAndPlacesOnceRoomComes) {
  PlacementPolicy::Options options;
  options.enable_offload = true;
  options.put_offload_wait_ms = 60'000;  // never reached: room comes first
  Make(options);
  const uint32_t main = Mount("a", 8 * kKiB);
  StartOffload("a");
  std::vector<Placement> taken = FillMain();
  ASSERT_FALSE(taken.empty());
  // The first pass finds nothing evictable (the offload pins it); by the
  // next one the offload's result has made room.
  on_evict_ = [&]() -> uint64_t {
    if (evict_requests_.size() < 2) return 0;
    segments_.Free(taken.back());
    return kKiB;
  };
  auto p = Allocate(kKiB);
  ASSERT_EQ(p.size(), 1u);
  EXPECT_EQ(p[0].segment, main);
  EXPECT_EQ(evict_requests_.size(), 2u);
  EXPECT_EQ(Counter("kvpool_master_put_waited_for_offload_total"), 1u);
}

TEST_F(PlacementPolicyTest, WithOffloadOffAnOffloadInFlightIsNotWaitedFor) {
  Mount("a", 8 * kKiB);
  StartOffload("a");
  FillMain();
  EXPECT_TRUE(Allocate(kKiB).empty());
  EXPECT_EQ(evict_requests_.size(), 1u);
  EXPECT_EQ(Counter("kvpool_master_put_waited_for_offload_total"), 0u);
}

}  // namespace
}  // namespace kvpool
