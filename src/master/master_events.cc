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
                                  uint8_t media, std::string_view node,
                                  events::Trigger trigger, bool ssd_copy,
                                  const std::string* tenant_name) {
  if (events_ == nullptr) return;
  // Views, copied once into the queue's log: no string built per event.
  const std::string_view tenant = tenant_name != nullptr
                                      ? std::string_view(*tenant_name)
                                      : tenants_.NameView(key.tenant);
  events_->Append({kind, media, trigger, ssd_copy, size}, tenant, key.key,
                  node);
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
                                  bool reverse,
                                  const std::string* tenant_name) {
  if (events_ == nullptr) return;
  // Runs under a shard lock for every put: no allocation for the usual one
  // or two holders, no reference counting of segment infos. A memory
  // copy's holder comes from the segment manager's per-thread cache (a
  // view, valid until the next HolderOf); a disk copy's from the node
  // registry, into *owned.
  auto holder = [&](const Replica& r, std::string_view* node,
                    std::string* owned) {
    if (r.kind == ReplicaKind::kLocalDisk) {
      // A disk replica's `segment` is its holder's node index.
      if (auto info = nodes_.Info(r.segment)) {
        *owned = info->node_id;
        *node = *owned;
      }
      return uint8_t{events::kMediumSsd};
    }
    SegmentKind seg_kind;
    if (!segments_.HolderOf(r.segment, node, &seg_kind))
      return uint8_t{events::kMediumDram};  // unmounted: holder unknown
    return seg_kind == SegmentKind::kPrefetchBuffer
               ? uint8_t{events::kMediumPrefetchBuffer}
               : uint8_t{events::kMediumDram};
  };
  std::string owned;
  if (replicas.size() == 1) {
    if (replicas[0].status != ReplicaStatus::kComplete) return;
    std::string_view node;
    const uint8_t medium = holder(replicas[0], &node, &owned);
    EmitTierEvent(kind, key, size, medium, node, trigger, ssd_copy,
                  tenant_name);
    return;
  }
  // A key has few replicas: a linear scan groups them by node.
  absl::InlinedVector<std::pair<std::string, uint8_t>, 2> nodes;
  for (const auto& r : replicas) {
    if (r.status != ReplicaStatus::kComplete) continue;
    std::string_view node;
    const uint8_t medium = holder(r, &node, &owned);
    auto it = std::find_if(nodes.begin(), nodes.end(),
                           [&](const auto& n) { return n.first == node; });
    if (it == nodes.end()) {
      nodes.emplace_back(std::string(node), medium);
    } else {
      it->second |= medium;
    }
  }
  if (reverse) std::reverse(nodes.begin(), nodes.end());
  for (const auto& [node, media] : nodes)
    EmitTierEvent(kind, key, size, media, node, trigger, ssd_copy, tenant_name);
}

void MasterService::EmitCleared(const std::string& tenant) {
  if (events_ == nullptr) return;
  events::TierEventHead head;
  head.kind = events::TierEventKind::kCleared;
  events_->Append(head, tenant, {}, {});
}

}  // namespace kvpool
