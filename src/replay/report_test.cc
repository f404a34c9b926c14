#include "replay/report.h"

#include "replay/replay.h"
#include "replay/report_windows.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace kvpool::replay {
namespace {

struct Fixture {
  std::vector<TraceRequest> trace;
  ReplayOptions options;
  ReplayPlan plan;
  Calibration cal;
  EngineModel model;
  std::vector<ArmResult> arms;

  Fixture() {
    trace = {
        {0, 1024, 1, {1, 2}}, {100, 1024, 1, {1, 2}}, {200, 1024, 1, {1, 2}}};
    plan = MakePlan(trace, 2);
    cal.promotion_ceiling_per_s = 250;
    model = DeriveEngineModel(HardwareModel{}, {1.0, 0.2, 16, 10});
    for (const char* name : {"off", "router"}) {
      ArmResult a;
      a.spec = *FindArm(name);
      a.node_ids = {"node0", "node1"};
      a.measure_start_s = 10;
      a.measure_end_s = 12;
      for (int i = 0; i < 2; ++i) {
        RequestRecord r;
        r.index = size_t(1 + i);
        r.arrival_s = 10 + i;
        r.ttft_ms = a.spec.router_prefetch ? 10 + i : 40 + 2 * i;
        r.blocks = r.matched = r.read_ok = 2;
        r.ssd_reads = a.spec.router_prefetch ? 0 : 2;
        r.dram_reads = 2 - r.ssd_reads;
        r.route.routed = true;
        r.route.routed_s = 10 + i;
        r.route.tiers = {'S', 'S'};
        r.route.holders = {"node0", "node1"};
        r.route_ssd_only = 2;
        r.route_ssd_read_dram = r.dram_reads;
        r.route_ssd_read_ssd = r.ssd_reads;
        r.window_ms = 5;
        a.records.push_back(r);
      }
      if (a.spec.router_prefetch) {
        a.counters.trigger_status = {{"QUEUED", 3}, {"IN_MEMORY", 1}};
        a.counters.fate = {{"read_from_dram", 2}, {"evicted_unread", 0}};
        a.at_end.promo_admitted = 3;
        a.at_end.promo_completed = 3;
        // The holders' workers read for 1.5 s and held 0.25 s for offloads.
        a.at_measure_start.node_phase_us["read"] = {1000000, 0};
        a.at_end.node_phase_us["read"] = {2000000, 500000};
        a.at_end.node_phase_us["held_offload"] = {250000, 0};
        // Over 4 s, 100 reads of 6 ms on two holders: 0.15 in flight.
        a.at_measure_start.t = 10;
        a.at_end.t = 14;
        a.at_measure_start.node_io_reads = {10, 5};
        a.at_end.node_io_reads = {70, 45};
        a.at_measure_start.node_io_read_us = {100000, 0};
        a.at_end.node_io_read_us = {460000, 240000};
      }
      for (double t : {10.0, 10.5, 11.0, 11.5, 12.0}) {
        ClusterSnapshot s;
        s.t = t;
        s.phase = "measure";
        s.main_capacity = 100;
        s.main_used = t < 11 ? 95 : 50;
        s.node_promotions_ok = {uint64_t(t - 10), 0};
        a.samples.push_back(s);
      }
      arms.push_back(a);
    }
  }

