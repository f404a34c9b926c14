// The simulation's arithmetic on tiny cases computed by hand: queue waits,
// percentiles, skew from a known key distribution, heartbeat load, the
// failover's victims and the rate at a utilisation limit.
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>
#include <set>
#include <vector>

#include "scale_sim/cost_model.h"
#include "scale_sim/report.h"
#include "scale_sim/shard_queue.h"
#include "scale_sim/simulator.h"
#include "scale_sim/slot_map.h"
#include "scale_sim/workload.h"

namespace kvpool::scale_sim {
namespace {

TEST(ShardQueueTest, OneThreadWaitsForThePreviousCall) {
  ShardQueue q(1);
  // Arrivals 0, 10, 20 µs, 15 µs each: waits 0, 5, 10.
  EXPECT_DOUBLE_EQ(q.Submit(0, 15).wait_us(), 0);
  const auto second = q.Submit(10, 15);
  EXPECT_DOUBLE_EQ(second.wait_us(), 5);
  EXPECT_DOUBLE_EQ(second.done_us, 30);
  EXPECT_DOUBLE_EQ(q.Submit(20, 15).wait_us(), 10);
  EXPECT_DOUBLE_EQ(q.busy_us(), 45);
}

TEST(ShardQueueTest, TwoThreadsServeTwoAtOnceAndTheThirdTakesTheFirstFree) {
  ShardQueue q(2);
  EXPECT_DOUBLE_EQ(q.Submit(0, 100).wait_us(), 0);
  EXPECT_DOUBLE_EQ(q.Submit(0, 40).wait_us(), 0);
  // Both busy; the one ending at 40 takes it.
  const auto third = q.Submit(10, 10);
  EXPECT_DOUBLE_EQ(third.start_us, 40);
  EXPECT_DOUBLE_EQ(third.done_us, 50);
  // An idle thread serves at once.
  EXPECT_DOUBLE_EQ(q.Submit(200, 5).wait_us(), 0);
}

TEST(PercentilesTest, NearestRank) {
  std::vector<double> v(1000);
  std::iota(v.begin(), v.end(), 1.0);  // 1..1000, shuffled order irrelevant
  std::swap(v[0], v[999]);
  const auto p = ComputePercentiles(v);
  EXPECT_DOUBLE_EQ(p.p50, 500);
  EXPECT_DOUBLE_EQ(p.p99, 990);
  EXPECT_DOUBLE_EQ(p.p999, 999);
  EXPECT_DOUBLE_EQ(p.max, 1000);
  std::vector<double> none;
  EXPECT_EQ(ComputePercentiles(none).count, 0u);
}

TEST(SlotMapTest, EqualRangesAndUniformSlots) {
  SlotMap m(4);
  for (int s = 0; s < 4; ++s) EXPECT_EQ(m.SlotsOf(s), kSlots / 4);
  std::vector<int> per(4, 0);
  for (uint64_t k = 0; k < 40000; ++k) per[m.ShardOf(k)]++;
  for (int c : per) EXPECT_NEAR(c, 10000, 400);  // ~4 sigma
  std::vector<uint16_t> owner(kSlots, 0);
  owner[5] = 2;
  SlotMap moved(owner);
  EXPECT_EQ(moved.shards(), 3);
  EXPECT_EQ(moved.SlotsOf(2), 1u);
}

CostModel SimpleCosts(double lookup_call_us) {
  CostModel c;
  c.service_threads = 1;
  c.ops[int(Op::kLookup)] = {1, lookup_call_us, 0};
  c.ops[int(Op::kGet)] = {1, 1, 0};
  c.ops[int(Op::kPut)] = {2, 1, 0};
  c.bytes_per_object = 100;
  c.heartbeat_us = 0;
  c.failover_detect_s = 1;
  c.restart_base_s = 0.5;
  c.reregister_objects_per_s = 1e6;
  return c;
}

ScenarioConfig LookupOnly(int shards, double rate, size_t requests) {
  ScenarioConfig c;
  c.shards = shards;
  c.rate = rate;
  c.requests = requests;
  c.nodes = 0;
  c.enabled = {true, false, false};
  c.warmup_fraction = 0;
  c.objects = 1e6;
  return c;
}

// Requests evenly `gap_ms` apart, each with the given blocks.
std::vector<TraceEntry> EvenTrace(
    size_t n, double gap_ms, const std::vector<std::vector<uint64_t>>& blocks) {
  std::vector<TraceEntry> t(n);
  for (size_t i = 0; i < n; ++i) {
    t[i].t_ms = double(i) * gap_ms;
    t[i].blocks = blocks[i % blocks.size()];
  }
  return t;
}

TEST(WorkloadTest, SamplesTheRateAndKeepsTheTracesSpacing) {
  // 4 requests 1 ms apart loop every 4 ms: 1000 requests/s.
  auto w = Workload::Create(EvenTrace(4, 1, {{1}, {2}, {3}, {4}}));
  ASSERT_TRUE(w.ok());
  EXPECT_DOUBLE_EQ(w->trace_rate(), 1000);
  const auto s = w->Sample(1000, 8, 7);
  ASSERT_EQ(s.size(), 8u);
  for (size_t i = 1; i < s.size(); ++i) {
    EXPECT_NEAR(s[i].t_us - s[i - 1].t_us, 1000, 1e-6);
  }
  // Ten times the rate: ten copies with keys of their own.
  const auto ten = w->Sample(10000, 4000, 7);
  EXPECT_NEAR(double(ten.size()), 4000, 40);
  std::set<uint64_t> instances;
  for (const auto& r : ten) instances.insert(r.instance >> 24);
  EXPECT_EQ(instances.size(), 10u);
  // Deterministic given the seed.
  const auto again = w->Sample(10000, 4000, 7);
  ASSERT_EQ(again.size(), ten.size());
  EXPECT_EQ(again[100].t_us, ten[100].t_us);
  EXPECT_EQ(w->KeyHash(again[100], 0), w->KeyHash(ten[100], 0));
  EXPECT_EQ(Workload::Create({}).code(), ErrorCode::INVALID_PARAMS);
}

TEST(WorkloadTest, ABlockSeenBeforeIsAGetAndANewOneAPut) {
  auto w = Workload::Create(EvenTrace(2, 1, {{1, 2}, {1, 3}}));
  ASSERT_TRUE(w.ok());
  EXPECT_FALSE(w->Seen(0, 0));
  EXPECT_FALSE(w->Seen(0, 1));
  EXPECT_TRUE(w->Seen(1, 0));
  EXPECT_FALSE(w->Seen(1, 1));
}

TEST(WorkloadTest, AGlobalBlockIsOneKeyInEveryCopy) {
  // Block 7 is in all 4 requests, block 1 in one: with global_min_refs 2,
  // block 7 is the same key in every copy of the trace, block 1 is not.
  auto w =
      Workload::Create(EvenTrace(4, 1, {{7, 1}, {7, 2}, {7, 3}, {7, 4}}), 2);
  ASSERT_TRUE(w.ok());
  const auto s = w->Sample(10000, 1000, 3);
  std::set<uint64_t> seven, first_one;
  for (const auto& r : s) {
    seven.insert(w->KeyHash(r, 0));
    if (w->entry(r).blocks[1] == 1) first_one.insert(w->KeyHash(r, 1));
  }
  EXPECT_EQ(seven.size(), 1u);
  EXPECT_GE(first_one.size(), 10u);  // ten copies, each loop its own key
}

TEST(SimulatorTest, OneShardDeterministicServiceHasTheHandComputedWaits) {
  // 8 requests 1 ms apart, each lookup 1.5 ms on one thread: request i
  // waits 0.5 i ms, so its latency is 1.5 + 0.5 i ms (1.5 .. 5.0).
  auto w = Workload::Create(EvenTrace(4, 1, {{1}, {2}, {3}, {4}}));
  ASSERT_TRUE(w.ok());
  const auto r = RunScenario(*w, SimpleCosts(1500), LookupOnly(1, 1000, 8));
  ASSERT_EQ(r.requests, 8u);
  const auto& p = r.latency_ms[int(Op::kLookup)];
  EXPECT_EQ(p.count, 8u);
  EXPECT_NEAR(p.p50, 1.5 + 0.5 * 3, 1e-9);  // 4th of 8
  EXPECT_NEAR(p.max, 5.0, 1e-9);
  // 8 x 1.5 ms of work in an 8 ms window on one thread.
  EXPECT_NEAR(r.max_util, 1.5, 1e-9);
  EXPECT_TRUE(r.saturated());
  EXPECT_DOUBLE_EQ(r.calls_per_request, 1);
  EXPECT_EQ(r.latency_ms[int(Op::kPut)].count, 0u);
}

TEST(SimulatorTest, OneHotKeyPutsAllLoadOnOneOfFourShards) {
  // Every request looks up the same block: at rate = the trace's rate
  // there is one copy, and a window inside one loop of it sees one key.
  auto w = Workload::Create(EvenTrace(400, 1, {{7}}));
  ASSERT_TRUE(w.ok());
  for (Routing routing : {Routing::kKey, Routing::kPrefix}) {
    auto c = LookupOnly(4, 1000, 400);
    c.window_start = 0;
    c.routing = routing;
    const auto r = RunScenario(*w, SimpleCosts(100), c);
    // Busiest shard / mean shard = 1 / (1/4).
    EXPECT_NEAR(r.skew, 4.0, 1e-9);
    int hot = 0;
    for (const auto& s : r.shards) hot += s.touch_fraction == 1.0;
    EXPECT_EQ(hot, 1);
    // 100 µs per request at 1000/s on one thread: 0.1 busy; util 0.5 at
    // 0.5 / 100 µs = 5000 requests/s.
    EXPECT_NEAR(r.max_util, 0.1, 1e-9);
    EXPECT_NEAR(r.RateAtUtil(0.5), 5000, 1e-6);
    // The one key is on the hot shard: its failover is 1 + 0.5 + 1M/1M s,
    // and every request in it (1000/s x 2.5 s) reaches that shard.
    EXPECT_NEAR(r.failover_s, 2.5, 1e-9);
    EXPECT_NEAR(r.failover_requests, 2500, 1e-6);
    EXPECT_DOUBLE_EQ(r.failover_fraction, 1.0);
    EXPECT_DOUBLE_EQ(r.max_shard_objects, 1e6);
  }
}

TEST(SimulatorTest, AHotKeyAndAUniqueOneSkewTwoShardsByAThird) {
  // Each request: the hot block 7 and a block of its own. Per-key routing
  // on 2 shards: the hot shard serves one call per request, the other one
  // call for the half of the requests whose own block hashes there: loads
  // 1 and 0.5, mean 0.75, skew 4/3. With the prefix tag (block 7 first)
  // everything goes to the hot shard: skew 2.
  std::vector<std::vector<uint64_t>> blocks;
  for (uint64_t i = 0; i < 4000; ++i) blocks.push_back({7, 1000 + i});
  auto w = Workload::Create(EvenTrace(4000, 1, blocks));
  ASSERT_TRUE(w.ok());
  auto c = LookupOnly(2, 1000, 4000);
  c.window_start = 0;  // one loop of the trace: one hot key
  const auto by_key = RunScenario(*w, SimpleCosts(100), c);
  EXPECT_NEAR(by_key.skew, 4.0 / 3.0, 0.03);
  EXPECT_NEAR(by_key.calls_per_request, 1.5, 0.03);
  c.routing = Routing::kPrefix;
  const auto by_prefix = RunScenario(*w, SimpleCosts(100), c);
  EXPECT_NEAR(by_prefix.skew, 2.0, 1e-9);
  EXPECT_DOUBLE_EQ(by_prefix.calls_per_request, 1);
  // Tagged at depth 1 (the request's own block), the hot block routes by
  // its key: the per-key case again.
  c.tag_depth = 1;
  const auto by_depth = RunScenario(*w, SimpleCosts(100), c);
  EXPECT_DOUBLE_EQ(by_depth.skew, by_key.skew);
  EXPECT_DOUBLE_EQ(by_depth.calls_per_request, by_key.calls_per_request);
}

TEST(SimulatorTest, HeartbeatsLoadEveryShardOrOnlyTheirGroups) {
  auto w = Workload::Create(EvenTrace(4, 1, {{1}, {2}, {3}, {4}}));
  ASSERT_TRUE(w.ok());
  auto costs = SimpleCosts(100);
  costs.service_threads = 4;
  costs.heartbeat_us = 40;
  auto c = LookupOnly(4, 1000, 400);
  c.nodes = 1000;
  // 1000 nodes once a second, 40 µs each, over 4 threads: 0.01.
  auto all = RunScenario(*w, costs, c);
  for (const auto& s : all.shards) EXPECT_NEAR(s.heartbeat_util, 0.01, 1e-12);
  c.layout = NodeLayout::kGroup;
  auto group = RunScenario(*w, costs, c);
  for (const auto& s : group.shards)
    EXPECT_NEAR(s.heartbeat_util, 0.0025, 1e-12);
}

TEST(SimulatorTest, APutIsTwoCallsPerShardAndAGetOnlyOfSeenBlocks) {
  // Request 0 holds new blocks 1, 2; request 1 holds block 1 again (a get)
  // and new block 3. One shard: request 0 makes a lookup and a put (2
  // calls), request 1 a lookup, a get and a put: 7 calls for 2 requests.
  auto w = Workload::Create(EvenTrace(2, 1, {{1, 2}, {1, 3}}));
  ASSERT_TRUE(w.ok());
  auto c = LookupOnly(1, 1000, 2);
  c.window_start = 0;
  c.enabled = {true, true, true};
  const auto r = RunScenario(*w, SimpleCosts(100), c);
  ASSERT_EQ(r.requests, 2u);
  EXPECT_DOUBLE_EQ(r.calls_per_request, 3.5);
  EXPECT_EQ(r.latency_ms[int(Op::kGet)].count, 1u);
  EXPECT_EQ(r.latency_ms[int(Op::kPut)].count, 2u);
}

TEST(SimulatorTest, TheSameSeedGivesTheSameRunAndAnotherSeedAnotherSample) {
  std::vector<std::vector<uint64_t>> blocks;
  for (uint64_t i = 0; i < 200; ++i) blocks.push_back({i % 7, 100 + i});
  auto w = Workload::Create(EvenTrace(200, 3, blocks));
  ASSERT_TRUE(w.ok());
  auto c = LookupOnly(4, 5000, 3000);
  c.enabled = {true, true, true};
  const auto costs = SimpleCosts(150);
  const auto a = RunScenario(*w, costs, c);
  const auto b = RunScenario(*w, costs, c);
  const Limits limits;
  EXPECT_EQ(ToJson({a}, {}, limits).dump(), ToJson({b}, {}, limits).dump());
  c.seed = 2;
  const auto other = RunScenario(*w, costs, c);
  EXPECT_NE(ToJson({a}, {}, limits).dump(), ToJson({other}, {}, limits).dump());
}

TEST(ReportTest, CapacityFromTheRunsAndTheLimits) {
  auto w = Workload::Create(EvenTrace(400, 1, {{7}}));
  ASSERT_TRUE(w.ok());
  const auto costs = SimpleCosts(100);
  std::vector<ScenarioResult> runs;
  for (double rate : {1000.0, 20000.0}) {
    auto c = LookupOnly(1, rate, 400);
    c.window_start = 0;
    runs.push_back(RunScenario(*w, costs, c));
  }
  Limits limits;
  limits.max_util = 0.5;
  limits.max_failover_s = 11.5;  // 10 s of re-registration: 10M objects
  limits.max_shard_gib = 1;
  const auto cap = ComputeCapacity(runs, costs, limits);
  ASSERT_EQ(cap.size(), 1u);
  EXPECT_NEAR(cap[0].rate_at_util, 5000, 1e-6);
  // 20000/s is twice what one thread serves: saturated, past any p99.
  EXPECT_DOUBLE_EQ(cap[0].rate_at_p99, 20000);
  EXPECT_NEAR(cap[0].objects_at_failover, 1e7, 1e-3);
  EXPECT_NEAR(cap[0].objects_at_memory, double(1 << 30) / 100, 1e-3);
  const auto j = ToJson(runs, cap, limits);
  EXPECT_EQ(j["runs"].size(), 2u);
  EXPECT_TRUE(j["runs"][1]["saturated"].get<bool>());
  EXPECT_NE(RunsMarkdown(runs).find("| key | 1 | 20.0 k |"), std::string::npos);
  EXPECT_NE(CapacityMarkdown(cap, limits).find("| key | 1 |"),
            std::string::npos);
  // 1e8 objects, 1e7 per master within the failover limit: 10 groups.
  const std::string verdict = VerdictMarkdown(cap, limits, 1e8);
  EXPECT_NE(verdict.find("at 5.0 k requests/s"), std::string::npos) << verdict;
  EXPECT_NE(verdict.find("at least 10 groups"), std::string::npos) << verdict;
}

}  // namespace
}  // namespace kvpool::scale_sim
