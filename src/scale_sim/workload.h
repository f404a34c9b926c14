// The simulation's request stream: a request trace (shared/traces' format,
// or `kvpool trace-gen` output) scaled up to a target request rate without
// materialising the pool. The trace is played as K independent copies
// (K = rate / the trace's own rate, rounded), each looping over the trace
// at a random phase and sped up or slowed by at most a factor of 1.5 to
// hit the rate exactly; each copy and each loop gets keys of its own, so
// the popularity of keys *within* a copy is the trace's (shared system
// prompts, multi-turn reuse) and copies are independent user populations.
// Blocks that many requests of the trace share (system prompts) may be made
// global instead: one key in every copy, as one application's system
// prompt is one key for all of its users. Deterministic given the seed.
// Immutable after construction.
#ifndef KVPOOL_SCALE_SIM_WORKLOAD_H_
#define KVPOOL_SCALE_SIM_WORKLOAD_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "kvpool/status.h"

namespace kvpool::scale_sim {

// One request of the source trace: arrival (ms) and its blocks' ids (equal
// ids = the same KV block).
struct TraceEntry {
  double t_ms = 0;
  std::vector<uint64_t> blocks;
};

// One request of the scaled stream.
struct SimRequest {
  double t_us = 0;        // arrival, from the start of the window
  uint64_t instance = 0;  // which copy and loop of the trace: keys differ
  uint32_t entry = 0;     // the trace request it replays
};

class Workload {
 public:
  // Empty (for Result<Workload>); use Create.
  Workload() = default;
  // INVALID_PARAMS for a trace without a request that has blocks. A block
  // that at least `global_min_refs` requests of the trace hold is global
  // (0 = none is).
  static Result<Workload> Create(std::vector<TraceEntry> trace,
                                 uint32_t global_min_refs = 0);

  // `requests` requests of the stream at `rate` per second, sorted by
  // arrival. The window starts `start` of the way into a loop of the first
  // copy (in [0, 1)), or at a moment drawn from the seed when `start` < 0:
  // not always the trace's first seconds, its cold start.
  std::vector<SimRequest> Sample(double rate, size_t requests, uint64_t seed,
                                 double start = -1) const;

  // The routing hash of block `b` of `r` (the key's identity).
  uint64_t KeyHash(const SimRequest& r, size_t b) const;
  const TraceEntry& entry(const SimRequest& r) const { return trace_[r.entry]; }
  // Whether block `b` of trace entry `e` appeared in an earlier request of
  // the trace (the store holds it: a get), else it is new (a put).
  bool Seen(uint32_t e, size_t b) const { return seen_[e][b]; }
  bool Global(uint32_t e, size_t b) const { return global_[e][b]; }
  // The trace's own request rate (requests per second).
  double trace_rate() const { return trace_rate_; }
  size_t size() const { return trace_.size(); }

 private:
  std::vector<TraceEntry> trace_;
  std::vector<std::vector<bool>> seen_;
  std::vector<std::vector<bool>> global_;
  double span_us_ = 0;  // one loop of the trace at speed 1
  double trace_rate_ = 0;
};

}  // namespace kvpool::scale_sim

#endif  // KVPOOL_SCALE_SIM_WORKLOAD_H_
