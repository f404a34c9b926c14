// Options of a replay (`kvpool replay`): the trace and its slicing, the
// cluster, the engines, the arms and the outputs.
#ifndef KVPOOL_REPLAY_OPTIONS_H_
#define KVPOOL_REPLAY_OPTIONS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "kvpool/local_cluster.h"
#include "kvpool/router.h"
#include "replay/batch_scheduler.h"
#include "replay/engine.h"
#include "replay/engine_model.h"
#include "replay/replay_cluster.h"

namespace kvpool::replay {

// One arm of the A/B: which prefetch paths are on.
struct ArmSpec {
  std::string name;
  bool promotion_on_hit = false;  // master: promote-on-hit
  bool exist_prefetch = false;    // engines: BatchIsExist(prefetch_to_memory)
  bool router_prefetch = false;   // router: BatchPrefetchToMemory
  // The bound no prefetch can beat: DRAM sized to hold every block the
  // measured requests reference (and the ones they put), no overflow.
  bool all_dram = false;
};

// off, on-hit, exist, router, exist+router, all-dram.
const std::vector<ArmSpec>& AllArms();
// Looks an arm up by name; nullptr if unknown.
const ArmSpec* FindArm(const std::string& name);

struct ReplayOptions {
  std::string trace_path = "../shared/traces/synthetic_trace.jsonl";
  // Requests read from the trace (0 = all): the last `measure_requests` of
  // them are measured, the ones before are the fill part.
  size_t requests = 0;
  size_t measure_requests = 400;
  // Machine seconds per trace second; <= 0 = auto: the batching engine
  // picks it so the off arm's GPUs would be busy `gpu_busy` of the time (the
  // serial engine takes 1).
  double time_scale = 0;
  double gpu_busy = 0.7;
  // ... unless the off arm's SSD reads would keep the shared disk busier
  // than this; then the load is set by this cap (see batch_sim.h).
  double disk_busy_cap = 0.8;
  // The disk's speed (disk_cap.h): reads and writes of the disk under
  // scratch_dir capped at most this many bytes/s for the whole run (the
  // calibration included), and the model scaled from the cap
  // (CappedTiming). 0 = uncapped, scaled by measured reads: results then
  // drift with the disk and sub-ms steps lag; kept to reproduce old runs.
  uint64_t disk_cap_bytes_per_s = 400ull << 20;
  // With the cap: the scale is raised (and the cap lowered) until the
  // shortest modelled step lasts this long on this machine.
  double min_step_ms = 1.0;
  uint64_t block_bytes = 1ull << 20;