  nlohmann::json Build() {
    ReportInput in;
    in.options = &options;
    in.plan = &plan;
    in.calibration = &cal;
    in.model = &model;
    in.arms = &arms;
    return BuildReport(in);
  }
};

TEST(ReportTest, DistributionIsNearestRank) {
  auto d = Distribution({4, 1, 3, 2, 5});
  EXPECT_EQ(d["n"], 5);
  EXPECT_EQ(d["p50"], 3);
  EXPECT_EQ(d["max"], 5);
  EXPECT_EQ(d["mean"], 3);
  EXPECT_EQ(Distribution({})["n"], 0);
}

TEST(ReportTest, FieldsAreConsistent) {
  Fixture f;
  auto r = f.Build();
  ASSERT_EQ(r["arms"].size(), 2u);
  const auto& off = r["arms"][0];
  const auto& router = r["arms"][1];
  EXPECT_EQ(off["reads"]["from_ssd"], 4);
  EXPECT_EQ(router["reads"]["from_dram"], 4);
  for (const auto& a : r["arms"]) {
    for (const auto& [k, v] : a["checks"].items()) {
      EXPECT_TRUE(v.get<bool>()) << a["name"] << " " << k;
    }
  }
  EXPECT_EQ(router["triggers"]["router"]["keys"], 4);
  EXPECT_EQ(router["reads"]["promotion_phase_s"]["read"], 1.5);
  EXPECT_EQ(router["reads"]["promotion_phase_s"]["held_offload"], 0.25);
  EXPECT_EQ(router["reads"]["promotion_phase_s"]["alloc"], 0.0);
  EXPECT_EQ(off["reads"]["promotion_phase_s"]["read"], 0.0);
  EXPECT_EQ(router["reads"]["disk"]["reads"], 100);
  EXPECT_EQ(router["reads"]["disk"]["mean_ms"], 6.0);
  EXPECT_EQ(router["reads"]["disk"]["in_flight"], 0.15);
  EXPECT_TRUE(off["reads"]["disk"].empty());  // nothing timed
  // 3 landed, 2 read: 1 never read.
  EXPECT_EQ(router["promotions"]["fates"]["never_read"], 1);
  EXPECT_EQ(router["ssd_only_at_route"]["dram_share"], 1.0);
  // No get start recorded: the bound counts the blocks, reaches none.
  EXPECT_EQ(router["ssd_only_at_route"]["reachable_bound"]["blocks"], 4);
  EXPECT_EQ(router["ssd_only_at_route"]["reachable_bound"]["reachable"], 0);
  EXPECT_EQ(off["ssd_only_at_route"]["dram_share"], 0.0);
  // Watermark: 2 of 5 samples at or above 0.9.
  EXPECT_NEAR(off["m0"]["watermark"]["share_at_or_above_high"].get<double>(),
              0.4, 1e-9);
  EXPECT_EQ(off["m0"]["ssd_share_of_gets"], 1.0);
  // node0 promoted 2 blocks over the 2 s measure.
  EXPECT_EQ(off["m0"]["holders"][0]["promoted"], 0);  // at_end not set
  EXPECT_EQ(off["m0"]["holders"][0]["target_per_s"]["mean"], 1.0);
  EXPECT_EQ(r["targets"]["ssd_only_read_from_dram_met"], true);
  // p50 (nearest rank of two): 11 vs 42 ms.
  EXPECT_NEAR(r["targets"]["ttft_p50_cut_vs_off"].get<double>(), 1 - 11.0 / 42,
              1e-3);
  EXPECT_EQ(r["targets"]["ttft_p50_cut_met"], true);
  EXPECT_EQ(r["engine_model"]["recompute_over_ssd"], 3.0);
}

TEST(ReportTest, TheBoundAtAGivenReadTimeIsReportedOnlyWhenAsked) {
  Fixture f;
  auto r = f.Build();
  EXPECT_FALSE(r["arms"][1]["ssd_only_at_route"]["reachable_bound"].contains(
      "share_given"));
  f.options.bound_block_read_ms = 2.1;
  r = f.Build();
  const auto& b = r["arms"][1]["ssd_only_at_route"]["reachable_bound"];
  EXPECT_EQ(b["given_block_read_ms"], 2.1);
  EXPECT_EQ(b["blocks"], 4);
  EXPECT_EQ(b["reachable_given"], 0);  // no get start recorded
  EXPECT_EQ(b["reachable_sharing_one_disk"], 0);
  EXPECT_EQ(b["share_sharing_holder_disks"], 0.0);
  const std::string md = RenderMarkdown(r);
  EXPECT_NE(md.find("at 2.1 ms"), std::string::npos);
  EXPECT_NE(md.find("shared in route order"), std::string::npos);
}

TEST(ReportTest, BlocksNotReadAreCountedByWhatEndedThePrefix) {
  Fixture f;
  // Router arm: request 1 read 0 of 2 (its first get failed), request 2
  // read 1 of 2 without a recorded cause.
  f.arms[1].records[0].read_ok = 0;
  f.arms[1].records[0].dram_reads = 0;
  f.arms[1].records[0].read_stop = "REPLICA_IS_NOT_READY";
  f.arms[1].records[1].read_ok = 1;
  f.arms[1].records[1].dram_reads = 1;
  auto r = f.Build();
  const auto& off = r["arms"][0]["reads"];
  const auto& router = r["arms"][1]["reads"];
  EXPECT_TRUE(off["not_read_by_cause"].empty());
  EXPECT_EQ(router["found_not_read"], 3);
  EXPECT_EQ(router["not_read_by_cause"]["REPLICA_IS_NOT_READY"], 2);
  EXPECT_EQ(router["not_read_by_cause"]["unknown"], 1);
  const std::string md = RenderMarkdown(r);
  EXPECT_NE(md.find("- router: REPLICA_IS_NOT_READY 2, unknown 1"),
            std::string::npos);
  EXPECT_EQ(md.find("- off:"), std::string::npos);
}

TEST(ReportTest, PromotionYieldsToGetsCountOverTheMeasuredWindow) {
  Fixture f;
  // Two holders; what they counted before the measured window is not the
  // arm's.
  f.arms[1].at_measure_start.node_yields = {5, 1};
  f.arms[1].at_end.node_yields = {12, 4};
  f.arms[1].at_measure_start.node_yields_timed_out = {0, 0};
  f.arms[1].at_end.node_yields_timed_out = {1, 0};
  f.arms[1].at_measure_start.node_yield_wait_us = {1000, 0};
  f.arms[1].at_end.node_yield_wait_us = {91000, 40500};
  auto r = f.Build();
  const auto& router = r["arms"][1]["reads"];
  EXPECT_EQ(router["promotions_yielded_to_gets"], 10);
  EXPECT_EQ(router["promotion_yields_timed_out"], 1);
  EXPECT_DOUBLE_EQ(router["promotion_yield_wait_ms"].get<double>(), 130.5);
  EXPECT_EQ(r["arms"][0]["reads"]["promotions_yielded_to_gets"], 0);
  const std::string md = RenderMarkdown(r);
  EXPECT_NE(md.find("- router: 10 batches waited, 1 of them past the bound"),
            std::string::npos);
  EXPECT_EQ(md.find("- off: 0 batches"), std::string::npos);
}

TEST(ReportTest, RowsCarryTheDeadlineTheRouteSent) {
  Fixture f;
  f.arms[1].records[0].route.deadline_ms = 350;
  f.arms[1].records[0].route.waiting_at_route = 5;
  f.arms[1].records[0].route.loading_at_route = 3;
  auto r = f.Build();
  const auto& arm = r["arms"][1];
  const auto& cols = arm["request_columns"];
  auto col = [&](const char* name) {
    return size_t(std::find(cols.begin(), cols.end(), name) - cols.begin());
  };
  const size_t c = col("deadline_ms");
  ASSERT_LT(c, cols.size());
  EXPECT_EQ(arm["request_rows"][0][c], 350);
  EXPECT_EQ(arm["request_rows"][1][c], 0);
  ASSERT_LT(col("loading_at_route"), cols.size());
  EXPECT_EQ(arm["request_rows"][0][col("waiting_at_route")], 5);
  EXPECT_EQ(arm["request_rows"][0][col("loading_at_route")], 3);
  EXPECT_EQ(arm["request_rows"][1][col("waiting_at_route")], -1);
  for (const auto& row : arm["request_rows"])
    EXPECT_EQ(row.size(), cols.size());
}

TEST(ReportTest, ChecksCatchInconsistentCounts) {
  Fixture f;
  f.arms[1].records[0].dram_reads = 1;            // 1 + 0 != 2 read
  f.arms[1].at_end.promo_admitted = 4;            // started 4, only 3 accounted
  f.arms[1].counters.fate["read_from_dram"] = 5;  // more fates than landed
  auto r = f.Build();
  const auto& c = r["arms"][1]["checks"];
  EXPECT_FALSE(c["reads_add_up"].get<bool>());
  EXPECT_FALSE(c["promotions_add_up"].get<bool>());
  EXPECT_FALSE(c["fates_within_landed"].get<bool>());
}

TEST(ReportTest, MarkdownAndTableNameEveryArm) {
  Fixture f;
  auto r = f.Build();
  std::string md = RenderMarkdown(r);
  std::string table = RenderTable(r);
  for (const char* s :
       {"## TTFT per arm", "## M0 figures", "## Fate of every prefetch",
        "| router |", "| off |", "## Targets"}) {
    EXPECT_NE(md.find(s), std::string::npos) << s;
  }
  EXPECT_NE(table.find("router"), std::string::npos);
  EXPECT_NE(table.find("-74%"), std::string::npos) << table;
}

// Every row of every markdown table has as many cells as its header: a
// format string one placeholder short shifts every figure after it.
TEST(ReportTest, EveryMarkdownRowHasItsHeadersCells) {
  Fixture f;
  const std::string md = RenderMarkdown(f.Build());
  std::istringstream lines(md);
  std::string line;
  int header_cells = -1;
  int tables = 0;
  auto cells = [](const std::string& l) {
    return int(std::count(l.begin(), l.end(), '|')) - 1;
  };
  while (std::getline(lines, line)) {
    if (line.empty() || line[0] != '|') {
      header_cells = -1;
      continue;
    }
    if (header_cells < 0) {
      header_cells = cells(line);
      ++tables;
      continue;
    }
    EXPECT_EQ(cells(line), header_cells) << line;
  }
  EXPECT_GE(tables, 5);
}

// Requests land in the band of their window (edges belong to the band
// above), and each band counts its blocks and DRAM reads apart.
TEST(ReportWindowsTest, BandsSplitByWindow) {
  nlohmann::json w = {{0.0, 4, 0}, {19.99, 2, 1}, {20.0, 3, 3},
                      {450, 5, 1}, {500, 10, 5},  {7000, 0, 0},
                      {"bad"},     {1.0},         {"x", 1, 1}};
  const auto b = WindowBands(w);
  ASSERT_EQ(b.size(), std::size(kWindowBandEdgesMs) + 1);
  EXPECT_EQ(b[0]["requests"], 2);
  EXPECT_EQ(b[0]["blocks"], 6);
  EXPECT_EQ(b[0]["from_dram"], 1);
  EXPECT_NEAR(b[0]["dram_share"].get<double>(), 1.0 / 6, 1e-9);
  EXPECT_EQ(b[1]["lo_ms"], 20.0);
  EXPECT_EQ(b[1]["blocks"], 3);
  EXPECT_EQ(b[1]["dram_share"], 1.0);
  EXPECT_EQ(b[2]["blocks"], 5);
  EXPECT_EQ(b[3]["requests"], 2);  // 500 and 7000 (no blocks)
  EXPECT_EQ(b[3]["blocks"], 10);
  EXPECT_TRUE(b[3]["hi_ms"].is_null());
  // No windows: every band empty, no share.
  for (const auto& e : WindowBands(nlohmann::json::array())) {
    EXPECT_EQ(e["requests"], 0);
    EXPECT_TRUE(e["dram_share"].is_null());
  }
}

TEST(ReportWindowsTest, TheReportCarriesTheBands) {
  Fixture f;
  f.arms[1].records[1].window_ms = 600;  // one router request waited long
  auto r = f.Build();
  const auto& b = r["arms"][1]["ssd_only_by_window"];
  EXPECT_EQ(b[0]["requests"], 1);
  EXPECT_EQ(b[3]["requests"], 1);
  EXPECT_EQ(b[3]["from_dram"], 2);
  const std::string md = RenderMarkdown(r);
  EXPECT_NE(md.find("by their request's route->get window"), std::string::npos);
  EXPECT_NE(md.find("| router | 1, 2, 100.0% | 0, 0, - | 0, 0, - | 1, 2, "
                    "100.0% |"),
            std::string::npos)
      << md;
}

TEST(ReportWindowsTest, DeadlinesAreComparedWithTheWindowsTheyEstimate) {
  nlohmann::json arm = {
      {"request_columns",
       {"index", "window_ms", "ssd_only_at_route", "deadline_ms"}},
      {"request_rows",
       {{0, 100.0, 5, 400},   // 4x late
        {1, 200.0, 5, 100},   // early
        {2, 50.0, 5, 100},    // 2x late
        {3, 5.0, 5, 400},     // too short a window to count
        {4, 300.0, 0, 900},   // no SSD-only block
        {5, 300.0, 5, 0}}}};  // no deadline
  const auto d = DeadlineOverWindow(arm);
  ASSERT_FALSE(d.is_null());
  EXPECT_EQ(d["requests"], 3);
  EXPECT_DOUBLE_EQ(d["p50"].get<double>(), 2.0);
  EXPECT_DOUBLE_EQ(d["p10"].get<double>(), 0.5);
  EXPECT_DOUBLE_EQ(d["max"].get<double>(), 4.0);
  EXPECT_NEAR(d["late_share"].get<double>(), 2.0 / 3, 1e-9);
  // An arm without deadlines (or an older report's rows): none.
  arm["request_rows"] = {{0, 100.0, 5, 0}};
  EXPECT_TRUE(DeadlineOverWindow(arm).is_null());
  EXPECT_TRUE(DeadlineOverWindow(nlohmann::json::object()).is_null());
}

// A report written by an older build renders again with the sections added
// since; a file that is not a report is refused, and nothing is written.
TEST(ReportWindowsTest, RerenderFillsTheNewSectionFromAnOldReport) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() /
                       ("kvpool_rerender_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  Fixture f;
  auto r = f.Build();
  for (auto& a : r["arms"]) a.erase("ssd_only_by_window");  // as before
  {
    std::ofstream(dir / "old.json") << r.dump();
    std::ofstream(dir / "junk.json") << "{\"not\": \"a report\"}";
    std::ofstream(dir / "cut.json") << "{\"arms\": [{\"name\": 7}, 3]}";
  }
  ReplayOptions o;
  o.out_dir = (dir / "out").string();
  o.plots = false;
  auto out = RerenderReplay(o, (dir / "old.json").string());
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_TRUE(out->report["arms"][1].contains("ssd_only_by_window"));
  std::ifstream md(out->markdown_path);
  std::stringstream text;
  text << md.rdbuf();
  EXPECT_NE(text.str().find("route->get window"), std::string::npos);
  EXPECT_NE(text.str().find("## TTFT per arm"), std::string::npos);

  o.out_dir = (dir / "out2").string();
  auto bad = RerenderReplay(o, (dir / "junk.json").string());
  EXPECT_EQ(bad.code(), ErrorCode::INVALID_PARAMS);
  auto cut = RerenderReplay(o, (dir / "cut.json").string());
  EXPECT_EQ(cut.code(), ErrorCode::INVALID_PARAMS);
  auto missing = RerenderReplay(o, (dir / "none.json").string());
  EXPECT_EQ(missing.code(), ErrorCode::FILE_NOT_FOUND);
  EXPECT_FALSE(fs::exists(dir / "out2"));
  fs::remove_all(dir);
}

}  // namespace
}  // namespace kvpool::replay
