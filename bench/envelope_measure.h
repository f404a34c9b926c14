// The figures `kvpool bench master-envelope` takes at each object count,
// one function per figure, all against an EnvelopeMaster in process. Each
// also reads the longest shard-lock hold of its phase (ObjectStore's
// LockHoldTracker, which the benchmark switches on).
#ifndef KVPOOL_BENCH_ENVELOPE_MEASURE_H_
#define KVPOOL_BENCH_ENVELOPE_MEASURE_H_

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "bench/envelope_master.h"

namespace kvpool::bench {

struct LookupRate {
  int batch = 0;
  int threads = 0;
  double keys_per_s = 0;
};

// The shard-lock holds of one phase (LockHoldTracker).
struct HoldStats {
  double max_ms = 0;
  // Upper bound of the power-of-two bucket holding the 99.9th percentile.
  double p999_ms = 0;
  uint64_t holds = 0;
  uint64_t over_8ms = 0;  // holds of 2^23 ns (8.4 ms) or more
  // The same in the holder's thread CPU time: the work done under the lock,
  // not stretched by preemption (common/mutex.h, LockHoldTracker).
  double cpu_max_ms = 0;
  double cpu_p999_ms = 0;
  uint64_t cpu_over_8ms = 0;
  void Merge(const HoldStats& o) {
    max_ms = std::max(max_ms, o.max_ms);
    p999_ms = std::max(p999_ms, o.p999_ms);
    holds += o.holds;
    over_8ms += o.over_8ms;
    cpu_max_ms = std::max(cpu_max_ms, o.cpu_max_ms);
    cpu_p999_ms = std::max(cpu_p999_ms, o.cpu_p999_ms);
    cpu_over_8ms += o.cpu_over_8ms;
  }
};

// One step of the envelope: the master holding `objects` objects.
struct EnvelopeStep {
  uint64_t objects = 0;
  double fill_s = 0;
  // Heap in use (malloc's count, so freed-but-kept memory does not count)
  // and resident memory grown, per object, after the fill.
  double bytes_per_object = 0;
  double rss_bytes_per_object = 0;
  // The last put_window keys of the fill: PutStart per key plus one
  // BatchPutEnd per batch; latency per batch.
  int put_batch = 0;
  double put_keys_per_s = 0;
  double put_p50_us = 0;
  double put_p99_us = 0;
  // The slowest batch of the whole fill (a table or an allocator's pool
  // growing shows here, not in the p99).
  double put_max_us = 0;
  std::vector<LookupRate> lookups;  // QueryReadOnlyBatch
  // Batch 1, one thread, the hold tracker off and on (alternating runs,
  // best of each): what tracking costs a lookup.
  double lookup_untracked_keys_per_s = 0;
  double lookup_tracked_keys_per_s = 0;
  double heartbeat_us = 0;  // mean over every node's beat
  double heartbeat_p99_us = 0;
  double housekeep_ms = 0;  // a housekeeping round with its full scans
  uint64_t evicted_objects = 0;
  double evict_ms = 0;
  uint64_t node_objects = 0;  // what the dead node held
  double node_death_ms = 0;   // the housekeeping round that declared it
  uint64_t restart_objects = 0;
  double restart_s = 0;  // re-registration to every key served
  // Shard-lock holds per phase.
  HoldStats hold_fill;
  HoldStats hold_lookup;
  HoldStats hold_housekeep;
  HoldStats hold_evict;
  HoldStats hold_node_death;
  HoldStats hold_restart;
};

struct EnvelopeOptions {
  std::vector<uint64_t> steps;
  int nodes = 256;
  int big_share_every = 4;  // node 0 holds one key in this many
  uint64_t put_window = 262144;
  double seconds = 1.0;  // per lookup case
  std::vector<int> lookup_batches = {1, 128};
  std::vector<int> lookup_threads = {1, 2, 4, 8};
  double evict_share = 0.01;  // of the objects, per eviction pass
  int restart_threads = 2;    // nodes re-registering at once
};

// Fills a fresh master to `objects` and takes every figure but the
// restart's (which needs a master of its own: RunRestart).
void RunStep(const EnvelopeOptions& opts, uint64_t objects, EnvelopeStep* out);
// A master restarted with `objects` in its nodes' directories: the time
// until every key is served again.
void RunRestart(const EnvelopeOptions& opts, uint64_t objects,
                EnvelopeStep* out);

// Heap bytes in use (malloc's own count).
uint64_t HeapInUse();

}  // namespace kvpool::bench

#endif  // KVPOOL_BENCH_ENVELOPE_MEASURE_H_
