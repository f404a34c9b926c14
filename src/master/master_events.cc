// The master's side of KV events (docs/kv_events.md): what each change of a
// key's tiers pushes into the event queue. The hot path pays one push of a
// small record; hashing, naming and encoding are the publisher's.
#include <algorithm>
#include <utility>
#include <vector>

#include "events/tier_event.h"
#include "master/master_service.h"

namespace kvpool {

void MasterService::EmitTierEvent(events::TierEventKind kind,
                                  const ObjectKey& key, uint64_t size,
                                  uint8_t media, const std::string& node,
                                  events::Trigger trigger, bool ssd_copy) {
  if (events_ == nullptr) return;
  events::TierEvent ev;
  ev.kind = kind;
  ev.media = media;
  ev.trigger = trigger;
  ev.ssd_copy = ssd_copy;
  ev.size = size;
  ev.tenant = tenants_.Name(key.tenant);
  ev.key = key.key;
  ev.node = node;
  events_->Push(std::move(ev));
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
  // A key has few replicas: a linear scan groups them by node.
  std::vector<std::pair<std::string, uint8_t>> nodes;
  for (const auto& r : replicas) {
    if (r.status != ReplicaStatus::kComplete) continue;
    std::string node;
    uint8_t medium = events::kMediumSsd;
    if (r.kind == ReplicaKind::kLocalDisk) {
      // A disk replica's `segment` is its holder's node index.
      if (auto info = nodes_.Info(r.segment)) node = info->node_id;
    } else if (auto info = segments_.Info(r.segment)) {
      node = info->node_id;
      medium = info->kind == SegmentKind::kPrefetchBuffer
                   ? uint8_t{events::kMediumPrefetchBuffer}
                   : uint8_t{events::kMediumDram};
    } else {
      medium = events::kMediumDram;  // unmounted: holder and kind unknown
    }
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
