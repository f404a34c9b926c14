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

}  // namespace kvpool
