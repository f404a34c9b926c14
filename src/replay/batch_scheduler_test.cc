// The batching scheduler's arithmetic, alone and in the virtual-time
// simulation: step composition, chunked prefill under a token budget,
// admission bounds, and when KV loads start.
#include "replay/batch_scheduler.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "replay/batch_sim.h"

namespace kvpool::replay {
namespace {

SchedulerConfig Config(uint64_t budget, uint64_t seqs, uint64_t kv,
                       LoadStart ls = LoadStart::kAdmission) {
  SchedulerConfig c;
  c.max_num_batched_tokens = budget;
  c.max_num_seqs = seqs;
  c.gpu_kv_tokens = kv;
  c.load_start = ls;
  return c;
}

bool Contains(const std::vector<uint64_t>& v, uint64_t id) {
  return std::find(v.begin(), v.end(), id) != v.end();
}

// Admits `id` and completes its load with `cached` tokens.
void ArriveLoaded(BatchScheduler& s, uint64_t id, uint64_t prompt, uint64_t out,
                  uint64_t cached = 0) {
  s.Arrive(id, prompt, out);
  for (uint64_t a : s.Admit()) s.LoadDone(a, a == id ? cached : 0);
}

TEST(BatchSchedulerTest,
     PrefillUnderBudgetWithRunningDecodesTakesExpectedSteps) {
  BatchScheduler s(Config(2048, 256, 1 << 20));
  // K = 48 requests decoding (their 1-token prefills done in one step).
  for (uint64_t i = 0; i < 48; ++i) ArriveLoaded(s, i, 1, 1000);
  StepPlan p = s.PlanStep();
  EXPECT_EQ(p.tokens, 48u);
  EXPECT_EQ(s.FinishStep(p).first_token.size(), 48u);
  // A prompt of N = 5000 tokens: each step has 2048 - 48 = 2000 left for it,
  // so its prefill takes ceil(5000 / 2000) = 3 steps.
  ArriveLoaded(s, 100, 5000, 10);
  int steps = 0;
  bool first = false;
  while (!first) {
    p = s.PlanStep();
    ASSERT_FALSE(p.empty());
    EXPECT_EQ(p.decode.size(), 48u);  // decodes never starve
    ++steps;
    first = Contains(s.FinishStep(p).first_token, 100);
  }
  EXPECT_EQ(steps, 3);
}

TEST(BatchSchedulerTest, DecodeAndPrefillShareSteps) {
  BatchScheduler s(Config(100, 256, 1 << 20));
  ArriveLoaded(s, 1, 10, 3);  // prefill 10, then 2 decodes
  StepPlan p = s.PlanStep();
  EXPECT_EQ(p.tokens, 10u);
  EXPECT_TRUE(Contains(s.FinishStep(p).first_token, 1));
  ArriveLoaded(s, 2, 250, 1);
  p = s.PlanStep();
  // One decode token of 1, then 99 prefill tokens of 2.
  ASSERT_EQ(p.decode.size(), 1u);
  ASSERT_EQ(p.prefill.size(), 1u);
  EXPECT_EQ(p.prefill[0].second, 99u);
  EXPECT_EQ(p.tokens, 100u);
  s.FinishStep(p);
  p = s.PlanStep();
  StepOutcome o = s.FinishStep(p);
  EXPECT_TRUE(Contains(o.finished, 1));  // its third output token
  p = s.PlanStep();
  EXPECT_EQ(p.decode.size(), 0u);
  EXPECT_EQ(p.prefill[0].second, 250u - 99 - 99);
  o = s.FinishStep(p);
  // Output length 1: the prefill's token is the only one.
  EXPECT_TRUE(Contains(o.first_token, 2));
  EXPECT_TRUE(Contains(o.finished, 2));
}

TEST(BatchSchedulerTest, FullyCachedPromptStillComputesOneToken) {
  BatchScheduler s(Config(2048, 256, 1 << 20));
  ArriveLoaded(s, 1, 1024, 2, /*cached=*/1024);
  StepPlan p = s.PlanStep();
  EXPECT_EQ(p.tokens, 1u);
}

TEST(BatchSchedulerTest, MaxNumSeqsBoundsAdmission) {
  BatchScheduler s(Config(2048, 2, 1 << 20));
  for (uint64_t i = 0; i < 3; ++i) s.Arrive(i, 10, 5);
  auto a = s.Admit();
  EXPECT_EQ(a, (std::vector<uint64_t>{0, 1}));
  EXPECT_EQ(s.waiting(), 1u);
  for (uint64_t id : a) s.LoadDone(id, 0);
  // Still two holding GPU memory until one finishes and is released.
  EXPECT_TRUE(s.Admit().empty());
  StepPlan p = s.PlanStep();
  s.FinishStep(p);
  for (int i = 0; i < 4; ++i) {
    p = s.PlanStep();
    StepOutcome o = s.FinishStep(p);
    for (uint64_t f : o.finished) s.Release(f);
  }
  EXPECT_EQ(s.Admit(), (std::vector<uint64_t>{2}));
}

TEST(BatchSchedulerTest, GpuKvTokensBoundAdmissionInArrivalOrder) {
  BatchScheduler s(Config(2048, 256, 1000));
  s.Arrive(0, 600, 100);  // 700
  s.Arrive(1, 400, 100);  // 500: does not fit beside 0
  s.Arrive(2, 100, 100);  // 200: would fit, but may not jump ahead of 1
  EXPECT_EQ(s.Admit(), (std::vector<uint64_t>{0}));
  EXPECT_EQ(s.kv_tokens_used(), 700u);
  s.LoadDone(0, 0);
  s.Release(0);
  EXPECT_EQ(s.Admit(), (std::vector<uint64_t>{1, 2}));
  EXPECT_EQ(s.kv_tokens_used(), 700u);
  EXPECT_TRUE(s.TooLarge(1000, 1));
  EXPECT_FALSE(s.TooLarge(999, 1));
}

TEST(BatchSchedulerTest, ArrivalModeSkipsRequestsStillLoading) {
  BatchScheduler s(Config(2048, 256, 1 << 20, LoadStart::kArrival));
  s.Arrive(0, 100, 2);
  s.Arrive(1, 100, 2);
  std::vector<uint64_t> blocked;
  EXPECT_TRUE(s.Admit(&blocked).empty());  // no load done yet
  // Both would have fit: only their loads held them.
  EXPECT_EQ(blocked, (std::vector<uint64_t>{0, 1}));
  s.LoadDone(1, 0);
  EXPECT_EQ(s.Admit(), (std::vector<uint64_t>{1}));  // 1 passes 0
  s.LoadDone(0, 50);
  EXPECT_EQ(s.Admit(), (std::vector<uint64_t>{0}));
  StepPlan p = s.PlanStep();
  EXPECT_EQ(p.tokens, 100u + 50u);
}

TEST(BatchSchedulerTest, LoadingCountsAdmittedRequestsUntilTheirLoadEnds) {
  BatchScheduler s(Config(2048, 256, 1 << 20));
  s.Arrive(0, 100, 2);
  s.Arrive(1, 100, 2);
  EXPECT_EQ(s.loading(), 0u);  // waiting, not loading
  EXPECT_EQ(s.Admit(), (std::vector<uint64_t>{0, 1}));
  EXPECT_EQ(s.waiting(), 0u);
  EXPECT_EQ(s.loading(), 2u);
  s.LoadDone(1, 0);
  EXPECT_EQ(s.loading(), 1u);
  s.LoadDone(1, 0);  // a repeated report changes nothing
  EXPECT_EQ(s.loading(), 1u);
  s.Release(0);  // released while loading (the engine gave up on it)
  EXPECT_EQ(s.loading(), 0u);
  // Loads that end before admission never count.
  BatchScheduler a(Config(2048, 256, 1 << 20, LoadStart::kArrival));
  a.Arrive(0, 100, 2);
  a.LoadDone(0, 0);
  EXPECT_EQ(a.Admit(), (std::vector<uint64_t>{0}));
  EXPECT_EQ(a.loading(), 0u);
}

SimConfig Sim(const SchedulerConfig& c, int loaders = 2) {
  SimConfig s;
  s.scheduler = c;
  s.loaders = loaders;
  s.step_fixed_ms = 10;
  s.step_ms_per_token = 0.1;
  return s;
}

TEST(BatchSimTest, SlowLoadDoesNotDelayAnotherRequest) {
  SimConfig cfg = Sim(Config(2048, 256, 1 << 20));
  SimRequest fast{0, 100, 4, 0, 0.0, 0, 0};
  SimRequest slow{0, 1000, 4, 512, 500.0, 0, 0};
  SimResult alone = Simulate({fast}, 1, cfg);
  SimResult both = Simulate({slow, fast}, 1, cfg);
  // The fast one's prefill step: 10 + 0.1 x 100 ms, as when alone.
  EXPECT_DOUBLE_EQ(alone.requests[0].first_token_ms, 20.0);
  EXPECT_DOUBLE_EQ(both.requests[1].first_token_ms, 20.0);
  // The slow one joins prefill only when its load is done.
  EXPECT_DOUBLE_EQ(both.requests[0].load_done_ms, 500.0);
  EXPECT_GE(both.requests[0].first_token_ms, 500.0 + 10 + 0.1 * 488);
}

TEST(BatchSimTest, LoadStartDecidesWhenALoadBegins) {
  // GPU memory for one request at a time: the second waits for the first.
  for (LoadStart ls : {LoadStart::kAdmission, LoadStart::kArrival}) {
    SCOPED_TRACE(LoadStartName(ls));
    SimConfig cfg = Sim(Config(2048, 256, 1200, ls));
    SimRequest a{0, 1000, 3, 0, 0.0, 0, 0};
    SimRequest b{5, 1000, 3, 512, 100.0, 0, 0};
    SimResult r = Simulate({a, b}, 1, cfg);
    const auto& rb = r.requests[1];
    EXPECT_GT(rb.admit_ms, 100.0);  // after a finished: 3 steps of a
    if (ls == LoadStart::kAdmission) {
      EXPECT_DOUBLE_EQ(rb.load_start_ms, rb.admit_ms);
      EXPECT_DOUBLE_EQ(rb.load_done_ms, rb.admit_ms + 100.0);
    } else {
      // At the first step boundary after its arrival (the end of a's
      // prefill step, 10 + 0.1 x 1000 ms), long before its admission.
      EXPECT_DOUBLE_EQ(rb.load_start_ms, 110.0);
      EXPECT_DOUBLE_EQ(rb.load_done_ms, 210.0);
      EXPECT_LT(rb.load_start_ms, rb.admit_ms);
      // Admitted when loaded: its prefill step follows at once.
      EXPECT_DOUBLE_EQ(rb.first_token_ms - rb.admit_ms, 10 + 0.1 * 488);
    }
  }
}

TEST(BatchSimTest, LoadersBoundConcurrentLoads) {
  SimConfig cfg = Sim(Config(2048, 256, 1 << 20), /*loaders=*/1);
  SimRequest a{0, 100, 1, 0, 50.0, 0, 0};
  SimRequest b{0, 100, 1, 0, 50.0, 0, 0};
  SimResult r = Simulate({a, b}, 1, cfg);
  EXPECT_DOUBLE_EQ(r.requests[0].load_done_ms, 50.0);
  EXPECT_DOUBLE_EQ(r.requests[1].load_done_ms, 100.0);
}

TEST(BatchSimTest, SharedDiskServesLoadsInTurn) {
  SimConfig cfg = Sim(Config(2048, 256, 1 << 20));
  cfg.disk_ms_per_block = 2;
  // Two engines, one load each of 10 blocks at once: the disk serves the
  // second after the first.
  SimRequest a{0, 6000, 1, 5120, 0.0, 10, 0};
  SimRequest b{0, 6000, 1, 5120, 0.0, 10, 1};
  SimResult r = Simulate({a, b}, 2, cfg);
  const double first =
      std::min(r.requests[0].load_done_ms, r.requests[1].load_done_ms);
  const double second =
      std::max(r.requests[0].load_done_ms, r.requests[1].load_done_ms);
  EXPECT_DOUBLE_EQ(first, 20.0);
  EXPECT_DOUBLE_EQ(second, 40.0);
}

TEST(BatchSimTest, DiskCapBoundsTheLoadWhenItSaturatesFirst) {
  std::vector<TraceRequest> trace;
  for (int i = 0; i < 100; ++i) {
    TraceRequest t;
    t.timestamp_ms = i * 100.0;
    t.input_length = 8 * 512;
    t.output_length = 2;
    for (uint64_t b = 0; b < 8; ++b) t.hash_ids.push_back(b);  // all hits
    trace.push_back(t);
  }
  SimConfig cfg = Sim(Config(2048, 256, 1 << 20));
  cfg.disk_ms_per_block = 50;  // 400 ms of disk per request, ~20 ms of GPU
  LoadSizing l = SizeLoad(trace, 10, 100, 1, cfg, 0.9, 0.8);
  EXPECT_TRUE(l.disk_bound);
  EXPECT_NEAR(l.disk_busy, 0.8, 0.01);
  EXPECT_LT(l.gpu_busy, 0.1);
}

TEST(BatchSimTest, GpuTargetSetsTheLoadWhenTheDiskKeepsUp) {
  std::vector<TraceRequest> trace;
  for (int i = 0; i < 200; ++i) {
    TraceRequest t;
    t.timestamp_ms = i * 100.0;
    t.input_length = 2048;
    t.output_length = 20;
    t.hash_ids = {uint64_t(i % 7), uint64_t(1000 + i), uint64_t(5000 + i),
                  uint64_t(9000 + i)};
    trace.push_back(t);
  }
  SimConfig cfg = Sim(Config(2048, 256, 1 << 20));
  cfg.disk_ms_per_block = 1;
  auto busy = [&](double scale) {
    auto reqs = SimRequestsOf(trace, 50, 200, scale, 2);
    return Simulate(reqs, 2, cfg).BusyFraction(0, 149 * 100.0 * scale);
  };
  EXPECT_GT(busy(0.5), busy(2.0));
  LoadSizing l = SizeLoad(trace, 50, 200, 2, cfg, 0.6, 0.8);
  EXPECT_FALSE(l.disk_bound);
  EXPECT_NEAR(l.gpu_busy, 0.6, 0.01);
  EXPECT_LT(l.disk_busy, 0.8);
  EXPECT_NEAR(busy(l.time_scale), l.gpu_busy, 1e-9);
}

// The held-out conversation trace's shape: every request starts with the
// same block (a shared system prompt) and matches nothing else, so the
// router's affinity sends every request to the engine beside that block's
// node. Sizing the load as if requests went round robin overloads it.
TEST(BatchSimTest, RouterDispatchIsModelledAndTheBusiestEngineBoundsTheLoad) {
  std::vector<TraceRequest> trace;
  for (int i = 0; i < 300; ++i) {
    TraceRequest t;
    t.timestamp_ms = i * 100.0;
    t.input_length = 4 * 512;
    t.output_length = 30;
    t.hash_ids = {0, uint64_t(100 + 3 * i), uint64_t(101 + 3 * i),
                  uint64_t(102 + 3 * i)};
    trace.push_back(t);
  }
  SimConfig cfg = Sim(Config(2048, 256, 1 << 20));
  cfg.disk_ms_per_block = 0.01;
  cfg.nodes = 2;
  cfg.dispatch = SimDispatch::kRouter;
  cfg.affinity_weight = -1;  // pure affinity: all to block 0's engine
  auto reqs = SimRequestsOf(trace, 100, 300, 1.0, 2, 2);
  ASSERT_EQ(reqs[0].holders, std::vector<int>{0});  // block 0 came first
  SimResult r = Simulate(reqs, 2, cfg);
  for (const auto& q : r.requests) EXPECT_EQ(q.engine, 0);

  LoadSizing routed = SizeLoad(trace, 100, 300, 2, cfg, 0.7, 0.8);
  EXPECT_EQ(routed.bound, "busiest engine");
  ASSERT_EQ(routed.gpu_busy_per_engine.size(), 2u);
  EXPECT_NEAR(routed.gpu_busy_per_engine[0], kBusiestEngineCap, 0.01);
  EXPECT_EQ(routed.gpu_busy_per_engine[1], 0);
  EXPECT_LT(routed.gpu_busy, 0.7);

  // Round robin spreads the same requests: the mean target is reachable,
  // at a denser arrival rate than the routed sizing allows.
  cfg.dispatch = SimDispatch::kRoundRobin;
  LoadSizing rr = SizeLoad(trace, 100, 300, 2, cfg, 0.7, 0.8);
  EXPECT_EQ(rr.bound, "gpu");
  EXPECT_NEAR(rr.gpu_busy, 0.7, 0.01);
  EXPECT_LT(rr.time_scale, routed.time_scale);

  // The router's cost (load against affinity) spreads them as well: the
  // simulation dispatches with the weight the arms use.
  cfg.dispatch = SimDispatch::kRouter;
  cfg.affinity_weight = RouterConfig{}.affinity_weight;
  LoadSizing weighted = SizeLoad(trace, 100, 300, 2, cfg, 0.7, 0.8);
  ASSERT_EQ(weighted.gpu_busy_per_engine.size(), 2u);
  EXPECT_GT(weighted.gpu_busy_per_engine[1], 0.3);
  EXPECT_LT(weighted.time_scale, routed.time_scale);
}

TEST(BatchSimTest, LeastLoadedDispatchSpreadsRequests) {
  std::vector<SimRequest> reqs(40);
  for (size_t i = 0; i < reqs.size(); ++i) {
    reqs[i].arrival_ms = double(i);  // faster than they finish
    reqs[i].prompt_tokens = 1024;
    reqs[i].output_tokens = 50;
  }
  SimConfig cfg = Sim(Config(2048, 256, 1 << 20));
  cfg.dispatch = SimDispatch::kLeastLoaded;
  SimResult r = Simulate(reqs, 2, cfg);
  int on0 = 0;
  for (const auto& q : r.requests) on0 += q.engine == 0;
  EXPECT_EQ(on0, 20);
}

}  // namespace
}  // namespace kvpool::replay
