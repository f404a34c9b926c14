// In-process readings of a LocalCluster for the replay: DRAM use per segment
// kind, offloads and promotions in flight, and the master's and holders'
// prefetch counters. Read from the master's own status and metrics (no RPC),
// so sampling every 100 ms perturbs nothing it measures.
#ifndef KVPOOL_REPLAY_CLUSTER_PROBE_H_
#define KVPOOL_REPLAY_CLUSTER_PROBE_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kvpool/local_cluster.h"

namespace kvpool::replay {

struct ClusterSnapshot {
  double t = 0;  // steady-clock s
  std::string phase;
  uint64_t main_used = 0, main_capacity = 0;
  uint64_t buffer_used = 0, buffer_capacity = 0;  // prefetch_buffer segments
  uint64_t objects = 0, memory_replicas = 0, disk_replicas = 0;
  uint64_t evicted_objects = 0;
  uint64_t offloads_in_flight = 0;
  uint64_t promo_admitted = 0, promo_completed = 0, promo_failed = 0,
           promo_cancelled = 0, promo_expired = 0, promo_in_flight = 0;
  std::vector<uint64_t> node_promotions_ok;  // per node, in node order
  // Per node: values its SSD tier read from the disk (gets and promotions),
  // and promotions served from a get's read instead (ssd_read_share_bytes).
  std::vector<uint64_t> node_disk_reads, node_shared_reads, node_joined_reads,
      node_promotion_joins;
  // Per node: promotion batches that waited for gets' disk reads, of them
  // those that went after the bound, and the total wait in us
  // (promotion_yield_to_gets_ms).
  std::vector<uint64_t> node_yields, node_yields_timed_out, node_yield_wait_us;
  // Per node: reads its SSD tier's I/O backend finished, and their summed
  // time from submission to completion in us (IoBackend::read_timing).
  std::vector<uint64_t> node_io_reads, node_io_read_us;
  // Per phase of kPromotionPhases, per node: the time its promotion workers
  // spent in it (kvpool_node_promotion_phase_microseconds_total), in us.
  std::map<std::string, std::vector<uint64_t>> node_phase_us;
  double MainRatio() const {
    return main_capacity ? double(main_used) / double(main_capacity) : 0;
  }
};

// The steps of a holder's promotion chain that its workers time
// (docs/ssd_tier.md): round trips, the waits before a read, the read, the
// copy.
inline constexpr const char* kPromotionPhases[] = {
    "alloc", "held_budget", "held_offload", "held_gets",
    "read",  "write",       "notify"};

ClusterSnapshot TakeSnapshot(LocalCluster& cluster);

// The fields of a snapshot that the master's /status JSON carries (objects,
// replicas, evictions, offloads, DRAM per segment kind, promotions).
void ReadStatusJson(const nlohmann::json& status, ClusterSnapshot* s);

// Promotions node `i` reported to the master (its SSD tier's counter), ok or
// failed.
uint64_t NodePromotions(LocalCluster& cluster, size_t i, bool ok);
// Node `i`'s disk reads and shared reads (see ClusterSnapshot).
uint64_t NodeDiskReads(LocalCluster& cluster, size_t i);
uint64_t NodeSharedReads(LocalCluster& cluster, size_t i);
// Gets served by a promotion's read of the same key (node/in_flight_reads.h).
uint64_t NodeJoinedReads(LocalCluster& cluster, size_t i);
// Promotions served by a get's read of the same key in flight.
uint64_t NodePromotionJoins(LocalCluster& cluster, size_t i);

// Master counters the report needs, read once at the end of an arm.
struct MasterCounters {
  std::map<std::string, uint64_t> trigger_status;      // BatchPrefetchToMemory
  std::map<std::string, uint64_t> fate;                // prefetched replicas
  std::map<std::string, uint64_t> promotion_rejected;  // promote-on-hit
  std::map<std::string, uint64_t> outcome;  // "source/result" of promotions
  // Router promotions dropped unread past their deadline, by where
  // ("master", "holder"): the fate "expired" of tasks that never landed.
  std::map<std::string, uint64_t> deadline_expired;
  uint64_t buffer_recycled = 0;  // kvpool_master_prefetch_buffer_recycled
  // THROTTLED_WATERMARK answers that were the holder's full buffer (the
  // rest were the main cache's watermark).
  uint64_t buffer_full = 0;
  // At those refusals, the buffer's bytes summed by what held them:
  // replicas ("used") or queued tasks' reservations ("reserved").
  std::map<std::string, uint64_t> buffer_full_bytes;
  std::vector<uint64_t> node_promotions_ok, node_promotions_failed;
};

MasterCounters ReadCounters(LocalCluster& cluster);

// The fate labels the replay knows; "landed_after_get" is the master's
// newer fate (a promotion that landed after its get had read the SSD): it
// reads 0 on a master that does not count it yet.
inline const std::vector<std::string>& FateLabels() {
  static const std::vector<std::string> k = {
      "read_from_dram", "read_after_lease_end", "landed_after_get",
      "evicted_unread", "removed_unread"};
  return k;
}

}  // namespace kvpool::replay

#endif  // KVPOOL_REPLAY_CLUSTER_PROBE_H_
