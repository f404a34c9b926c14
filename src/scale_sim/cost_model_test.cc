#include "scale_sim/cost_model.h"

#include <gtest/gtest.h>

#include <string>

namespace kvpool::scale_sim {
namespace {

const char* kGood = R"({
  "schema": "kvpool-scale-sim-costs/1",
  "service_threads": 2,
  "ops": {"lookup": {"call_us": 10, "key_us": 1},
          "get": {"call_us": 20, "key_us": 0},
          "put": {"calls": 2, "call_us": 5, "key_us": 4}},
  "bytes_per_object": 100, "heartbeat_us": 7, "heartbeat_interval_ms": 500,
  "failover_detect_s": 1, "restart_base_s": 0.5,
  "reregister_objects_per_s": 1000000, "sources": {"any": "text"}})";

TEST(CostModelTest, ParsesEveryField) {
  auto m = ParseCostModel(kGood);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->service_threads, 2);
  EXPECT_EQ(m->cost(Op::kPut).calls, 2);
  // A put call of 10 keys: 5 + 4 * 10 / 2.
  EXPECT_DOUBLE_EQ(m->cost(Op::kPut).CallServiceUs(10), 25);
  EXPECT_DOUBLE_EQ(m->cost(Op::kLookup).CallServiceUs(3), 13);
  EXPECT_DOUBLE_EQ(m->heartbeat_interval_ms, 500);
  // 1 s to elect + 0.5 s to remount + 2M objects at 1M/s.
  EXPECT_DOUBLE_EQ(m->FailoverSeconds(2e6), 3.5);
}

TEST(CostModelTest, RefusesWrongSchemaMissingAndBadFields) {
  std::string s = kGood;
  auto replace = [&](const std::string& from, const std::string& to) {
    std::string t = s;
    t.replace(t.find(from), from.size(), to);
    return t;
  };
  EXPECT_EQ(ParseCostModel(replace("costs/1", "costs/2")).code(),
            ErrorCode::INVALID_PARAMS);
  EXPECT_EQ(ParseCostModel(replace("\"bytes_per_object\": 100,", "")).code(),
            ErrorCode::INVALID_PARAMS);
  EXPECT_EQ(ParseCostModel(
                replace("\"service_threads\": 2", "\"service_threads\": 0"))
                .code(),
            ErrorCode::INVALID_PARAMS);
  EXPECT_EQ(ParseCostModel(replace("\"calls\": 2", "\"calls\": 1.5")).code(),
            ErrorCode::INVALID_PARAMS);
  EXPECT_EQ(ParseCostModel("{not json").code(), ErrorCode::INVALID_PARAMS);
  EXPECT_EQ(LoadCostModel("/nonexistent/costs.json").code(),
            ErrorCode::FILE_NOT_FOUND);
}

TEST(CostModelTest, TheShippedDefaultFileLoads) {
  auto m = LoadCostModel(KVPOOL_SCALE_SIM_DEFAULT_COSTS);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->service_threads, 4);
  EXPECT_GT(m->cost(Op::kLookup).call_us, 0);
}

}  // namespace
}  // namespace kvpool::scale_sim
