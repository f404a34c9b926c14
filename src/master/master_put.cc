// MasterService's puts: PutStart in its named steps (validate, clear the
// way past an existing or abandoned put of the key, allocate with eviction
// if need be (PlacementPolicy, placement_policy.h), record the pending
// put), PutEnd / BatchPutEnd, PutRevoke.
// Split from master_service.cc to keep each file to one concern; both
// implement the one MasterService class.
#include <fmt/format.h>

#include <algorithm>

#include "common/failpoint.h"
#include "master/master_service.h"

namespace kvpool {

Result<std::vector<ReplicaDesc>> MasterService::PutStart(
    const std::string& tenant, const std::string& key, uint64_t size,
    const PutOptions& opts) {
  auto fail = [&](Status s) {
    CountResult("puts", s.code());
    return s;
  };
  if (Status s = ValidatePut(tenant, key, size, opts); !s.ok()) return fail(s);
  ObjectKey okey;
  TenantPin pin;
  if (Status s = PinKey(tenant, key, &okey, &pin); !s.ok()) return fail(s);
  auto& shard = objects_.ShardFor(okey);
  const int64_t now = clock_->NowMs();
  {
    MutexLock lock(&shard.mu());
    if (Status s = ClearWayForPut(shard, okey, opts.upsert, now); !s.ok())
      return fail(s);
  }
  std::vector<Placement> placements =
      placement_.Allocate(PlacementPolicy::Request{
          .size = size,
          .replica_num = opts.replica_num,
          .preferred_node = opts.preferred_node,
          .preferred_nodes = opts.preferred_nodes,
          .excluded_nodes = opts.excluded_nodes,
      });
  if (placements.empty()) {
    return fail(Status(
        ErrorCode::NO_AVAILABLE_HANDLE,
        fmt::format("no segment has {} free bytes after eviction", size)));
  }
  ObjectMeta meta = NewPendingObject(size, opts, now, placements);
  // Drawn after the allocation and before the object is published (nobody
  // can free these ranges before then), so it is greater than the
  // generation of every earlier owner of any byte of them.
  const uint64_t write_generation = write_generations_.Next();
  std::vector<ReplicaDesc> out;
  for (const auto& r : meta.replicas) {
    out.push_back(Describe(r, size));
    out.back().write_generation = write_generation;
  }
  if (Status s = RecordPendingPut(shard, okey, opts.upsert, now, placements,
                                  std::move(meta), &pin, opts.client);
      !s.ok()) {
    return fail(s);
  }
  CountResult("puts", ErrorCode::OK);
  // Wake the eviction thread as soon as the watermark is crossed instead of
  // waiting for its next tick, so puts rarely have to evict synchronously.
  if (segments_.Usage(SegmentKind::kMain).ratio() >=
      config_.eviction_high_watermark_ratio) {
    bg_cv_.Signal();
  }
  return out;
}

Status MasterService::ValidatePut(const std::string& tenant,
                                  const std::string& key, uint64_t size,
                                  const PutOptions& opts) const {
  if (Status s = ValidateName(tenant, key); !s.ok()) return s;
  if (size == 0) return Status(ErrorCode::INVALID_PARAMS, "size must be > 0");
  uint64_t largest = segments_.LargestCapacity(SegmentKind::kMain);
  if (largest == 0) {
    return Status(ErrorCode::NO_AVAILABLE_HANDLE,
                  "no DRAM segment is mounted: no node has joined");
  }
  if (size > largest) {
    return Status(ErrorCode::INVALID_PARAMS,
                  fmt::format("size {} exceeds the largest segment ({} bytes)",
                              size, largest));
  }
  if (opts.replica_num < 1 || opts.replica_num > 16) {
    return Status(ErrorCode::INVALID_PARAMS, "replica_num must be in [1, 16]");
  }
  return Status::OK();
}

Status MasterService::ClearWayForPut(Shard& shard, const ObjectKey& okey,
                                     bool upsert, int64_t now) {
  const int64_t discard_ms = config_.put_start_discard_timeout_sec * 1000;
  const int64_t release_ms = config_.put_start_release_timeout_sec * 1000;
  auto it = shard.objects().find(okey);
  auto up = shard.upserts().find(okey);
  if (up != shard.upserts().end()) {
    if (now - up->second.last_access_ms() < discard_ms) {
      return Status(ErrorCode::REPLICA_IS_NOT_READY,
                    "an upsert of this key is in progress");
    }
    ReleaseReplicas(up->second.replicas,
                    up->second.last_access_ms() + release_ms);
    shard.upserts().erase(up);
    tenants_.Unref(okey.tenant);
  }
  if (it == shard.objects().end()) return Status::OK();
  ObjectMeta& m = it->second;
  if (m.HasProcessing()) {
    if (now - m.last_access_ms() < discard_ms) {
      return Status(ErrorCode::OBJECT_ALREADY_EXISTS,
                    "a put of this key is in progress");
    }
    EraseObject(shard, it, m.last_access_ms() + release_ms);
    metrics_.GetCounter("kvpool_master_put_discarded_total").Inc();
    return Status::OK();
  }
  if (!upsert) return Status(ErrorCode::OBJECT_ALREADY_EXISTS);
  return Status::OK();
}

ObjectMeta MasterService::NewPendingObject(
    uint64_t size, const PutOptions& opts, int64_t now,
    const std::vector<Placement>& placements) {
  ObjectMeta meta;
  meta.size = size;
  meta.version = versions_.Next();
  meta.set_last_access_ms(now);
  meta.hard_pin = opts.hard_pin;
  if (opts.soft_pin) {
    meta.soft_pin_ttl_ms = static_cast<uint32_t>(std::clamp<int64_t>(
        opts.soft_pin_ttl_ms > 0 ? opts.soft_pin_ttl_ms
                                 : config_.default_kv_soft_pin_ttl,
        1, UINT32_MAX));
    meta.set_soft_pin_deadline_ms(now + meta.soft_pin_ttl_ms);
  }
  meta.replicas.reserve(placements.size());
  for (const auto& p : placements) {
    meta.replicas.push_back(Replica{p.offset, p.segment, p.handle,
                                    ReplicaKind::kMemory,
                                    ReplicaStatus::kProcessing});
  }
  return meta;
}

Status MasterService::RecordPendingPut(Shard& shard, const ObjectKey& okey,
                                       bool upsert, int64_t now,
                                       const std::vector<Placement>& placements,
                                       ObjectMeta meta, TenantPin* pin,
                                       const ClientId& client) {
  MutexLock lock(&shard.mu());
  // Another put may have raced us between the check and the allocation.
  if (Status s = ClearWayForPut(shard, okey, upsert, now); !s.ok()) {
    for (const auto& p : placements) segments_.Free(p);
    return s;
  }
  // A segment unmounted since the allocation (its node gone, or memory its
  // owner took back: mount_segment) may have been swept from this shard
  // already: a replica there must not be published. Checked under the
  // shard lock, which the sweep takes after the unmount.
  for (const auto& p : placements) {
    if (segments_.IsMounted(p.segment)) continue;
    for (const auto& q : placements) segments_.Free(q);
    return Status(ErrorCode::NO_AVAILABLE_HANDLE,
                  "a segment chosen for the put was unmounted meanwhile");
  }
  if (shard.objects().count(okey)) {
    shard.upserts()[okey] = std::move(meta);
  } else {
    shard.objects().emplace(okey, std::move(meta));
  }
  pin->Transfer();  // to the object or upsert
  // Heard of under the lock, so a reclaim pass that reaches this shard
  // later finds the client alive (it looks each client up as it goes).
  if (!client.empty()) ClientPing(client).status().IgnoreError();
  shard.pending_puts()[okey] = client;
  return Status::OK();
}

Status MasterService::PutEnd(const std::string& tenant,
                             const std::string& key) {
  std::vector<std::pair<uint32_t, uint64_t>> holders;
  Status s = CommitPut(tenant, key, &holders);
  // An upsert's old value must not come back as current after a master
  // crash; with put_waits_for_holders the new one must survive it.
  AwaitHolders(holders);
  if (s.ok()) KVPOOL_FAILPOINT("master.put_end.after_commit");
  return s;
}

std::vector<Status> MasterService::BatchPutEnd(
    const std::string& tenant, const std::vector<std::string>& keys) {
  std::vector<std::pair<uint32_t, uint64_t>> holders;
  std::vector<Status> out;
  out.reserve(keys.size());
  for (const auto& k : keys) out.push_back(CommitPut(tenant, k, &holders));
  AwaitHolders(holders);
  for (const auto& s : out) {
    if (s.ok()) KVPOOL_FAILPOINT("master.put_end.after_commit");
  }
  return out;
}

Status MasterService::CommitPut(
    const std::string& tenant, const std::string& key,
    std::vector<std::pair<uint32_t, uint64_t>>* holders) {
  if (Status s = ValidateName(tenant, key); !s.ok()) return s;
  ObjectKeyView okey;
  if (!LookupKey(tenant, key, &okey))
    return Status(ErrorCode::OBJECT_NOT_FOUND);
  auto& shard = objects_.ShardFor(okey);
  MutexLock lock(&shard.mu());
  const int64_t now = clock_->NowMs();
  auto up = shard.upserts().find(okey);
  if (up != shard.upserts().end()) {
    // The upsert's reference on the tenant passes to the object it becomes,
    // so the tenant outlives the erase of the old value below.
    ObjectMeta fresh = std::move(up->second);
    shard.upserts().erase(up);
    for (auto& r : fresh.replicas) r.status = ReplicaStatus::kComplete;
    fresh.set_last_access_ms(now);
    auto it = shard.objects().find(okey);
    int64_t not_before = 0;
    if (it != shard.objects().end()) {
      // Readers of the old value hold its lease: keep its bytes until then.
      // Its SSD copies, promotion and offload describe the old bytes: gone.
      not_before = it->second.lease_deadline_ms();
      const ReplicaList replicas = it->second.replicas;
      EmitPerHolder(events::TierEventKind::kReplaced, it->first,
                    it->second.size, it->second.replicas,
                    events::Trigger::kNone, false, false, &tenant);
      DropDiskCopies(it->first, it->second);
      EraseObject(shard, it, not_before, EraseCause::kReplaced);
      CollectHolders(replicas, holders);
    }
    auto [ins, ok] = shard.objects().emplace(ObjectKey{okey.tenant, okey.key},
                                             std::move(fresh));
    NotePlaced(ins->first, ins->second);
    EmitPerHolder(events::TierEventKind::kStored, ins->first, ins->second.size,
                  ins->second.replicas, events::Trigger::kNone, false,
                  /*reverse=*/true, &tenant);
    if (config_.put_waits_for_holders)
      CollectHolders(ins->second.replicas, holders);
    if (config_.enable_offload && !config_.offload_on_evict) {
      offload_scheduler_.Queue(shard, ins->first, ins->second);
    }
    ForgetPendingPut(shard, okey);
    return Status::OK();
  }
  auto it = shard.objects().find(okey);
  if (it == shard.objects().end() || !it->second.HasProcessing()) {
    return Status(ErrorCode::OBJECT_NOT_FOUND,
                  "no put in progress for this key");
  }
  for (auto& r : it->second.replicas) r.status = ReplicaStatus::kComplete;
  it->second.set_last_access_ms(now);
  NotePlaced(it->first, it->second);
  EmitPerHolder(events::TierEventKind::kStored, it->first, it->second.size,
                it->second.replicas, events::Trigger::kNone, false,
                /*reverse=*/true, &tenant);
  if (config_.put_waits_for_holders)
    CollectHolders(it->second.replicas, holders);
  if (config_.enable_offload && !config_.offload_on_evict) {
    // Proactive offload: handed to the holder now (its heartbeat is a long
    // poll), so the SSD copy usually exists before eviction needs it.
    offload_scheduler_.Queue(shard, it->first, it->second);
  }
  ForgetPendingPut(shard, okey);
  return Status::OK();
}

Status MasterService::PutRevoke(const std::string& tenant,
                                const std::string& key) {
  if (Status s = ValidateName(tenant, key); !s.ok()) return s;
  ObjectKeyView okey;
  if (!LookupKey(tenant, key, &okey))
    return Status(ErrorCode::OBJECT_NOT_FOUND);
  auto& shard = objects_.ShardFor(okey);
  MutexLock lock(&shard.mu());
  // The client gave up on its write, but over TCP a write it sent may still
  // land (a node that was paused processes what its socket holds): the
  // range is reused only after the grace, never under a late write.
  const int64_t not_before = clock_->NowMs() + kTaskGraceMs;
  auto up = shard.upserts().find(okey);
  if (up != shard.upserts().end()) {
    ReleaseReplicas(up->second.replicas, not_before);
    shard.upserts().erase(up);
    ForgetPendingPut(shard, okey);
    tenants_.Unref(okey.tenant);
    return Status::OK();
  }
  auto it = shard.objects().find(okey);
  if (it == shard.objects().end() || !it->second.HasProcessing()) {
    return Status(ErrorCode::OBJECT_NOT_FOUND,
                  "no put in progress for this key");
  }
  auto& reps = it->second.replicas;
  ReleaseReplicas(it->second.TakeReplicas([](const Replica& r) {
    return r.status == ReplicaStatus::kProcessing;
  }),
                  not_before);
  const bool gone = reps.empty();
  if (gone) shard.objects().erase(it);
  ForgetPendingPut(shard, okey);
  if (gone) tenants_.Unref(okey.tenant);
  return Status::OK();
}

void MasterService::ForgetPendingPut(Shard& shard, const ObjectKeyView& okey) {
  if (shard.upserts().count(okey)) return;
  auto it = shard.objects().find(okey);
  if (it != shard.objects().end() && it->second.HasProcessing()) return;
  auto p = shard.pending_puts().find(okey);
  if (p != shard.pending_puts().end()) shard.pending_puts().erase(p);
}

}  // namespace kvpool
