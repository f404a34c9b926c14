// One arm of the replay: a fresh LocalCluster, the method's phases (fill,
// overflow, settle, measure, drain) and everything the report needs.
#ifndef KVPOOL_REPLAY_ARM_H_
#define KVPOOL_REPLAY_ARM_H_

#include <cstdint>
#include <string>
#include <vector>

#include "kvpool/client.h"
#include "kvpool/local_cluster.h"
#include "kvpool/router.h"
#include "replay/cluster_probe.h"
#include "replay/cpu_usage.h"
#include "replay/engine.h"
#include "replay/engine_model.h"
#include "replay/options.h"
#include "replay/phases.h"
#include "replay/progress.h"
#include "replay/trace.h"

namespace kvpool::replay {

// What every arm replays: the same slice of the same trace.
struct ReplayPlan {
  const std::vector<TraceRequest>* trace = nullptr;
  size_t measure_begin = 0, measure_end = 0;
  // Blocks of the fill part that a measured request references, in the
  // order the trace first shows them (the rest could only add pressure,
  // which the overflow phase supplies in a known amount).
  std::vector<uint64_t> fill_blocks;
  size_t max_blocks = 0;  // blocks of the longest measured prompt
  // Distinct blocks the measured requests reference (the fill blocks among
  // them, and the ones the measurement puts).
  size_t measured_distinct_blocks = 0;
};

// DRAM per node of the all-dram arm: every block a measured request
// references fits below the high watermark with room for an eviction step.
uint64_t AllDramPerNode(const ReplayOptions& o, const ReplayPlan& plan);

ReplayPlan MakePlan(const std::vector<TraceRequest>& trace,
                    size_t measure_requests);

// The cluster every arm (and the calibration) runs on; `applied_buffer`
// tells whether this build's LocalCluster has a prefetch-buffer segment.
LocalClusterOptions MakeClusterOptions(const ReplayOptions& o,
                                       const std::string& ssd_root,
                                       const ArmSpec& arm,
                                       bool* applied_buffer = nullptr);

struct PhaseTimes {
  double fill = 0, settle_fill = 0, overflow = 0, settle = 0, measure = 0,
         drain = 0;
};

struct ArmResult {
  ArmSpec spec;
  Status status;  // not OK: the arm did not run to the end
  bool prefetch_buffer = false;
  std::vector<std::string> node_ids;
  PhaseTimes phases;
  FillResult fill;
  OverflowResult overflow;
  bool settled = false;
  TierCensus census;  // the fill blocks when the measurement starts
  double arm_start_s = 0, measure_start_s = 0, measure_end_s = 0;
  double max_dispatch_lag_ms = 0;    // how late the dispatcher sent a request
  bool dispatcher_realtime = false;  // RunAsModelClock took (clock_util.h)
  uint64_t route_errors = 0;
  std::vector<RequestRecord> records;
  std::vector<ClusterSnapshot> samples;  // every 100 ms, all phases
  bool router_used = false;
  bool router_kv_events = false;  // the router followed the KV events
  RouterStats router;
  PrefetchStats prefetch;  // engines' clients, summed
  MasterCounters counters;
  ClusterSnapshot at_measure_start, at_end;
  uint64_t dram_per_node = 0;  // as run (the all-dram arm's is larger)
  // The measurement: arrivals span [measure_start_s, +arrival_span_s].
  double arrival_span_s = 0;
  // Per engine: busy fraction over the arrival span, and step statistics.
  std::vector<double> gpu_busy;
  std::vector<EngineStats> engine_stats;
  // CPU of the whole process from the first arrival to the last request's
  // end.
  CpuUsage cpu;
};

ArmResult RunArm(const ReplayOptions& options, const ReplayPlan& plan,
                 const ArmSpec& arm, const EngineModel& model, int arm_index,
                 int arms, Progress* progress);

}  // namespace kvpool::replay

#endif  // KVPOOL_REPLAY_ARM_H_
