#include "master/placement_policy.h"

#include <algorithm>
#include <chrono>
#include <utility>

namespace kvpool {

PlacementPolicy::Options PlacementPolicy::Options::FromConfig(
    const MasterConfig& c) {
  Options o;
  o.eviction_ratio = c.eviction_ratio;
  o.enable_offload = c.enable_offload;
  o.put_offload_wait_ms = c.put_offload_wait_ms;
  return o;
}

PlacementPolicy::PlacementPolicy(Options options, SegmentManager& segments,
                                 NodeRegistry& nodes,
                                 OffloadScheduler& offloads,
                                 MetricsRegistry& metrics, EvictFn evict)
    : options_(options),
      segments_(segments),
      nodes_(nodes),
      offloads_(offloads),
      metrics_(metrics),
      evict_(std::move(evict)) {}

std::vector<Placement> PlacementPolicy::Allocate(const Request& request) {
  const uint64_t size = request.size;
  std::vector<std::string> preferred;
  if (!request.preferred_node.empty())
    preferred.emplace_back(request.preferred_node);
  preferred.insert(preferred.end(), request.preferred_nodes.begin(),
                   request.preferred_nodes.end());
  for (const auto& n : request.excluded_nodes) nodes_.ReportUnreachable(n);
  const std::vector<std::string> excluded = nodes_.Unreachable();
  auto placements = segments_.Allocate(size, request.replica_num,
                                       SegmentKind::kMain, preferred, excluded);
  if (placements.empty()) {
    placements =
        AllocateAfterEviction(size, request.replica_num, preferred, excluded);
  }
  if (placements.empty()) {
    // Soft partition: an ordinary put may overflow into prefetch buffers
    // (the RFC's v1); prefetch then throttles until the buffer drains.
    placements =
        segments_.Allocate(size, request.replica_num,
                           SegmentKind::kPrefetchBuffer, preferred, excluded);
    if (!placements.empty()) {
      metrics_
          .GetCounter("kvpool_master_put_buffer_overflow_total", "",
                      "puts placed in a prefetch buffer: main DRAM was full")
          .Inc();
    }
  }
  return placements;
}

std::vector<Placement> PlacementPolicy::AllocateAfterEviction(
    uint64_t size, int replica_num, const std::vector<std::string>& preferred,
    const std::vector<std::string>& excluded) {
  // Make room synchronously rather than failing a put the pool could hold.
  // With offload on, DRAM may be full of keys whose SSD copy is still
  // being written: wait for those copies (each result wakes us) rather
  // than drop them or refuse the put; bounded by put_offload_wait_ms.
  auto deadline = std::chrono::steady_clock::now() +
                  std::chrono::milliseconds(options_.put_offload_wait_ms);
  bool waited = false, evicted = false;
  std::vector<Placement> placements;
  for (;;) {
    // Evicted ranges become free once their nodes have applied the frees
    // (a heartbeat round trip): evict again only if those will not do.
    if (segments_.HeldBytes(SegmentKind::kMain) < size) {
      // A put finds no room also when segments are closed rather than full
      // (re-mounted after a master change, held for a lease period and
      // until their directories are in): evicting then frees nothing the
      // put can take and drops acknowledged values for nothing. So the segments
      // open now are read first, the put tried once more (one may have opened
      // since it looked), and only those segments, found without room, are
      // evicted from.
      const std::vector<uint32_t> open = segments_.OpenIds(SegmentKind::kMain);
      if (open.empty()) break;
      placements = segments_.Allocate(size, replica_num, SegmentKind::kMain,
                                      preferred, excluded);
      if (!placements.empty()) break;
      if (!evicted) {
        metrics_
            .GetCounter("kvpool_master_put_evictions_total", "",
                        "eviction passes started by a put that found no room")
            .Inc();
        evicted = true;
      }
      uint64_t cap = segments_.Usage(SegmentKind::kMain).capacity;
      evict_(std::max<uint64_t>(
                 size, uint64_t(options_.eviction_ratio * double(cap))),
             open);
    }
    placements = segments_.Allocate(size, replica_num, SegmentKind::kMain,
                                    preferred, excluded);
    const bool room_coming =
        (options_.enable_offload && offloads_.in_flight() > 0) ||
        segments_.HeldBytes(SegmentKind::kMain) > 0;
    if (!placements.empty() || !room_coming ||
        std::chrono::steady_clock::now() >= deadline) {
      break;
    }
    waited = true;
    offloads_.WaitForRoom(std::min(
        deadline,
        std::chrono::steady_clock::now() + std::chrono::milliseconds(50)));
  }
  if (waited)
    metrics_.GetCounter("kvpool_master_put_waited_for_offload_total").Inc();
  return placements;
}

}  // namespace kvpool
