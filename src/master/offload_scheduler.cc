#include "master/offload_scheduler.h"

#include <utility>

namespace kvpool {

OffloadScheduler::Options OffloadScheduler::Options::FromConfig(
    const MasterConfig& c) {
  Options o;
  o.offloading_queue_limit = c.offloading_queue_limit;
  o.offload_task_ttl_sec = c.offload_task_ttl_sec;
  return o;
}

OffloadScheduler::OffloadScheduler(
    Options options, const Clock* clock, SegmentManager& segments,
    NodeRegistry& nodes, MetricsRegistry& metrics,
    std::function<std::string(uint32_t)> tenant_name)
    : options_(options),
      clock_(clock),
      segments_(segments),
      nodes_(nodes),
      metrics_(metrics),
      tenant_name_(std::move(tenant_name)) {}

bool OffloadScheduler::Queue(Shard& shard, const ObjectKey& key,
                             const ObjectMeta& m, bool* holder_paused) {
  if (shard.offloads().count(key)) return true;
  if (m.FirstCompleteDisk() != nullptr) return false;
  if (in_flight_.load() >= options_.offloading_queue_limit) {
    metrics_.GetCounter("kvpool_master_offload_queue_full_total").Inc();
    return false;
  }
  for (const auto& r : m.replicas) {
    if (r.kind != ReplicaKind::kMemory || r.status != ReplicaStatus::kComplete)
      continue;
    auto seg = segments_.Info(r.segment);
    // An extra segment's memory goes back to its owner at unmount: the
    // holder copies only from its own segments.
    if (!seg || seg->extra) continue;
    auto idx = nodes_.IndexOf(seg->node_id);
    if (!idx) continue;
    auto node = nodes_.Info(*idx);
    if (!node || !node->ssd_enabled) continue;
    if (nodes_.OffloadPaused(*idx, clock_->NowMs())) {
      // Its SSD refuses writes (full): no task to fail again at once.
      if (holder_paused) *holder_paused = true;
      metrics_.GetCounter("kvpool_master_offload_paused_total").Inc();
      continue;
    }
    shard.offloads()[key] = OffloadState{*idx, m.version, clock_->NowMs()};
    ++in_flight_;
    if (!nodes_.PushOffload(
            *idx, OffloadTaskMsg{tenant_name_(key.tenant), std::string(key.key),
                                 r.segment, r.offset, m.size, m.version})) {
      // The holder went in between (declared dead, or restarted): no task
      // may wait for it until the reaper.
      shard.offloads().erase(key);
      --in_flight_;
      return false;
    }
    metrics_.GetCounter("kvpool_master_offload_tasks_total").Inc();
    return true;
  }
  return false;
}

bool OffloadScheduler::Answer(Shard& shard, const ObjectKeyView& key,
                              uint32_t node, uint64_t version,
                              int64_t* created_ms) {
  auto off = shard.offloads().find(key);
  if (off == shard.offloads().end() || off->second.node != node ||
      off->second.version != version) {
    return false;
  }
  *created_ms = off->second.created_ms;
  // ACK or NACK, the pin is released at once.
  shard.offloads().erase(off);
  --in_flight_;
  return true;
}

bool OffloadScheduler::Cancel(Shard& shard, const ObjectKeyView& key) {
  auto off = shard.offloads().find(key);
  if (off == shard.offloads().end()) return false;
  shard.offloads().erase(off);
  --in_flight_;
  return true;
}

void OffloadScheduler::DropHolder(Shard& shard, uint32_t node) {
  for (auto it = shard.offloads().begin(); it != shard.offloads().end();) {
    if (it->second.node == node) {
      it = shard.offloads().erase(it);
      --in_flight_;
    } else {
      ++it;
    }
  }
}

void OffloadScheduler::Answered(uint32_t node, uint64_t acks,
                                uint64_t write_failures) {
  if (acks > 0) {
    nodes_.OffloadSucceeded(node);
  } else if (write_failures > 0) {
    nodes_.OffloadFailed(node, clock_->NowMs());
  }
  RoomFreed();  // puts waiting for room may retry now
}

uint64_t OffloadScheduler::Reap(Shard& shard, int64_t now) {
  const int64_t offload_ttl = options_.offload_task_ttl_sec * 1000;
  uint64_t expired = 0;
  for (auto it = shard.offloads().begin(); it != shard.offloads().end();) {
    if (now - it->second.created_ms > offload_ttl) {
      it = shard.offloads().erase(it);
      --in_flight_;
      ++expired;
    } else {
      ++it;
    }
  }
  return expired;
}

void OffloadScheduler::CountExpired(uint64_t n) {
  if (n) metrics_.GetCounter("kvpool_master_offload_expired_total").Inc(n);
}

void OffloadScheduler::WaitForRoom(
    std::chrono::steady_clock::time_point until) {
  MutexLock lock(&room_mu_);
  room_cv_.WaitUntil(&room_mu_, until);
}

}  // namespace kvpool
