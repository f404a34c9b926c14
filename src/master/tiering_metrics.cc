#include "master/tiering_metrics.h"

#include <string>

namespace kvpool {

TieringMetrics::TieringMetrics(MetricsRegistry* m)
    : trigger_status(m, "kvpool_master_prefetch_trigger_total", "status",
                     "router-triggered prefetch requests per key, by the "
                     "status answered"),
      prefetch_fate(m, "kvpool_master_prefetch_fate_total", "fate",
                    "what became of prefetched blocks (read from DRAM, "
                    "landed after their get, evicted or removed unread, "
                    "expired)"),
      promotion_rejected(m, "kvpool_master_promotion_rejected_total", "reason",
                         "promote-on-hit requests refused, by reason") {
  for (const char* status : kTriggerStatusNames)
    trigger_status.Declare({status});
  prefetch_fate.Declare({"read_from_dram", "read_after_lease_end",
                         "landed_after_get", "evicted_unread", "removed_unread",
                         "expired"});
  promotion_rejected.Declare({"frequency", "watermark", "cap", "dedup"});
  for (size_t s = 0; s < kSourceNames.size(); ++s) {
    const std::string source =
        std::string("source=\"") + kSourceNames[s] + "\"";
    outcome[s][0] = &m->GetCounter("kvpool_master_promotion_outcome_total",
                                   source + ",result=\"landed\"");
    outcome[s][1] = &m->GetCounter("kvpool_master_promotion_outcome_total",
                                   source + ",result=\"failed\"");
    promotion_duration[s] = &m->GetHistogram(
        "kvpool_master_promotion_duration_seconds", source,
        LatencyBucketsSeconds(),
        "promotion time from the task's creation to the holder's report that "
        "the block landed in DRAM (ms resolution)");
  }
  prefetch_window = &m->GetHistogram(
      "kvpool_master_prefetch_window_seconds", "", LatencyBucketsSeconds(),
      "time from a router trigger to the first get that reads the block "
      "(ms resolution)");
  offload_duration = &m->GetHistogram(
      "kvpool_master_offload_duration_seconds", "", LatencyBucketsSeconds(),
      "time from queueing an SSD copy to its holder's acknowledgement (ms "
      "resolution)");
}

}  // namespace kvpool
