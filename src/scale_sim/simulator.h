// One run of the scale simulation: a sample of the scaled request stream
// against `shards` master shards, each a first-come-first-served queue of
// the cost model's service threads (ShardQueue). A request's calls are split
// by shard as a sharded client would split them (one call per shard it
// touches, all sent at once), so its latency is the slowest shard's. Nodes'
// heartbeats load every shard they talk to. What is not simulated is
// computed from what is: memory and failover from each shard's share of the
// objects, the failover's victims from the share of requests that touch a
// shard. Pure function of its inputs (deterministic given the seed).
#ifndef KVPOOL_SCALE_SIM_SIMULATOR_H_
#define KVPOOL_SCALE_SIM_SIMULATOR_H_

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "scale_sim/cost_model.h"
#include "scale_sim/slot_map.h"
#include "scale_sim/workload.h"

namespace kvpool::scale_sim {

// Which masters a node heartbeats to (docs/scale.md, "Segments").
enum class NodeLayout : uint8_t {
  kAll = 0,    // every node mounts a slice at every shard: heartbeats to all
  kGroup = 1,  // nodes are split into one group per shard
};
const char* NodeLayoutName(NodeLayout l);

struct ScenarioConfig {
  int shards = 1;
  double rate = 1000;  // requests per second
  Routing routing = Routing::kKey;
  // Prefix routing's tag: block `tag_depth` of the request (its last block
  // if shorter); the blocks before it route by their own key. 0 = the first
  // block. A depth past the shared system prompt keeps one application's
  // prompt from pulling every request onto one shard.
  uint32_t tag_depth = 0;
  size_t requests = 20000;  // sampled requests
  uint64_t seed = 1;
  // Where the sample starts in the trace (Workload::Sample; < 0: random).
  double window_start = -1;
  double objects = 1e8;  // objects in the pool (all shards)
  int nodes = 1000;
  NodeLayout layout = NodeLayout::kAll;
  // Which operations a request makes, and when each is sent after the
  // request's arrival (a put's second call follows its first by
  // call_gap_us: the data write between PutStart and PutEnd).
  std::array<bool, kOpCount> enabled = {true, true, true};
  std::array<double, kOpCount> offset_us = {0, 1000, 2000};
  double call_gap_us = 1000;
  // The first part of the window only fills the queues: no latency taken.
  double warmup_fraction = 0.1;
};

struct Percentiles {
  double p50 = 0, p99 = 0, p999 = 0, max = 0;
  size_t count = 0;
};
// Nearest-rank percentiles; sorts `v`.
Percentiles ComputePercentiles(std::vector<double>& v);

struct ShardStats {
  double util = 0;            // offered load / threads, requests only
  double heartbeat_util = 0;  // the nodes' heartbeats
  double object_share = 0;    // of the pool's objects
  double touch_fraction = 0;  // of requests that call this shard
  double demand_us = 0;       // service time per request (thread-µs)
  uint64_t calls = 0;
};

struct ScenarioResult {
  ScenarioConfig config;
  int service_threads = 1;
  size_t requests = 0;  // in the sample (about config.requests)
  double window_s = 0;
  std::vector<ShardStats> shards;
  double calls_per_request = 0;
  // Offered load of the busiest shard (requests + heartbeats) over its
  // threads; >= 1 is saturated (queues grow without bound).
  double max_util = 0;
  double mean_util = 0;
  // Busiest shard's request load over the mean shard's (1 = even).
  double skew = 0;
  // Request latency per operation (ms): the slowest of its calls.
  std::array<Percentiles, kOpCount> latency_ms;
  double max_shard_objects = 0;
  double max_shard_bytes = 0;
  // A failover of the shard with the most objects: how long until it
  // serves them all again, and the requests that reach it meanwhile (they
  // fail or stall), in number and as a share of all requests then.
  double failover_s = 0;
  double failover_requests = 0;
  double failover_fraction = 0;
  // The rate at which the busiest shard would reach `util_limit` (linear
  // in the rate, the heartbeats' load fixed).
  double RateAtUtil(double util_limit) const;
  bool saturated() const { return max_util >= 1; }
};

ScenarioResult RunScenario(const Workload& workload, const CostModel& costs,
                           const ScenarioConfig& config);

}  // namespace kvpool::scale_sim

#endif  // KVPOOL_SCALE_SIM_SIMULATOR_H_
