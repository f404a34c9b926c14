// The master's metrics of the promotion and prefetch paths, registered once
// and used by handle: these paths count per key.
#ifndef KVPOOL_MASTER_TIERING_METRICS_H_
#define KVPOOL_MASTER_TIERING_METRICS_H_

#include <array>

#include "common/metrics.h"
#include "master/object_store.h"

namespace kvpool {

struct TieringMetrics {
  explicit TieringMetrics(MetricsRegistry* m);

  // Label values of TriggerSource, by its numeric value.
  static constexpr std::array<const char*, 3> kSourceNames = {"on_hit", "exist",
                                                              "router"};

  // Label values of PrefetchStatus, by its numeric value.
  static constexpr std::array<const char*, 6> kTriggerStatusNames = {
      "IN_MEMORY",     "QUEUED",        "THROTTLED_WATERMARK",
      "THROTTLED_CAP", "NO_LOCAL_DISK", "NOT_FOUND"};

  CounterVec trigger_status;      // kvpool_master_prefetch_trigger_total
  CounterVec prefetch_fate;       // kvpool_master_prefetch_fate_total
  CounterVec promotion_rejected;  // kvpool_master_promotion_rejected_total
  // kvpool_master_promotion_outcome_total{source, result="landed|failed"}
  std::array<std::array<Counter*, 2>, 3> outcome{};
  // kvpool_master_promotion_duration_seconds{source}: from the task's
  // creation to its holder's report that the block landed in DRAM.
  std::array<Histogram*, 3> promotion_duration{};
  // kvpool_master_prefetch_window_seconds: from a router trigger to the get
  // that reads the block (the oldest trigger not yet followed by a get).
  Histogram* prefetch_window = nullptr;
  // kvpool_master_offload_duration_seconds: from queueing an SSD copy to
  // its holder's acknowledgement.
  Histogram* offload_duration = nullptr;
};

}  // namespace kvpool

#endif  // KVPOOL_MASTER_TIERING_METRICS_H_
