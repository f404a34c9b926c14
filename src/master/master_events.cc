// The master's side of KV events (docs/kv_events.md): what each change of a
// key's tiers pushes into the event queue. The hot path pays one push of a
// small record; hashing, naming and encoding are the publisher's.
#include "events/tier_event.h"
#include "master/master_service.h"

namespace kvpool {

void MasterService::EmitTierEvent(events::TierEventKind kind,
                                  const ObjectKey& key, uint64_t size,
                                  uint8_t media, events::Trigger trigger,
                                  bool ssd_copy) {
  if (events_ == nullptr) return;
  events::TierEvent ev;
  ev.kind = kind;
  ev.media = media;
  ev.trigger = trigger;
  ev.ssd_copy = ssd_copy;
  ev.size = size;
  ev.tenant = tenants_.Name(key.tenant);
  ev.key = key.key;
  events_->Push(std::move(ev));
}

uint8_t MasterService::MediumOfSegment(uint32_t segment) const {
  return segments_.KindOf(segment) == SegmentKind::kPrefetchBuffer
             ? events::kMediumPrefetchBuffer
             : events::kMediumDram;
}

uint8_t MasterService::MediaOf(const ObjectMeta& m, const Replica* only) const {
  if (events_ == nullptr) return 0;
  uint8_t media = 0;
  for (const auto& r : m.replicas) {
    if (r.status != ReplicaStatus::kComplete || (only && &r != only)) continue;
    media |= r.kind == ReplicaKind::kLocalDisk ? uint8_t{events::kMediumSsd}
                                               : MediumOfSegment(r.segment);
  }
  return media;
}

void MasterService::EmitCleared(const std::string& tenant) {
  if (events_ == nullptr) return;
  events::TierEvent ev;
  ev.kind = events::TierEventKind::kCleared;
  ev.tenant = tenant;
  events_->Push(std::move(ev));
}

}  // namespace kvpool
