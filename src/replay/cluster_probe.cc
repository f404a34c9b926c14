#include "replay/cluster_probe.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "master/master_server.h"
#include "node/node.h"
#include "replay/clock_util.h"

namespace kvpool::replay {

uint64_t NodePromotions(LocalCluster& cluster, size_t i, bool ok) {
  SsdTier* ssd = cluster.node(i).ssd();
  if (ssd == nullptr) return 0;
  return ssd->metrics().CounterValue(
      "kvpool_node_promotion_total",
      ok ? "result=\"ok\"" : "result=\"failed\"");
}

uint64_t NodeDiskReads(LocalCluster& cluster, size_t i) {
  SsdTier* ssd = cluster.node(i).ssd();
  return ssd == nullptr ? 0 : ssd->storage()->GetStats().values_read;
}

uint64_t NodeSharedReads(LocalCluster& cluster, size_t i) {
  SsdTier* ssd = cluster.node(i).ssd();
  return ssd == nullptr ? 0
                        : ssd->metrics().CounterValue(
                              "kvpool_node_promotion_shared_reads_total");
}

uint64_t NodeJoinedReads(LocalCluster& cluster, size_t i) {
  SsdTier* ssd = cluster.node(i).ssd();
  return ssd == nullptr ? 0 : ssd->joined_read_stats().joined;
}

uint64_t NodePromotionJoins(LocalCluster& cluster, size_t i) {
  SsdTier* ssd = cluster.node(i).ssd();
  return ssd == nullptr ? 0 : ssd->promotion_join_stats().joined;
}

void ReadStatusJson(const nlohmann::json& j, ClusterSnapshot* s) {
  auto u = [&](const nlohmann::json& o, const char* k) -> uint64_t {
    return o.contains(k) && o[k].is_number() ? o[k].get<uint64_t>() : 0;
  };
  s->objects = u(j, "objects");
  s->memory_replicas = u(j, "memory_replicas");
  s->disk_replicas = u(j, "disk_replicas");
  s->evicted_objects = u(j, "evicted_objects");
  s->offloads_in_flight = u(j, "offloads_in_flight");
  if (j.contains("main")) {
    s->main_used = u(j["main"], "used");
    s->main_capacity = u(j["main"], "capacity");
  }
  if (j.contains("prefetch_buffer")) {
    s->buffer_used = u(j["prefetch_buffer"], "used");
    s->buffer_capacity = u(j["prefetch_buffer"], "capacity");
  }
  if (j.contains("promotions")) {
    const auto& p = j["promotions"];
    s->promo_admitted = u(p, "admitted");
    s->promo_completed = u(p, "completed");
    s->promo_failed = u(p, "failed");
    s->promo_cancelled = u(p, "cancelled");
    s->promo_expired = u(p, "expired");
    s->promo_in_flight = u(p, "in_flight");
  }
}

ClusterSnapshot TakeSnapshot(LocalCluster& cluster) {
  ClusterSnapshot s;
  s.t = NowSec();
  MasterService& svc = cluster.master().service();
  auto j = nlohmann::json::parse(svc.StatusJson(), nullptr, false);
  if (!j.is_discarded()) ReadStatusJson(j, &s);
  // The counters themselves, not their rendering.
  PromotionCounters p = svc.promotion_counters();
  s.promo_admitted = p.admitted;
  s.promo_completed = p.completed;
  s.promo_failed = p.failed;
  s.promo_cancelled = p.cancelled;
  s.promo_expired = p.expired;
  s.promo_in_flight = p.in_flight;
  for (size_t i = 0; i < cluster.num_nodes(); ++i) {
    s.node_promotions_ok.push_back(NodePromotions(cluster, i, true));
    s.node_disk_reads.push_back(NodeDiskReads(cluster, i));
    s.node_shared_reads.push_back(NodeSharedReads(cluster, i));
    s.node_joined_reads.push_back(NodeJoinedReads(cluster, i));
    s.node_promotion_joins.push_back(NodePromotionJoins(cluster, i));
    SsdTier* ssd = cluster.node(i).ssd();
    const GetsFirst::Stats g =
        ssd ? ssd->gets_first_stats() : GetsFirst::Stats{};
    s.node_yields.push_back(g.yields);
    s.node_yields_timed_out.push_back(g.timed_out);
    s.node_yield_wait_us.push_back(g.waited_us);
    const storage::IoReadTiming io = ssd && ssd->storage()
                                         ? ssd->storage()->io_read_timing()
                                         : storage::IoReadTiming{};
    s.node_io_reads.push_back(io.reads);
    s.node_io_read_us.push_back(io.read_ns / 1000);
    for (const char* phase : kPromotionPhases) {
      s.node_phase_us[phase].push_back(
          ssd ? ssd->metrics().CounterValue(
                    "kvpool_node_promotion_phase_microseconds_total",
                    fmt::format("phase=\"{}\"", phase))
              : 0);
    }
  }
  return s;
}

MasterCounters ReadCounters(LocalCluster& cluster) {
  MetricsRegistry& m = cluster.master().service().metrics();
  MasterCounters c;
  for (const char* st : {"IN_MEMORY", "QUEUED", "THROTTLED_WATERMARK",
                         "THROTTLED_CAP", "NO_LOCAL_DISK", "NOT_FOUND"}) {
    c.trigger_status[st] =
        m.CounterValue("kvpool_master_prefetch_trigger_total",
                       fmt::format("status=\"{}\"", st));
  }
  for (const auto& f : FateLabels()) {
    c.fate[f] = m.CounterValue("kvpool_master_prefetch_fate_total",
                               fmt::format("fate=\"{}\"", f));
  }
  for (const char* w : {"master", "master_after_get", "holder"}) {
    c.deadline_expired[w] =
        m.CounterValue("kvpool_master_promotion_deadline_expired_total",
                       fmt::format("where=\"{}\"", w));
  }
  c.buffer_recycled =
      m.CounterValue("kvpool_master_prefetch_buffer_recycled_total");
  c.buffer_full = m.CounterValue("kvpool_master_prefetch_buffer_full_total");
  for (const char* part : {"used", "reserved"}) {
    c.buffer_full_bytes[part] =
        m.CounterValue("kvpool_master_prefetch_buffer_full_bytes_total",
                       fmt::format("part=\"{}\"", part));
  }
  for (const char* r : {"frequency", "watermark", "dedup", "cap"}) {
    c.promotion_rejected[r] =
        m.CounterValue("kvpool_master_promotion_rejected_total",
                       fmt::format("reason=\"{}\"", r));
  }
  for (const char* src : {"on_hit", "exist", "router"}) {
    for (const char* res : {"landed", "failed"}) {
      c.outcome[fmt::format("{}/{}", src, res)] =
          m.CounterValue("kvpool_master_promotion_outcome_total",
                         fmt::format("source=\"{}\",result=\"{}\"", src, res));
    }
  }
  for (size_t i = 0; i < cluster.num_nodes(); ++i) {
    c.node_promotions_ok.push_back(NodePromotions(cluster, i, true));
    c.node_promotions_failed.push_back(NodePromotions(cluster, i, false));
  }
  return c;
}

}  // namespace kvpool::replay
