// End to end on a tiny trace: every phase on real LocalClusters, two arms.
#include "replay/replay.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "replay/test_trace.h"

namespace kvpool::replay {
namespace {

TEST(ReplayTest, TinyTraceRunsEveryPhaseAndReportsConsistently) {
  ReplayOptions o;
  o.trace_path = testing::WriteTinyTrace(testing::TempPath("tiny.jsonl"));
  o.measure_requests = 10;
  o.time_scale = 0.5;
  o.block_bytes = 256 << 10;
  o.engines = 2;
  o.nodes = 2;
  o.dram_per_node = 16ull << 20;
  o.ssd_per_node = 256ull << 20;
  o.heartbeat_ms = 200;
  o.arms = {"off", "router"};
  o.out_dir = testing::TempPath("out");
  o.plots = false;
  o.progress = false;
  auto r = RunReplay(o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const auto& rep = r->report;
  EXPECT_TRUE(std::filesystem::exists(r->json_path));
  EXPECT_TRUE(std::filesystem::exists(r->markdown_path));

  const auto& em = rep["engine_model"];
  EXPECT_GT(em["measured"]["ssd_ms_per_block"].get<double>(), 0);
  EXPECT_GT(em["measured"]["dram_ms_per_block"].get<double>(), 0);
  EXPECT_GT(em["prefill_block_ms"].get<double>(), 0);
  EXPECT_GT(rep["calibration"]["promotion_ceiling_per_s"].get<double>(), 0);
  EXPECT_EQ(rep["setup"]["fill_blocks"], 40);  // 10 requests x 4 fill blocks

  ASSERT_EQ(rep["arms"].size(), 2u);
  for (const auto& a : rep["arms"]) {
    SCOPED_TRACE(a["name"].get<std::string>());
    EXPECT_TRUE(a["ok"].get<bool>());
    EXPECT_EQ(a["requests"], 10);
    // Fill put every block; the overflow pushed them out of DRAM.
    EXPECT_EQ(a["fill"]["blocks"], 40);
    EXPECT_EQ(a["fill"]["failed"], 0);
    EXPECT_GT(a["overflow"]["filler_blocks"].get<uint64_t>(), 0u);
    EXPECT_TRUE(a["settled"].get<bool>());
    EXPECT_GT(a["fill_blocks_at_measure_start"]["ssd_only"].get<uint64_t>(),
              0u);
    for (const auto& [k, v] : a["checks"].items()) {
      EXPECT_TRUE(v.get<bool>()) << k;
    }
    const auto& rd = a["reads"];
    EXPECT_EQ(rd["from_dram"].get<uint64_t>() + rd["from_ssd"].get<uint64_t>(),
              rd["blocks_read"].get<uint64_t>());
    EXPECT_GT(rd["blocks_read"].get<uint64_t>(), 0u);
    EXPECT_GT(a["ttft_ms"]["p50"].get<double>(), 0);
    EXPECT_GT(a["series"]["t"].size(), 0u);
    // Every measured request is in the per-request rows.
    EXPECT_EQ(a["request_rows"].size(), 10u);
  }
  const auto& off = rep["arms"][0];
  const auto& router = rep["arms"][1];
  // Off reads the SSD-only fill blocks from SSD; the router triggered them.
  EXPECT_GT(off["reads"]["from_ssd"].get<uint64_t>(), 0u);
  EXPECT_EQ(off["triggers"]["router"]["keys"], 0);
  const auto& t = router["triggers"]["router"];
  EXPECT_GT(t["keys"].get<uint64_t>(), 0u);
  EXPECT_EQ(t["keys"], t["router_stats_triggered"]);
  const auto& p = router["promotions"];
  uint64_t fates = 0;
  for (const auto& [k, v] : p["fates"].items()) fates += v.get<uint64_t>();
  EXPECT_EQ(fates, p["landed"].get<uint64_t>());
  std::filesystem::remove_all(o.out_dir);
  std::filesystem::remove(o.trace_path);
}

}  // namespace
}  // namespace kvpool::replay
