#include "replay/report_bound.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace kvpool::replay {
namespace {

// A routed request over trace[index]: `tiers` one char per block ('S'
// SSD-only), every block held by `holders` in turn, routed at `route_s`
// and read (all blocks) from `get_s`.
RequestRecord Routed(size_t index, const std::string& tiers, double route_s,
                     double get_s, std::vector<std::string> holders = {"a"}) {
  RequestRecord r;
  r.index = index;
  r.route.routed = true;
  r.route.routed_s = route_s;
  r.get_start_s = get_s;
  for (size_t j = 0; j < tiers.size(); ++j) {
    r.route.tiers.push_back(tiers[j]);
    r.route.holders.push_back(holders[j % holders.size()]);
  }
  r.read_ok = uint32_t(tiers.size());
  return r;
}

TEST(ReachBoundTest, OneHolderReadsARequestsBlocksBackToBack) {
  std::vector<TraceRequest> trace = {{0, 0, 0, {1, 2, 3}}};
  // 25 ms window, 10 ms per block: two of three land on one disk ...
  ReachBound one =
      ReachableBeforeGet({Routed(0, "SSS", 1.0, 1.025)}, trace, 0.010);
  EXPECT_EQ(one.blocks, 3u);
  EXPECT_EQ(one.reachable, 2u);
  // ... all three on three disks, none in a window shorter than a read.
  EXPECT_EQ(ReachableBeforeGet({Routed(0, "SSS", 1.0, 1.025, {"a", "b", "c"})},
                               trace, 0.010)
                .reachable,
            3u);
  EXPECT_EQ(ReachableBeforeGet({Routed(0, "SSS", 1.0, 1.005)}, trace, 0.010)
                .reachable,
            0u);
}

TEST(ReachBoundTest, OnlySsdOnlyBlocksCountAndAnUnreadRequestReachesNone) {
  std::vector<TraceRequest> trace = {{0, 0, 0, {1, 2, 3}}};
  ReachBound b = ReachableBeforeGet({Routed(0, "MSP", 1.0, 2.0)}, trace, 0.010);
  EXPECT_EQ(b.blocks, 1u);
  EXPECT_EQ(b.reachable, 1u);
  ReachBound never =
      ReachableBeforeGet({Routed(0, "SS", 1.0, 0)}, trace, 0.010);
  EXPECT_EQ(never.blocks, 2u);
  EXPECT_EQ(never.reachable, 0u);
  RequestRecord unrouted = Routed(0, "SS", 1.0, 2.0);
  unrouted.route.routed = false;
  EXPECT_EQ(ReachableBeforeGet({unrouted}, trace, 0.010).blocks, 0u);
}

TEST(ReachBoundTest, AnEarlierRouteOfTheSameBlockStartsItsPromotion) {
  // Block 7 routed SSD-only at 1.0 by request 0 (read only at 3.0), then at
  // 2.0 by request 1, which reads it 5 ms later: 10 ms reads make it only
  // from the earlier trigger.
  std::vector<TraceRequest> trace = {{0, 0, 0, {7}}, {0, 0, 0, {7}}};
  std::vector<RequestRecord> recs = {Routed(0, "S", 1.0, 3.0),
                                     Routed(1, "S", 2.0, 2.005)};
  ReachBound b = ReachableBeforeGet(recs, trace, 0.010);
  EXPECT_EQ(b.blocks, 2u);
  EXPECT_EQ(b.reachable, 2u);
}

TEST(ReachBoundTest, AReadOrAnotherTierStartsANewTrigger) {
  std::vector<TraceRequest> trace = {{0, 0, 0, {7}}, {0, 0, 0, {7}}};
  // Read at 1.5 between the routes: the later request's own route counts.
  std::vector<RequestRecord> read_between = {Routed(0, "S", 1.0, 1.5),
                                             Routed(1, "S", 2.0, 2.005)};
  EXPECT_EQ(ReachableBeforeGet(read_between, trace, 0.010).reachable, 1u);
  // Seen in DRAM at 1.5 (a third route) and SSD-only again at 2.0.
  trace.push_back({0, 0, 0, {7}});
  std::vector<RequestRecord> seen_in_dram = {Routed(0, "S", 1.0, 3.0),
                                             Routed(2, "M", 1.5, 3.0),
                                             Routed(1, "S", 2.0, 2.005)};
  ReachBound b = ReachableBeforeGet(seen_in_dram, trace, 0.010);
  EXPECT_EQ(b.blocks, 2u);
  EXPECT_EQ(b.reachable, 1u);  // request 0's block only
}

TEST(ReachBoundTest, ABlockOutsideTheTraceIsCountedNotReachable) {
  std::vector<TraceRequest> trace = {{0, 0, 0, {1}}};
  ReachBound b = ReachableBeforeGet({Routed(5, "SS", 1.0, 2.0)}, trace, 0.010);
  EXPECT_EQ(b.blocks, 2u);
  EXPECT_EQ(b.reachable, 0u);
}

TEST(ReachSharingDisksTest, RequestsRoutedTogetherQueueOnOneDisk) {
  std::vector<TraceRequest> trace = {{0, 0, 0, {1, 2}}, {0, 0, 0, {3, 4}}};
  // Each alone lands both of its blocks in 25 ms at 10 ms a read ...
  std::vector<RequestRecord> recs = {Routed(0, "SS", 1.0, 1.025, {"a"}),
                                     Routed(1, "SS", 1.001, 1.026, {"b"})};
  EXPECT_EQ(ReachableBeforeGet(recs, trace, 0.010).reachable, 4u);
  // ... on a disk per holder too; on one disk the second request's reads
  // wait for the first's (done at 1.030 and 1.040).
  ReachBound per_holder = ReachableSharingDisks(recs, trace, 0.010, false);
  EXPECT_EQ(per_holder.blocks, 4u);
  EXPECT_EQ(per_holder.reachable, 4u);
  ReachBound one = ReachableSharingDisks(recs, trace, 0.010, true);
  EXPECT_EQ(one.blocks, 4u);
  EXPECT_EQ(one.reachable, 2u);
}

TEST(ReachSharingDisksTest, AGetsOtherDiskReadsGoFirstWhenAskedFirst) {
  std::vector<TraceRequest> trace = {{0, 0, 0, {1, 2, 3}}, {0, 0, 0, {4}}};
  // Request 0 reads three blocks from the SSD that were in DRAM when it
  // was routed, from 0.999: the disk is busy until 1.029, so request 1's
  // block, asked for at 1.0, ends at 1.039, after its get at 1.025.
  RequestRecord moved = Routed(0, "MMM", 0.5, 0.999);
  moved.ssd_reads = 3;
  std::vector<RequestRecord> recs = {moved, Routed(1, "S", 1.0, 1.025)};
  EXPECT_EQ(ReachableSharingDisks(recs, trace, 0.010, true).reachable, 0u);
  // Without those reads it lands.
  recs[0].ssd_reads = 0;
  EXPECT_EQ(ReachableSharingDisks(recs, trace, 0.010, true).reachable, 1u);
}

TEST(ReachSharingDisksTest, ABlockTriggeredOnceIsReadOnceForEveryRequest) {
  // Block 7, SSD-only for both routes and not read between them: one read
  // from 1.0 to 1.010 lands it for both. Block 8, asked for at 1.0005,
  // ends at 1.020, after the second get (read twice, 7 would end there).
  std::vector<TraceRequest> trace = {{0, 0, 0, {7}}, {0, 0, 0, {7, 8}}};
  std::vector<RequestRecord> recs = {Routed(0, "S", 1.0, 3.0),
                                     Routed(1, "SS", 1.0005, 1.015)};
  ReachBound b = ReachableSharingDisks(recs, trace, 0.010, true);
  EXPECT_EQ(b.blocks, 3u);
  EXPECT_EQ(b.reachable, 2u);
  // An unread request's blocks count and never land.
  recs.push_back(Routed(1, "SS", 2.5, 0));
  EXPECT_EQ(ReachableSharingDisks(recs, trace, 0.010, true).blocks, 5u);
}

}  // namespace
}  // namespace kvpool::replay
