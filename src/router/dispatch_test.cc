// PickEngine, the router's dispatch policy, without a cluster.
#include "router/dispatch.h"

#include <gtest/gtest.h>

#include <algorithm>

#include <string>
#include <vector>

namespace kvpool {
namespace {

constexpr double kPure = -1;  // pure affinity

EngineInfo At(std::string id, std::vector<std::string> nodes) {
  return EngineInfo{std::move(id), std::move(nodes), ""};
}

// ---- pure affinity (a negative weight): the policy before the cost ----

TEST(DispatchPolicyTest, EngineLocalToTheTopHolderWinsOverLoad) {
  std::vector<EngineInfo> e = {At("e0", {"n0"}), At("e1", {"n1"})};
  auto c = PickEngine(e, {0, 9}, {"n1", "n1", "n0"}, kPure);
  EXPECT_EQ(c.engine, 1);
  EXPECT_TRUE(c.affinity);
}

TEST(DispatchPolicyTest, HolderWithoutAnEngineDoesNotShadowASmallerOne) {
  std::vector<EngineInfo> e = {At("e0", {"n0"}), At("e1", {})};
  auto c = PickEngine(e, {5, 0}, {"n9", "n9", "n9", "n0"}, kPure);
  EXPECT_EQ(c.engine, 0);
  EXPECT_TRUE(c.affinity);
}

TEST(DispatchPolicyTest, LeastLoadedAmongLocalEnginesThenConfigOrder) {
  std::vector<EngineInfo> e = {At("e0", {"n0"}), At("e1", {"n0"}),
                               At("e2", {"n0"})};
  EXPECT_EQ(PickEngine(e, {3, 1, 2}, {"n0"}, kPure).engine, 1);
  EXPECT_EQ(PickEngine(e, {2, 1, 1}, {"n0"}, kPure).engine, 1);
  // Two holders tied on block count: their engines compete on load.
  std::vector<EngineInfo> t = {At("a", {"n0"}), At("b", {"n1"})};
  EXPECT_EQ(PickEngine(t, {4, 2}, {"n0", "n1"}, kPure).engine, 1);
}

TEST(DispatchPolicyTest, NoLocalEngineFallsBackToLeastLoaded) {
  std::vector<EngineInfo> e = {At("e0", {"n0"}), At("e1", {"n1"})};
  for (double w : {kPure, 0.0, 4.0}) {
    auto c = PickEngine(e, {2, 1}, {"n7"}, w);
    EXPECT_EQ(c.engine, 1) << w;
    EXPECT_FALSE(c.affinity) << w;
    EXPECT_EQ(PickEngine(e, {1, 1}, {}, w).engine, 0) << w;
    EXPECT_EQ(PickEngine({}, {}, {"n0"}, w).engine, -1) << w;
  }
}

// ---- the cost: load against affinity ----

TEST(DispatchPolicyTest, AffinityHoldsUntilTheGapPassesTheWeightTimesTheLoad) {
  std::vector<EngineInfo> e = {At("e0", {"n0"}), At("e1", {"n1"})};
  // Every block on n0: e0 costs its load, e1 its load + 0.5 x the mean
  // load (at least 0.5).
  const std::vector<std::string> on_n0 = {"n0", "n0", "n0"};
  EXPECT_EQ(PickEngine(e, {1, 1}, on_n0, 0.5).engine, 0);  // 1 < 1.5
  EXPECT_TRUE(PickEngine(e, {1, 1}, on_n0, 0.5).affinity);
  EXPECT_EQ(PickEngine(e, {1, 0}, on_n0, 0.5).engine, 1);  // 1 > 0.5
  // At ten requests per engine, five of gap.
  EXPECT_EQ(PickEngine(e, {12, 8}, on_n0, 0.5).engine, 0);  // 12 < 8 + 5
  auto c = PickEngine(e, {14, 8}, on_n0, 0.5);              // 14 > 8 + 5.5
  EXPECT_EQ(c.engine, 1);
  EXPECT_FALSE(c.affinity);
  // A tie stays with the engine holding more of the prefix.
  EXPECT_EQ(PickEngine(e, {5, 3}, on_n0, 0.5).engine, 0);  // 5 = 3 + 0.5 x 4
  // Pure affinity never leaves n0's engine.
  EXPECT_EQ(PickEngine(e, {50, 0}, on_n0, kPure).engine, 0);
}

TEST(DispatchPolicyTest, ThePullOfAffinityGrowsWithTheShareOfThePrefix) {
  std::vector<EngineInfo> e = {At("e0", {"n0"}), At("e1", {"n1"})};
  // Mean load 1.5, weight 8: a pull of 12. 3 of 4 blocks on n0: e0 costs
  // 2 + 12 x 1/4 = 5, e1 1 + 12 x 3/4 = 10.
  EXPECT_EQ(PickEngine(e, {2, 1}, {"n0", "n0", "n0", "n1"}, 8).engine, 0);
  // 1 of 4 on n0: e0 2 + 9 = 11, e1 1 + 3 = 4.
  EXPECT_EQ(PickEngine(e, {2, 1}, {"n0", "n1", "n1", "n1"}, 8).engine, 1);
  // A shared first block alone: e0 costs 2, e1 1 + 1.5 with weight 1; with
  // weight 0.5, 1 + 0.75: load wins.
  EXPECT_EQ(PickEngine(e, {2, 1}, {"n0"}, 1).engine, 0);
  EXPECT_EQ(PickEngine(e, {2, 1}, {"n0"}, 0.5).engine, 1);
}

TEST(DispatchPolicyTest, WeightZeroIsLeastLoaded) {
  std::vector<EngineInfo> e = {At("e0", {"n0"}), At("e1", {"n1"}),
                               At("e2", {"n2"})};
  EXPECT_EQ(PickEngine(e, {3, 2, 1}, {"n0", "n0"}, 0).engine, 2);
  // Equal loads: the engine holding the prefix.
  EXPECT_EQ(PickEngine(e, {1, 1, 1}, {"n1", "n1"}, 0).engine, 1);
}

// The failure the cost is for: every request begins with one shared block
// on n0 and, under affinity, its new blocks are written where it ran.
// Dispatched one after another with nothing finishing, pure affinity sends
// all to e0; the cost keeps the engines within a share of each other.
TEST(DispatchPolicyTest, ASharedFirstBlockDoesNotPullEveryRequestToOneEngine) {
  std::vector<EngineInfo> e = {At("e0", {"n0"}), At("e1", {"n1"})};
  for (double w : {kPure, 0.25}) {
    std::vector<uint64_t> in_flight = {0, 0};
    for (int r = 0; r < 40; ++r) {
      const int k = PickEngine(e, in_flight, {"n0"}, w).engine;
      ASSERT_GE(k, 0);
      ++in_flight[size_t(k)];
    }
    if (w < 0) {
      EXPECT_EQ(in_flight[0], 40u);
    } else {
      // Within a quarter of the mean load of each other, about.
      const uint64_t hi = std::max(in_flight[0], in_flight[1]);
      const uint64_t lo = std::min(in_flight[0], in_flight[1]);
      EXPECT_LE(double(hi), 1.35 * double(lo))
          << in_flight[0] << " / " << in_flight[1];
    }
  }
}

}  // namespace
}  // namespace kvpool
