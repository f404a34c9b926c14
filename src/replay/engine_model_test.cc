#include "replay/engine_model.h"

#include <gtest/gtest.h>

#include <cmath>

namespace kvpool::replay {
namespace {

TEST(EngineModelTest, DefaultHardwareIsThreeTimesSsdFifteenTimesDram) {
  HardwareModel hw;
  EXPECT_NEAR(hw.prefill_block_ms() / hw.ssd_read_ms, 3.0, 1e-9);
  EXPECT_NEAR(hw.prefill_block_ms() / hw.dram_read_ms, 15.0, 1e-9);
}

TEST(EngineModelTest, MeasuredReadsInTheModelledRatioKeepBothProportions) {
  // SSD:DRAM = 5 here as on the modelled hardware: both proportions exact.
  EngineModel m = DeriveEngineModel(HardwareModel{}, {1.0, 0.2, 16, 10});
  EXPECT_NEAR(m.scale, 1.0 / 16, 1e-12);
  EXPECT_NEAR(m.PrefillBlockMs(), 3.0, 1e-9);
  EXPECT_NEAR(m.RecomputeOverSsd(), 3.0, 1e-9);
  EXPECT_NEAR(m.RecomputeOverDram(), 15.0, 1e-9);
  EXPECT_NEAR(m.prefill_fixed_ms, 20.0 / 16, 1e-9);
  EXPECT_NEAR(m.decode_ms_per_token, 8.0 / 16, 1e-9);
  EXPECT_EQ(m.prefill_source, "derived");
}

TEST(EngineModelTest, OtherMachineRatioIsSplitEvenlyBetweenTheTwo) {
  // SSD:DRAM = 10 here (modelled 5): each proportion is off by sqrt(2), in
  // opposite directions.
  EngineModel m = DeriveEngineModel(HardwareModel{}, {1.0, 0.1, 16, 10});
  EXPECT_NEAR(m.RecomputeOverSsd(), 3.0 / std::sqrt(2.0), 1e-9);
  EXPECT_NEAR(m.RecomputeOverDram(), 15.0 * std::sqrt(2.0), 1e-9);
  EXPECT_NEAR(m.RecomputeOverSsd() * m.RecomputeOverDram(), 45.0, 1e-9);
}

TEST(EngineModelTest, PrefillIsAffineInTokensAndOverridesWin) {
  EngineModelOverrides ov;
  ov.prefill_fixed_ms = 2;
  ov.prefill_ms_per_token = 0.01;
  ov.decode_ms_per_token = 0.5;
  EngineModel m = DeriveEngineModel(HardwareModel{}, {1.0, 0.2, 16, 10}, ov);
  EXPECT_EQ(m.prefill_source, "override");
  EXPECT_EQ(m.decode_source, "override");
  EXPECT_DOUBLE_EQ(m.PrefillMs(0), 2);  // the pass for the first token
  EXPECT_DOUBLE_EQ(m.PrefillMs(1000), 12);
  EXPECT_DOUBLE_EQ(m.DecodeMs(10), 5);
}

TEST(EngineModelTest, DecodeForUtilisation) {
  // 10 req/s over 2 engines at 50%: 100 ms per request; 40 ms of load and
  // prefill leave 60 ms for 20 tokens.
  LoadEstimate load{10, 40, 20};
  EXPECT_NEAR(DecodeMsPerTokenFor(0.5, 2, load), 3.0, 1e-9);
  // Already overloaded without decode: 0, never negative.
  EXPECT_EQ(DecodeMsPerTokenFor(0.1, 1, load), 0);
  EXPECT_EQ(DecodeMsPerTokenFor(0.5, 2, LoadEstimate{}), 0);
}

TEST(EngineModelTest, ModelledDurationsScaleToMachineMsAndStayPositive) {
  // The router's default floor on a model 13x faster than its hardware.
  EXPECT_EQ(ScaledMs(100, 0.0778), 8);
  EXPECT_EQ(ScaledMs(100, 1.0), 100);
  EXPECT_EQ(ScaledMs(100, 2.5), 250);
  // A floor never reaches 0, which would mean "no deadline" to the router.
  EXPECT_EQ(ScaledMs(5, 0.01), 1);
  EXPECT_EQ(ScaledMs(0, 0.5), 1);
}

TEST(EngineModelTest, ACappedDiskSetsTheScaleAndKeepsTheModelledProportions) {
  HardwareModel hw;
  // 1 MiB at 400 MiB/s: 2.5 ms per block stands for the modelled 16 ms.
  CappedTiming t = ChooseCappedTiming(hw, 1 << 20, 400ull << 20, 1.0);
  EXPECT_FALSE(t.step_floor_binds);
  EXPECT_NEAR(t.scale, 2.5 / 16, 1e-9);
  EXPECT_NEAR(t.ssd_ms_per_block, 2.5, 1e-9);
  EXPECT_NEAR(t.h2d_ms_per_block, 0.5, 1e-9);
  EXPECT_NEAR(double(t.disk_bytes_per_s), double(400ull << 20), 1.0);
  // This machine's DRAM reads are far faster than the modelled PCIe copy:
  // the copy is modelled, so both proportions are the modelled ones.
  EngineModel m = DeriveCappedEngineModel(hw, {0.4, 0.05, 16, 10}, t);
  EXPECT_EQ(m.scale_source, "disk cap");
  EXPECT_NEAR(m.RecomputeOverSsd(), 3.0, 1e-9);
  EXPECT_NEAR(m.RecomputeOverDram(), 15.0, 1e-9);
  EXPECT_NEAR(m.step_fixed_ms, 8.0 * 2.5 / 16, 1e-9);
}

TEST(EngineModelTest, TheStepFloorRaisesTheScaleAndLowersTheCap) {
  HardwareModel hw;
  // 256 KiB at 400 MiB/s would make the modelled 8 ms step 0.31 ms: the
  // 1 ms floor sets the scale, and the cap drops so a block still reads in
  // the modelled 16 ms x scale.
  CappedTiming t = ChooseCappedTiming(hw, 256 << 10, 400ull << 20, 1.0);
  EXPECT_TRUE(t.step_floor_binds);
  EXPECT_NEAR(t.scale, 1.0 / 8, 1e-12);
  EXPECT_NEAR(t.ssd_ms_per_block, 2.0, 1e-9);
  EXPECT_EQ(t.disk_bytes_per_s, uint64_t(256 << 10) * 500);
  EngineModel m = DeriveCappedEngineModel(hw, {0.4, 0.05, 16, 10}, t);
  EXPECT_EQ(m.scale_source, "step floor");
  EXPECT_NEAR(m.StepMs(0), 1.0, 1e-9);
  EXPECT_NEAR(m.RecomputeOverSsd(), 3.0, 1e-9);
}

TEST(EngineModelTest, LoadEstimateCountsPrefixHitsFromTheTrace) {
  std::vector<TraceRequest> t(3);
  t[0] = {0, 1024, 10, {1, 2}};
  t[1] = {1000, 1536, 20, {1, 2, 3}};  // 2 hits, 512 tokens to compute
  t[2] = {2000, 1024, 30, {9, 1}};     // miss first: no prefix, 1024 tokens
  EngineModelOverrides ov;
  ov.prefill_fixed_ms = 1;
  ov.prefill_ms_per_token = 0.01;
  EngineModel m = DeriveEngineModel(HardwareModel{}, {1.0, 0.2, 16, 10}, ov);
  LoadEstimate e = EstimateLoad(t, 1, 3, /*time_scale=*/0.5, m);
  EXPECT_NEAR(e.arrival_rate_per_s, 2 / 0.5, 1e-9);
  // (2 x 0.6 + 1 + 5.12) + (0 + 1 + 10.24), over 2.
  EXPECT_NEAR(e.mean_service_ms, (7.32 + 11.24) / 2, 1e-9);
  EXPECT_NEAR(e.mean_output_tokens, 25, 1e-9);
}

}  // namespace
}  // namespace kvpool::replay