  int engines = 4;
  int nodes = 2;
  uint64_t dram_per_node = 512ull << 20;
  uint64_t ssd_per_node = 8ull << 30;
  // The holders' PREFETCH_BUFFER segment (RFC decision 1), per node; router
  // promotions land there (LocalClusterOptions::prefetch_buffer_size).
  uint64_t prefetch_buffer_per_node = 0;
  double high_watermark = 0.90;
  double eviction_ratio = 0.05;
  int64_t lease_ms = 5000;  // default_kv_lease_ttl
  // Lease granted at enqueue by BatchPrefetchToMemory: covers the
  // route->get window; with a buffer, it also sets how long a consumed block
  // holds buffer space (buffer >= rate x this lease x block).
  int64_t prefetch_lease_ms = 10000;
  // > 0: buffer recycling (prefetch_consumed_lease_ms): a consumed block
  // holds the buffer for this lease instead of the rest of the trigger's.
  int64_t prefetch_consumed_lease_ms = 0;
  // > 0: the report's reach bound (report_bound.h) also at this read time
  // per block, such as the disk's sustained rate where the calibration's
  // short bursts read faster than a throttle lets a long run.
  double bound_block_read_ms = 0;
  // The router sends each trigger with its estimate of the engine's read
  // (RouterConfig::prefetch_deadline); engines declare max_num_seqs (1 for
  // the serial engine) as their max_running.
  bool prefetch_deadline = false;
  // RouterConfig's default, in modelled ms: the router gets it x the
  // engine model's scale (ScaledMs), like every modelled duration.
  int64_t prefetch_deadline_floor_ms = 100;
  double prefetch_deadline_slack = 2.0;  // RouterConfig's
  // RouterConfig's: the queue ahead timed by admissions, not completions.
  bool prefetch_deadline_by_admissions = false;
  // Batching engine: each engine declares its loaders as max_loading, so
  // the router's deadline counts loads ahead (EngineInfo::max_loading).
  bool prefetch_deadline_by_loads = false;
  // The router follows the master's KV events (docs/kv_events.md,
  // "kvpool-router follows the stream"): the master publishes on free
  // loopback ports and the router keeps its tier map from them, looking up
  // only keys without fresh state. In-process cluster only.
  bool router_kv_events = false;
  // The router's dispatch: load against affinity (RouterConfig's).
  double affinity_weight = RouterConfig{}.affinity_weight;
  bool promotion_pull = false;            // holders' promotion pull thread
  int64_t promotion_read_batch = 1;       // SSD reads per promotion submission
  uint64_t promotion_inflight_bytes = 0;  // > 0: pipelined executor
  int64_t promotion_workers = 8;
  bool promotion_drop_unreachable = false;  // holders' NodeConfig knob
  // Holders' SharedReads budget (0 = off) and skip after a get (0 = off):
  // the store's defaults (docs/prefetch_defaults.md).
  uint64_t ssd_read_share_bytes = LocalClusterOptions{}.ssd_read_share_bytes;
  int64_t promotion_yield_to_gets_ms = 0;  // holders' GetsFirst; 0 = off
  int64_t promotion_skip_after_get_ms =
      LocalClusterOptions{}.promotion_skip_after_get_ms;
  // Holders' NodeConfig::prefetch_profile: "default" or "rfc".
  std::string prefetch_profile = LocalClusterOptions{}.prefetch_profile;
  int64_t heartbeat_ms = 1000;
  double overflow_ratio = 1.0;  // filler written, in units of pool DRAM
  // DRAM pressure: after the overflow, a seeded 1 - this share of the fill
  // blocks is put again (into DRAM), so about this share stays SSD-only at
  // measure start. 1 = none put again. The all-dram arm ignores it.
  double ssd_only_share = 1.0;

  // An arm may be named more than once (e.g. off again at the end, for the
  // run-to-run spread); repeats are reported as name#2, name#3, ...
  std::vector<std::string> arms = {"off",    "on-hit",       "exist",
                                   "router", "exist+router", "all-dram"};
  EngineKind engine = EngineKind::kBatching;
  SchedulerConfig scheduler;  // batching engine; holds load_start
  int loaders = 2;            // batching engine: KV loads in flight / engine
  // Where each arm's store runs: in this process, or as kvpool-master and
  // kvpool-node processes from `bin_dir` (empty: next to this binary).
  ClusterKind cluster = ClusterKind::kInProcess;
  std::string bin_dir;
  // kExternal: a running cluster (one arm per run, started with that arm's
  // flags; see docs/replay.md).
  ExternalCluster external;
  // "router": every arm dispatches through kvpool::Router (with the trigger
  // only in the router arms), so the arms differ in prefetch alone;
  // "least-loaded": the non-router arms dispatch to the shortest queue.
  std::string dispatch = "router";
  uint64_t seed = 1;

  HardwareModel hardware;
  EngineModelOverrides overrides;
  // Serial engine's decode: < 0 = "auto", chosen so the engines would run
  // at this utilisation under the off arm's estimated load.
  double utilisation = 0.8;

  std::string scratch_dir = "/tmp";
  std::string out_dir = "replay-out";  // report.md, plots
  std::string json_path;               // default <out_dir>/replay.json
  bool plots = true;
  std::string python = "/usr/bin/python3";
  std::string plot_script;  // default: found next to the source tree
  bool progress = true;
};

}  // namespace kvpool::replay

#endif  // KVPOOL_REPLAY_OPTIONS_H_
