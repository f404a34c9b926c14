// The master's side of KV events (docs/kv_events.md): what each change of a
// key's tiers pushes into the event queue. The hot path pays one push of a
// small record; hashing, naming and encoding are the publisher's.
#include <absl/container/inlined_vector.h>

#include <algorithm>
#include <utility>

#include "events/tier_event.h"
#include "master/master_service.h"

namespace kvpool {

void MasterService::EmitTierEvent(events::TierEventKind kind,
                                  const ObjectKey& key, uint64_t size,
                                  uint8_t media, const std::string& node,
                                  events::Trigger trigger, bool ssd_copy) {
  if (events_ == nullptr) return;
  std::string tenant = tenants_.Name(key.tenant);  // outside the queue's lock
  events_->Emplace([&](events::TierEvent& ev) {
    ev.kind = kind;
    ev.media = media;
    ev.trigger = trigger;
    ev.ssd_copy = ssd_copy;
    ev.size = size;
    ev.tenant = std::move(tenant);
    ev.key = key.key;
    ev.node = node;
  });
}

uint8_t MasterService::MediumOfSegment(uint32_t segment) const {
  return segments_.KindOf(segment) == SegmentKind::kPrefetchBuffer
             ? events::kMediumPrefetchBuffer
             : events::kMediumDram;
}

void MasterService::EmitPerHolder(events::TierEventKind kind,
                                  const ObjectKey& key, uint64_t size,
                                  std::span<const Replica> replicas,
                                  events::Trigger trigger, bool ssd_copy,
                                  bool reverse) {
  if (events_ == nullptr) return;
  // Runs under a shard lock for every put: no allocation for the usual one
  // or two holders, no reference counting of segment infos.
  auto holder = [&](const Replica& r, std::string* node) {
    if (r.kind == ReplicaKind::kLocalDisk) {
      // A disk replica's `segment` is its holder's node index.
      if (auto info = nodes_.Info(r.segment)) *node = info->node_id;
      return uint8_t{events::kMediumSsd};
    }
    SegmentKind seg_kind;
    if (!segments_.HolderOf(r.segment, node, &seg_kind))
      return uint8_t{events::kMediumDram};  // unmounted: holder unknown
    return seg_kind == SegmentKind::kPrefetchBuffer
               ? uint8_t{events::kMediumPrefetchBuffer}
               : uint8_t{events::kMediumDram};
  };
  if (replicas.size() == 1) {
    if (replicas[0].status != ReplicaStatus::kComplete) return;
    std::string node;
    const uint8_t medium = holder(replicas[0], &node);
    EmitTierEvent(kind, key, size, medium, node, trigger, ssd_copy);
    return;
  }
  // A key has few replicas: a linear scan groups them by node.
  absl::InlinedVector<std::pair<std::string, uint8_t>, 2> nodes;
  for (const auto& r : replicas) {
    if (r.status != ReplicaStatus::kComplete) continue;
    std::string node;
    const uint8_t medium = holder(r, &node);
    auto it = std::find_if(nodes.begin(), nodes.end(),
                           [&](const auto& n) { return n.first == node; });
    if (it == nodes.end()) {
      nodes.emplace_back(std::move(node), medium);
    } else {
      it->second |= medium;
    }
  }
  if (reverse) std::reverse(nodes.begin(), nodes.end());
  for (const auto& [node, media] : nodes)
    EmitTierEvent(kind, key, size, media, node, trigger, ssd_copy);
}

void MasterService::EmitCleared(const std::string& tenant) {
  if (events_ == nullptr) return;
  events::TierEvent ev;
  ev.kind = events::TierEventKind::kCleared;
  ev.tenant = tenant;
  events_->Push(std::move(ev));
}

}  // namespace kvpool
