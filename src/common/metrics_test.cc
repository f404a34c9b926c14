#include "common/metrics.h"

#include <gtest/gtest.h>

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

}  // namespace kvpool
