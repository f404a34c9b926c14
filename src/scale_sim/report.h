// The scale simulation's outputs: every run as JSON and as a markdown row,
// and the verdict the design needs: for each routing and shard count, the
// request rate and the object count up to which it stays within stated
// limits ("where sharding pays": where one master stops being enough).
// Pure functions.
#ifndef KVPOOL_SCALE_SIM_REPORT_H_
#define KVPOOL_SCALE_SIM_REPORT_H_

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "scale_sim/cost_model.h"
#include "scale_sim/simulator.h"

namespace kvpool::scale_sim {

// The limits a master (shard) must stay within.
struct Limits {
  double max_util = 0.7;       // busiest shard's offered load
  double max_p99_ms = 10;      // the router's lookup, request level
  double max_failover_s = 30;  // one shard's failover until all served
  double max_shard_gib = 64;   // one shard's object table
};

// One line of the verdict: how far `shards` shards with `routing` go.
struct Capacity {
  Routing routing = Routing::kKey;
  int shards = 1;
  double rate_at_util = 0;  // req/s at which the busiest shard hits max_util
  double rate_at_p99 = 0;   // lowest swept rate past max_p99_ms; 0 = none
  double max_rate_swept = 0;
  double objects_at_failover = 0;  // objects at which failover hits its limit
  double objects_at_memory = 0;    // objects at which memory hits its limit
  double skew = 0;                 // at the highest swept rate
  double calls_per_request = 0;
};

std::vector<Capacity> ComputeCapacity(const std::vector<ScenarioResult>& runs,
                                      const CostModel& costs,
                                      const Limits& limits);

nlohmann::json ToJson(const std::vector<ScenarioResult>& runs,
                      const std::vector<Capacity>& capacity,
                      const Limits& limits);

// The runs, one row each, and the verdict table.
std::string RunsMarkdown(const std::vector<ScenarioResult>& runs);
std::string CapacityMarkdown(const std::vector<Capacity>& capacity,
                             const Limits& limits);
// Where sharding pays, in words: the rate and the object count at which one
// master (the shards == 1 lines) crosses a limit, and the fewest shards
// whose failover stays within its limit at `objects`. Empty without a
// one-shard run.
std::string VerdictMarkdown(const std::vector<Capacity>& capacity,
                            const Limits& limits, double objects);

}  // namespace kvpool::scale_sim

#endif  // KVPOOL_SCALE_SIM_REPORT_H_
