// The batching engine in virtual time: the same BatchScheduler driven by a
// discrete-event loop instead of a clock and threads. Used to size the load
// of a replay before it runs (the arrival time scale at which the `off` arm's
// GPUs would be busy a given fraction of the time) and by the tests, which
// can state exact step counts and times.
#ifndef KVPOOL_REPLAY_BATCH_SIM_H_
#define KVPOOL_REPLAY_BATCH_SIM_H_

#include <cstdint>
#include <string>
#include <vector>

#include "kvpool/router.h"
#include "replay/batch_scheduler.h"
#include "replay/engine_model.h"
#include "replay/trace.h"

namespace kvpool::replay {

struct SimRequest {
  double arrival_ms = 0;
  uint64_t prompt_tokens = 0, output_tokens = 1;
  uint64_t cached_tokens = 0;  // what its KV load brings
  double load_ms = 0;          // its load's own time, once a loader takes it
  uint64_t disk_blocks = 0;    // blocks its load reads from the shared disk
  int engine = 0;              // round-robin dispatch only
  // The node holding each block of the matched prefix (router dispatch).
  std::vector<int> holders;
};

// How arrivals reach engines; the load must be sized under the dispatch
// the arms use, since an affinity that sends most requests to one engine
// leaves the other idle at the same arrival rate.
enum class SimDispatch {
  kRoundRobin,   // SimRequest::engine, fixed in advance
  kRouter,       // kvpool::PickEngine (router/dispatch.h) at arrival
  kLeastLoaded,  // fewest requests in flight at arrival, ties seeded
};

struct SimConfig {
  SchedulerConfig scheduler;
  int loaders = 2;  // per engine
  double step_fixed_ms = 0, step_ms_per_token = 0;
  // > 0: one disk shared by every engine's loads (as on this machine, where
  // every node's SSD directory is on the same disk), serving blocks in the
  // order loads ask for them at this many ms per block. A load holds its
  // loader until its blocks are read.
  double disk_ms_per_block = 0;
  SimDispatch dispatch = SimDispatch::kRoundRobin;
  // Router dispatch: engine i is co-located with node i mod nodes, as in
  // the replay (EngineInfo::local_node_ids); in flight = routed and not yet
  // done, as the router counts.
  int nodes = 1;
  double affinity_weight = RouterConfig{}.affinity_weight;  // PickEngine's
  uint64_t seed = 1;                                        // least-loaded ties
};

struct SimRequestResult {
  double admit_ms = -1, load_start_ms = -1, load_done_ms = -1;
  double first_token_ms = -1, done_ms = -1;
  int engine = -1;  // where it was dispatched
};

struct SimResult {
  std::vector<SimRequestResult> requests;  // in the input's order
  // Per engine, its steps as [start, end) ms.
  std::vector<std::vector<std::pair<double, double>>> steps;
  // The shared disk's reads as [start, end) ms (with disk_ms_per_block).
  std::vector<std::pair<double, double>> disk;
  // Busy fraction of the engines over [w0, w1] ms (mean over engines).
  double BusyFraction(double w0, double w1) const;
  // Busy fraction of the shared disk over [w0, w1] ms.
  double DiskBusyFraction(double w0, double w1) const;
};

// Every request must fit the GPU (BatchScheduler::TooLarge false).
SimResult Simulate(const std::vector<SimRequest>& requests, int engines,
                   const SimConfig& config);

// The requests of trace[begin, end) as the `off` arm would see them, with
// arrivals scaled by `time_scale` (machine s per trace s) and engines taken
// round robin: prefix hits from an unbounded cache (every block seen before
// in the trace), each hit a block read from the disk (`disk_blocks`).
// Holders model the master's default placement (free_ratio_first over
// equal segments), which alternates nodes put by put: a block's node is
// the order in which blocks first appear in the trace, mod `nodes`.
std::vector<SimRequest> SimRequestsOf(const std::vector<TraceRequest>& trace,
                                      size_t begin, size_t end,
                                      double time_scale, int engines,
                                      int nodes = 1);

// The load of a replay: the time scale (machine s per trace s) at which
// the simulated engines are busy `gpu_target` of the arrival span, unless
// the shared disk would then be busier than `disk_cap`; then the time scale
// at which the disk is `disk_cap` busy (a disk past that builds queues that
// decide every result). Found by halving from sparse arrivals, then
// bisection; both fractions are monotone on that side.
// A third bound: a dispatch that favours one engine (the router's affinity)
// saturates it while the mean is still below the target, and an engine
// past saturation builds a queue that grows for the whole run and decides
// every result; the busiest engine is held below this.
inline constexpr double kBusiestEngineCap = 0.95;
struct LoadSizing {
  double time_scale = 1;
  double gpu_busy = 0, disk_busy = 0;  // simulated, at that scale
  bool disk_bound = false;             // the disk cap, not the GPU target
  std::string bound = "gpu";           // "gpu", "disk" or "busiest engine"
  std::vector<double> gpu_busy_per_engine;
};
LoadSizing SizeLoad(const std::vector<TraceRequest>& trace, size_t begin,
                    size_t end, int engines, const SimConfig& config,
                    double gpu_target, double disk_cap);

}  // namespace kvpool::replay

#endif  // KVPOOL_REPLAY_BATCH_SIM_H_
