// MasterService's side of restarts: mounting (and re-mounting) segments,
// the nodes' DRAM directories, and taking back the copies nodes still hold
// after a master restart or after being declared dead, in version order.
// Split from master_service.cc to keep each file to one concern; all of
// them implement the one MasterService class.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "common/crypto.h"
#include "common/failpoint.h"
#include "events/tier_event.h"
#include "master/master_service.h"

namespace kvpool {

Result<uint32_t> MasterService::MountSegment(SegmentInfo info, bool ssd_enabled,
                                             bool pulls_promotions,
                                             bool remount,
                                             bool keeps_dram_directory,
                                             bool opens_when_served) {
  if (info.node_id.empty())
    return Status(ErrorCode::INVALID_PARAMS, "segment needs a node id");
  if (info.capacity == 0)
    return Status(ErrorCode::INVALID_PARAMS, "segment of zero bytes");
  // What a node names itself is kept for as long as it lives, and the node
  // id travels in every data-plane HELLO (at most 256 bytes there).
  if (info.node_id.size() > 256 || info.host_id.size() > 256 ||
      info.data_endpoint.size() > 512 || info.shm_path.size() > 4096) {
    return Status(ErrorCode::INVALID_PARAMS,
                  "segment names too long (node id and host id at most 256 "
                  "bytes, data endpoint 512, shm path 4096)");
  }
  std::string node = info.node_id;
  if (!remount && info.kind == SegmentKind::kMain) {
    // A fresh process under a known name (restarted before it was declared
    // dead; a process mounts its main segment first): the earlier process
    // is gone with its memory and the tasks it had taken. Drop it as if it
    // had been declared dead; its SSD copies come back with the new one.
    if (auto old = nodes_.Remove(node)) {
      spdlog::warn("node {} started again: dropping its earlier process", node);
      DropNode(*old);
    }
  }
  // A new key at each mount of a main segment (a new process, or a new view
  // of the node): every token an earlier mount's key signed stops working
  // at once. A second segment shares the main one's key.
  std::shared_ptr<const cap::Key> key;
  if (info.kind != SegmentKind::kMain) {
    if (auto idx = nodes_.IndexOf(node)) {
      if (auto known = nodes_.Info(*idx)) key = known->cap_key;
    }
  }
  if (!key && config_.data_capabilities) {
    key = std::make_shared<cap::Key>(crypto::RandomBytes(cap::kKeySize));
  }
  info.cap_key = key;
  nodes_.Register(node, info.data_endpoint, info.host_id, ssd_enabled,
                  pulls_promotions, keeps_dram_directory, key);
  // Mounted closed when the node opens it itself: no allocation sees it
  // before the node has the key and the id this reply carries.
  info.opened_by_node = opens_when_served;
  auto r = segments_.Mount(std::move(info), /*closed=*/opens_when_served);
  if (!r.ok()) return r;
  spdlog::info("mounted segment {} of node {}", r.value(), node);
  if (!remount && opens_when_served) {
    closed_segments_.Add(r.value(), /*reopen_at_ms=*/0,
                         /*awaiting_directory=*/true, /*unserved=*/true);
  } else if (remount) {
    // Closed until every lease an earlier master (or our earlier view of
    // this node) granted has ended, so no put lands on bytes a reader may
    // still copy; and until the node's directory is in, so no put takes a
    // range that holds a value about to be re-registered.
    segments_.SetClosed(r.value(), true);
    closed_segments_.Add(r.value(),
                         clock_->NowMs() + config_.default_kv_lease_ttl,
                         keeps_dram_directory || opens_when_served);
    metrics_
        .GetCounter("kvpool_master_remount_holds_total", "",
                    "re-mounted segments held for a lease period")
        .Inc();
    spdlog::warn(
        "segment {} of node {} was mounted before: nothing new is placed in "
        "it for {} ms (leases granted under the earlier mount){}",
        r.value(), node, config_.default_kv_lease_ttl,
        keeps_dram_directory ? " nor before its directory is re-registered"
                             : "");
  }
  return r;
}

Result<uint32_t> MasterService::MountExtraSegment(const std::string& node_id,
                                                  uint64_t size,
                                                  const std::string& shm_path,
                                                  bool remount) {
  if (size == 0)
    return Status(ErrorCode::INVALID_PARAMS, "segment of zero bytes");
  if (shm_path.size() > 4096) {
    return Status(ErrorCode::INVALID_PARAMS,
                  "segment names too long (shm path at most 4096 bytes)");
  }
  // Only a node the master knows adds a segment: it shares that node's
  // key, endpoint and host, and its liveness (a dead node's extra segments
  // go with it).
  auto idx = nodes_.IndexOf(node_id);
  auto node = idx ? nodes_.Info(*idx) : nullptr;
  if (!node) {
    return Status(ErrorCode::CLIENT_NOT_FOUND,
                  "unknown node " + node_id + ": mount its main segment first");
  }
  SegmentInfo info;
  info.node_id = node_id;
  info.kind = SegmentKind::kMain;
  info.capacity = size;
  info.host_id = node->host_id;
  info.shm_path = shm_path;
  info.data_endpoint = node->data_endpoint;
  info.cap_key = node->cap_key;
  info.extra = true;
  // Closed from the start (before any allocation can see it): nothing is
  // placed in it until the node serves it and says so (OpenExtraSegment),
  // and, mounted again, until the leases an earlier master granted on its
  // ranges have run out (as for a remounted main segment).
  auto r = segments_.Mount(std::move(info), /*closed=*/true);
  if (!r.ok()) return r;
  closed_segments_.Add(
      r.value(), remount ? clock_->NowMs() + config_.default_kv_lease_ttl : 0,
      /*awaiting_directory=*/true);
  spdlog::info("mounted extra segment {} of node {} ({} bytes{})", r.value(),
               node_id, size, shm_path.empty() ? ", TCP only" : "");
  return r;
}

Status MasterService::OpenExtraSegment(const std::string& node_id,
                                       uint32_t segment_id) {
  auto info = segments_.Info(segment_id);
  if (!info || info->node_id != node_id ||
      !(info->extra || info->opened_by_node)) {
    return Status(ErrorCode::SEGMENT_NOT_FOUND,
                  fmt::format("node {} has no segment {} that it opens",
                              node_id, segment_id));
  }
  // Here the awaited signal is the node's: it serves the segment.
  if (!closed_segments_.ClearAwaiting(segment_id))
    return Status::OK();  // open already
  ReopenSegments(clock_->NowMs());
  return Status::OK();
}

void MasterService::ReopenSegments(int64_t now) {
  const std::vector<uint32_t> open = closed_segments_.TakeDue(
      now, [this](uint32_t id) { return segments_.IsMounted(id); });
  for (uint32_t id : open) {
    segments_.SetClosed(id, false);
    spdlog::info("segment {} takes puts again", id);
  }
}

uint8_t MasterService::NotePlaced(const ObjectKey& key, const ObjectMeta& m,
                                  const Replica* only) {
  uint8_t media = 0;
  for (const auto& r : m.replicas) {
    if (r.kind != ReplicaKind::kMemory ||
        r.status != ReplicaStatus::kComplete || (only && &r != only))
      continue;
    auto info = segments_.Info(r.segment);
    if (!info) continue;
    media |= info->kind == SegmentKind::kPrefetchBuffer
                 ? uint8_t{events::kMediumPrefetchBuffer}
                 : uint8_t{events::kMediumDram};
    auto idx = nodes_.IndexOf(info->node_id);
    if (!idx) continue;
    DramEventMsg ev;
    ev.segment = r.segment;
    ev.offset = r.offset;
    ev.size = m.size;
    ev.tenant = tenants_.Name(key.tenant);
    ev.key = key.key;
    ev.version = m.version;
    nodes_.PushDramPlaced(*idx, std::move(ev));
  }
  return media;
}

void MasterService::CollectHolders(
    std::span<const Replica> replicas,
    std::vector<std::pair<uint32_t, uint64_t>>* out) {
  if (config_.holder_ack_timeout_ms <= 0) return;
  for (const auto& r : replicas) {
    std::optional<uint32_t> idx;
    if (r.kind == ReplicaKind::kLocalDisk) {
      idx = r.segment;
    } else if (r.status == ReplicaStatus::kComplete) {
      if (auto info = segments_.Info(r.segment))
        idx = nodes_.IndexOf(info->node_id);
    }
    if (!idx) continue;
    const uint64_t seq = nodes_.LastDramSeq(*idx);
    if (seq == 0) continue;
    bool merged = false;
    for (auto& [node, s] : *out) {
      if (node == *idx) {
        s = std::max(s, seq);
        merged = true;
      }
    }
    if (!merged) out->emplace_back(*idx, seq);
  }
}

void MasterService::AwaitHolders(
    const std::vector<std::pair<uint32_t, uint64_t>>& want) {
  if (want.empty()) return;
  if (!nodes_.WaitDramAcked(want, config_.holder_ack_timeout_ms)) {
    spdlog::warn(
        "a holder did not confirm within {} ms (paused or slow): answering "
        "anyway",
        config_.holder_ack_timeout_ms);
    metrics_
        .GetCounter("kvpool_master_holder_ack_timeouts_total", "",
                    "removes and upserts answered before every holder had "
                    "deleted the old value (a paused holder)")
        .Inc();
  }
}

ErrorCode MasterService::AdmitCopy(Shard& shard, const ObjectKey& key,
                                   uint64_t version, uint64_t size,
                                   ObjectMap::iterator* attach_to) {
  *attach_to = shard.objects().end();
  // By the tenant's name: the tenant may have been emptied and forgotten
  // since, and this copy is what creates it again.
  const uint64_t tenant_hash = tenants_.NameHash(key.tenant);
  if (version < floor_.Get(FloorHash(tenant_hash, key.key))) {
    return ErrorCode::OBJECT_NOT_FOUND;  // removed or replaced since
  }
  if (version < lost_versions_.Get(LostKeyHash(tenant_hash, key.key))) {
    return ErrorCode::OBJECT_ALREADY_EXISTS;  // a newer value was lost
  }
  if (version < tenant_floor_.Get(tenant_hash)) {
    return ErrorCode::OBJECT_NOT_FOUND;  // remove_all since
  }
  versions_.Observe(version);
  auto it = shard.objects().find(key);
  if (it == shard.objects().end()) return ErrorCode::OK;
  ObjectMeta& m = it->second;
  if (version != 0 && m.version == version && m.size == size) {
    *attach_to = it;  // another replica of the very same value
    return ErrorCode::OK;
  }
  // Versions order values across masters: the pool's is newer, or a copy
  // without a version could differ from it.
  if (version == 0 || m.version >= version) {
    return ErrorCode::OBJECT_ALREADY_EXISTS;
  }
  // The pool's value is older: it came back from another node first. A put
  // or task working on it keeps it (the newer copy is refused this time).
  if (m.HasProcessing() || shard.promotions().count(key) ||
      shard.offloads().count(key)) {
    return ErrorCode::OBJECT_ALREADY_EXISTS;
  }
  // A newer copy replaces the pool's value.
  EmitPerHolder(events::TierEventKind::kReplaced, it->first, m.size,
                m.replicas);
  DropDiskCopies(it->first, m);
  EraseObject(shard, it, m.lease_deadline_ms(), EraseCause::kLost);
  return ErrorCode::OK;
}

Result<std::vector<ErrorCode>> MasterService::RegisterMemoryObjects(
    const std::string& node_id, uint32_t segment_id,
    const std::vector<MemoryObjectIn>& objects, bool done) {
  // A node busy re-registering (a million objects take seconds) beats no
  // heartbeat meanwhile: each batch counts as one.
  if (!nodes_.Touch(node_id)) {
    return Status(ErrorCode::CLIENT_NOT_FOUND,
                  "unknown node " + node_id + ": remount");
  }
  auto info = segments_.Info(segment_id);
  if (!info || info->node_id != node_id) {
    return Status(
        ErrorCode::SEGMENT_NOT_FOUND,
        fmt::format("node {} has no segment {}", node_id, segment_id));
  }
  std::vector<ErrorCode> out(objects.size(), ErrorCode::OK);
  const int64_t now = clock_->NowMs();
  uint64_t taken = 0;
  for (size_t i = 0; i < objects.size(); ++i) {
    if (i == objects.size() / 2)
      KVPOOL_FAILPOINT("master.register_memory.midway");
    const auto& o = objects[i];
    if (!ValidateName(o.tenant, o.key).ok() || o.size == 0 ||
        o.size > info->capacity || o.offset > info->capacity - o.size) {
      out[i] = ErrorCode::INVALID_PARAMS;
      continue;
    }
    ObjectKey key;
    TenantPin pin;
    if (Status s = PinKey(o.tenant, o.key, &key, &pin); !s.ok()) {
      out[i] = s.code();
      continue;
    }
    auto& shard = objects_.ShardFor(key);
    MutexLock lock(&shard.mu());
    ObjectMap::iterator attach;
    out[i] = AdmitCopy(shard, key, o.version, o.size, &attach);
    if (out[i] != ErrorCode::OK) continue;
    auto p = segments_.AllocateAt(segment_id, o.offset, o.size);
    if (!p) {
      out[i] = ErrorCode::INVALID_PARAMS;  // overlaps a range in use
      continue;
    }
    Replica rep{p->offset, p->segment, p->handle, ReplicaKind::kMemory,
                ReplicaStatus::kComplete};
    if (attach != shard.objects().end()) {
      attach->second.replicas.insert(attach->second.replicas.begin(), rep);
    } else {
      ObjectMeta m;
      m.size = o.size;
      m.version = o.version != 0 ? o.version : versions_.Next();
      m.set_last_access_ms(now);
      m.replicas.push_back(rep);
      pin.Transfer();  // to the object
      auto [ins, ok] = shard.objects().emplace(std::move(key), std::move(m));
      attach = ins;
    }
    EmitTierEvent(events::TierEventKind::kStored, attach->first, o.size,
                  MediumOfSegment(segment_id), node_id);
    if (config_.enable_offload && !config_.offload_on_evict) {
      offload_scheduler_.Queue(shard, attach->first, attach->second);
    }
    ++taken;
  }
  metrics_
      .GetCounter("kvpool_master_reregistered_total", "tier=\"memory\"",
                  "replicas nodes still held, taken back after a restart")
      .Inc(taken);
  metrics_
      .GetCounter("kvpool_master_reregistration_refused_total",
                  "tier=\"memory\"",
                  "copies refused as older than the pool's value or removed")
      .Inc(objects.size() - taken);
  if (done) {
    closed_segments_.ClearAwaiting(segment_id);
    ReopenSegments(now);
    spdlog::info("node {}: directory of segment {} is in", node_id, segment_id);
  }
  return out;
}

}  // namespace kvpool
