#include "common/metrics.h"

#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <thread>

namespace kvpool {

TEST(Metrics, CountersAndGaugesRender) {
  MetricsRegistry m;
  m.GetCounter("kvpool_puts_total", "result=\"ok\"", "puts").Inc(3);
  m.GetCounter("kvpool_puts_total", "result=\"ok\"").Inc();
  m.AddGauge("kvpool_objects", "", [] { return 7.0; });
  EXPECT_EQ(m.CounterValue("kvpool_puts_total", "result=\"ok\""), 4u);
  EXPECT_EQ(m.CounterValue("missing"), 0u);
  std::string text = m.RenderPrometheus();
  EXPECT_NE(text.find("kvpool_puts_total{result=\"ok\"} 4"), std::string::npos);
  EXPECT_NE(text.find("# TYPE kvpool_objects gauge"), std::string::npos);
  EXPECT_NE(text.find("kvpool_objects 7"), std::string::npos);
}

TEST(Metrics, GaugeCallbacksRunOutsideTheRegistryLock) {
  // A gauge may take locks whose holders count into this registry (the
  // master's object gauges and its shard locks), so rendering must not hold
  // the registry's own lock while it calls one. Here the gauge counts into
  // the registry itself: with the lock held it would deadlock.
  auto* m = new MetricsRegistry;  // not freed if rendering hangs
  m->AddGauge("kvpool_g", "", [m] {
    m->GetCounter("kvpool_from_gauge").Inc();
    return 2.0;
  });
  std::promise<std::string> rendered;
  std::future<std::string> text = rendered.get_future();
  std::thread([m, p = std::move(rendered)]() mutable {
    p.set_value(m->RenderPrometheus());
  }).detach();
  ASSERT_EQ(text.wait_for(std::chrono::seconds(30)), std::future_status::ready)
      << "RenderPrometheus deadlocked on a gauge that counts";
  EXPECT_NE(text.get().find("kvpool_g 2"), std::string::npos);
  EXPECT_EQ(m->CounterValue("kvpool_from_gauge"), 1u);
  delete m;
}

TEST(Metrics, HistogramsRenderBucketsSumAndCount) {
  MetricsRegistry m;
  Histogram& h = m.GetHistogram("kvpool_op_seconds", "op=\"get\",path=\"shm\"",
                                {0.001, 0.01, 0.1}, "op time");
  EXPECT_EQ(&h, &m.GetHistogram("kvpool_op_seconds", "op=\"get\",path=\"shm\"",
                                {0.001, 0.01, 0.1}));
  h.Observe(0.0005);
  h.Observe(0.05);
  h.Observe(5);
  EXPECT_EQ(m.HistogramCount("kvpool_op_seconds", "op=\"get\",path=\"shm\""),
            3u);
  EXPECT_EQ(m.HistogramCount("kvpool_op_seconds", "op=\"put\""), 0u);
  const std::string text = m.RenderPrometheus();
  EXPECT_NE(text.find("# TYPE kvpool_op_seconds histogram"), std::string::npos)
      << text;
  // Cumulative buckets: 1 under 1 ms, 1 under 10 ms, 2 under 100 ms, 3 in all.
  EXPECT_NE(
      text.find(
          "kvpool_op_seconds_bucket{op=\"get\",path=\"shm\",le=\"0.01\"} 1"),
      std::string::npos)
      << text;
  EXPECT_NE(
      text.find(
          "kvpool_op_seconds_bucket{op=\"get\",path=\"shm\",le=\"0.1\"} 2"),
      std::string::npos)
      << text;
  EXPECT_NE(
      text.find(
          "kvpool_op_seconds_bucket{op=\"get\",path=\"shm\",le=\"+Inf\"} 3"),
      std::string::npos)
      << text;
  EXPECT_NE(text.find("kvpool_op_seconds_count{op=\"get\",path=\"shm\"} 3"),
            std::string::npos)
      << text;
}

TEST(Metrics, CounterVecFindsTheSeriesOfEachValue) {
  MetricsRegistry m;
  CounterVec v(&m, "kvpool_fate_total", "fate", "fates");
  v.With("landed").Inc();
  v.With("landed").Inc(2);
  v.With("expired").Inc();
  EXPECT_EQ(&v.With("landed"),
            &m.GetCounter("kvpool_fate_total", "fate=\"landed\""));
  EXPECT_EQ(m.CounterValue("kvpool_fate_total", "fate=\"landed\""), 3u);
  EXPECT_EQ(m.CounterValue("kvpool_fate_total", "fate=\"expired\""), 1u);
  // More values than the vector caches: still counted, through the registry.
  static const char* kMany[] = {"a", "b", "c", "d", "e", "f", "g", "h", "i",
                                "j", "k", "l", "m", "n", "o", "p", "q", "r"};
  for (const char* value : kMany) v.With(value).Inc();
  for (const char* value : kMany) v.With(value).Inc();
  EXPECT_EQ(m.CounterValue("kvpool_fate_total", "fate=\"r\""), 2u);
  EXPECT_NE(m.RenderPrometheus().find("kvpool_fate_total{fate=\"r\"} 2"),
            std::string::npos);
}

TEST(Metrics, BucketSetsIncrease) {
  for (const auto* b : {&LatencyBucketsSeconds(), &SizeBucketsBytes()}) {
    ASSERT_FALSE(b->empty());
    for (size_t i = 1; i < b->size(); ++i) EXPECT_LT((*b)[i - 1], (*b)[i]);
  }
  EXPECT_DOUBLE_EQ(LatencyBucketsSeconds().front(), 10e-6);
  EXPECT_GT(LatencyBucketsSeconds().back(), 10.0);
  EXPECT_EQ(SizeBucketsBytes().front(), 512.0);
}

}  // namespace kvpool
