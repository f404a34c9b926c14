// MasterService's SSD-tier bookkeeping: offload tasks, LOCAL_DISK replicas,
// and the per-key promotion entry shared by every promotion path, with its
// gates and reaper. Split from master_service.cc to keep each file to one
// concern; both implement the one MasterService class.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>

#include "common/failpoint.h"
#include "master/master_service.h"

namespace kvpool {

namespace {

// A router trigger announced a get of `m`.
void CountPendingRead(ObjectMeta& m, int64_t now_ms) {
  if (m.pending_prefetch_reads == 0) {
    m.pending_trigger_ms32 = static_cast<uint32_t>(now_ms);
  }
  if (m.pending_prefetch_reads < UINT8_MAX) ++m.pending_prefetch_reads;
}

}  // namespace

uint64_t MasterService::LostKeyHash(uint64_t tenant_hash,
                                    std::string_view key) {
  // Independent of the table's hash, so shard-mates do not cluster here.
  const uint64_t h = std::hash<std::string_view>()(key);
  return (h ^ (tenant_hash << 32 | tenant_hash >> 32)) * 0x9E3779B97F4A7C15ull +
         key.size();
}

MasterService::ObjectMap::iterator MasterService::EraseObject(
    Shard& shard, ObjectMap::iterator it, int64_t not_before_ms,
    EraseCause cause) {
  const int64_t now = clock_->NowMs();
  ObjectKeyView kv{it->first.tenant, it->first.key};
  const uint32_t tenant = it->first.tenant;
  const uint64_t tenant_hash = tenants_.NameHash(tenant);
  // No copy older than what ends here may come back. A lost value raises
  // nothing: its node was only declared dead and may bring it back, and
  // raising a shared slot to its version would refuse other keys' good
  // copies (a node's whole segment is lost at once). The price: after two
  // holders of one key were both declared dead, the one with the older
  // value may return first and serve it (docs/failure_model.md).
  if (cause == EraseCause::kRemoved) {
    floor_.Raise(FloorHash(tenant_hash, kv.key), versions_.Next());
  } else if (cause == EraseCause::kReplaced) {
    // Not to now: the value that replaces this one was numbered at its
    // PutStart, before now, and must still come back from its holders.
    floor_.Raise(FloorHash(tenant_hash, kv.key), it->second.version + 1);
  } else if (cause == EraseCause::kEvicted) {
    floor_.Raise(FloorHash(tenant_hash, kv.key), it->second.version);
  } else {
    // Exactly, per key: an older copy elsewhere must not replace it.
    lost_versions_.Record(LostKeyHash(tenant_hash, kv.key), it->second.version);
  }
  if (offload_scheduler_.Cancel(shard, kv)) {
    // The holder may be copying this memory to its SSD right now.
    not_before_ms = std::max(not_before_ms, now + kTaskGraceMs);
  }
  if (shard.promotions().count(kv)) promotions_.Cancel(shard, kv);
  leases_.CountPrefetchFate(it->second, "removed_unread");
  ReleaseReplicas(it->second.replicas, not_before_ms);
  // absl's erase(iterator) returns nothing; it leaves other iterators valid.
  auto next = std::next(it);
  shard.objects().erase(it);
  // Last: the tenant may go with its last object.
  tenants_.Unref(tenant);
  return next;
}

void MasterService::DropDiskCopies(const ObjectKey& key, const ObjectMeta& m) {
  for (const auto& r : m.replicas) {
    if (r.kind != ReplicaKind::kLocalDisk) continue;
    // In the directory's sequence where the node keeps one, so a remove
    // can wait until the drop is applied; on the heartbeat's list if not.
    if (!nodes_.PushDiskDropEvent(r.segment, tenants_.Name(key.tenant),
                                  std::string(key.key), m.version)) {
      nodes_.PushDiskDrop(r.segment, DiskDropMsg{tenants_.Name(key.tenant),
                                                 std::string(key.key)});
    }
    metrics_
        .GetCounter("kvpool_master_disk_drops_total", "",
                    "SSD copies of removed or replaced values the holders "
                    "were told to delete")
        .Inc();
  }
}

std::vector<ErrorCode> MasterService::NotifyOffload(
    const std::string& node_id, const std::vector<OffloadResultIn>& results) {
  KVPOOL_FAILPOINT("master.offload_ack.before");
  std::vector<ErrorCode> out(results.size(), ErrorCode::OK);
  auto idx = nodes_.IndexOf(node_id);
  if (!idx) {
    std::fill(out.begin(), out.end(), ErrorCode::CLIENT_NOT_FOUND);
    return out;
  }
  uint64_t acks = 0, nacks = 0, stale = 0, write_failures = 0;
  for (size_t i = 0; i < results.size(); ++i) {
    const auto& r = results[i];
    ObjectKeyView kv;
    if (!ValidateName(r.tenant, r.key).ok()) {
      out[i] = ErrorCode::INVALID_PARAMS;  // no task ever named it
      ++stale;
      continue;
    }
    if (!LookupKey(r.tenant, r.key, &kv)) {
      out[i] = ErrorCode::OBJECT_NOT_FOUND;
      ++stale;
      continue;
    }
    auto& shard = objects_.ShardFor(kv);
    MutexLock lock(&shard.mu());
    // ACK or NACK, the pin of this holder's task is released at once.
    int64_t created_ms = 0;
    if (offload_scheduler_.Answer(shard, kv, *idx, r.version, &created_ms) &&
        r.code == ErrorCode::OK) {
      tiering_metrics_.offload_duration->Observe(
          static_cast<double>(clock_->NowMs() - created_ms) / 1000.0);
    }
    if (r.code != ErrorCode::OK) {
      ++nacks;
      // The holder's SSD is out of room (its filesystem, or the tier's
      // capacity): back off. A plain write error is retried as before.
      write_failures += r.code == ErrorCode::NO_AVAILABLE_HANDLE;
      continue;  // the node holds no copy; nothing for it to drop
    }
    auto it = shard.objects().find(kv);
    if (it == shard.objects().end() || it->second.version != r.version) {
      out[i] = ErrorCode::OBJECT_NOT_FOUND;  // stale copy: the node drops it
      ++stale;
      continue;
    }
    if (!it->second.HasDiskOn(*idx)) {
      it->second.replicas.push_back(Replica{0, *idx, 0, ReplicaKind::kLocalDisk,
                                            ReplicaStatus::kComplete});
      EmitTierEvent(events::TierEventKind::kOffloaded, it->first,
                    it->second.size, events::kMediumSsd, node_id);
    }
    ++acks;
  }
  // The holder's SSD backoff; puts waiting for room may retry now.
  offload_scheduler_.Answered(*idx, acks, write_failures);
  metrics_.GetCounter("kvpool_master_offload_results_total", "result=\"ack\"")
      .Inc(acks);
  metrics_.GetCounter("kvpool_master_offload_results_total", "result=\"nack\"")
      .Inc(nacks);
  metrics_.GetCounter("kvpool_master_offload_results_total", "result=\"stale\"")
      .Inc(stale);
  return out;
}

std::vector<ErrorCode> MasterService::RegisterDiskObjects(
    const std::string& node_id, const std::vector<DiskObjectIn>& objects) {
  std::vector<ErrorCode> out(objects.size(), ErrorCode::OK);
  nodes_.Touch(node_id);  // a long re-registration is a sign of life
  auto idx = nodes_.IndexOf(node_id);
  if (!idx) {
    std::fill(out.begin(), out.end(), ErrorCode::CLIENT_NOT_FOUND);
    return out;
  }
  const int64_t now = clock_->NowMs();
  uint64_t taken = 0;
  for (size_t i = 0; i < objects.size(); ++i) {
    const auto& o = objects[i];
    if (!ValidateName(o.tenant, o.key).ok() || o.size == 0 ||
        o.size > kMaxObjectSize) {
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
    auto it = shard.objects().find(key);
    if (it != shard.objects().end() && it->second.HasDiskOn(*idx) &&
        it->second.size == o.size &&
        (o.version == 0 || it->second.version == o.version)) {
      continue;  // registered before (a repeated registration)
    }
    ObjectMap::iterator attach;
    out[i] = AdmitCopy(shard, key, o.version, o.size, &attach);
    if (out[i] != ErrorCode::OK) continue;
    Replica rep{0, *idx, 0, ReplicaKind::kLocalDisk, ReplicaStatus::kComplete};
    EmitTierEvent(events::TierEventKind::kStored, key, o.size,
                  events::kMediumSsd, node_id);
    if (attach != shard.objects().end()) {
      attach->second.replicas.push_back(rep);
    } else {
      ObjectMeta m;
      m.size = o.size;
      m.version = o.version != 0 ? o.version : versions_.Next();
      m.set_last_access_ms(now);
      m.replicas.push_back(rep);
      pin.Transfer();  // to the object
      shard.objects().emplace(std::move(key), std::move(m));
    }
    ++taken;
  }
  metrics_.GetCounter("kvpool_master_reregistered_total", "tier=\"disk\"")
      .Inc(taken);
  return out;
}

std::vector<ErrorCode> MasterService::RemoveDiskReplicas(
    const std::string& node_id, const std::vector<DiskObjectIn>& objects) {
  std::vector<ErrorCode> out(objects.size(), ErrorCode::OK);
  auto idx = nodes_.IndexOf(node_id);
  if (!idx) {
    std::fill(out.begin(), out.end(), ErrorCode::CLIENT_NOT_FOUND);
    return out;
  }
  const int64_t now = clock_->NowMs();
  for (size_t i = 0; i < objects.size(); ++i) {
    if (!ValidateName(objects[i].tenant, objects[i].key).ok()) {
      out[i] = ErrorCode::INVALID_PARAMS;
      continue;
    }
    ObjectKeyView kv;
    if (!LookupKey(objects[i].tenant, objects[i].key, &kv)) continue;
    auto& shard = objects_.ShardFor(kv);
    MutexLock lock(&shard.mu());
    auto it = shard.objects().find(kv);
    if (it == shard.objects().end() || !it->second.HasDiskOn(*idx)) continue;
    auto promo = shard.promotions().find(kv);
    if (promo != shard.promotions().end() && promo->second.holder == *idx) {
      out[i] =
          ErrorCode::UNAVAILABLE_IN_CURRENT_STATUS;  // the source is pinned
      continue;
    }
    ObjectMeta& m = it->second;
    if (m.LeaseLive(now) && !m.HasCompleteMemory()) {
      out[i] = ErrorCode::OBJECT_HAS_LEASE;  // a reader may be on its way
      continue;
    }
    auto& reps = m.replicas;
    reps.erase(std::remove_if(reps.begin(), reps.end(),
                              [&](const Replica& r) {
                                return r.kind == ReplicaKind::kLocalDisk &&
                                       r.segment == *idx;
                              }),
               reps.end());
    // The holder gave up its SSD copy (its tier is full).
    EmitTierEvent(events::TierEventKind::kEvicted, it->first, m.size,
                  events::kMediumSsd, node_id);
    if (reps.empty()) EraseObject(shard, it, 0, EraseCause::kEvicted);
  }
  return out;
}

Result<ReplicaDesc> MasterService::PromotionAllocStart(
    const std::string& node_id, const std::string& tenant,
    const std::string& key, uint64_t size, uint64_t task_id) {
  KVPOOL_FAILPOINT("master.promotion_call.before");
  if (Status s = ValidateName(tenant, key); !s.ok()) return s;
  auto idx = nodes_.IndexOf(node_id);
  if (!idx)
    return Status(ErrorCode::CLIENT_NOT_FOUND, "unknown node " + node_id);
  ObjectKeyView kv;
  if (!LookupKey(tenant, key, &kv)) return Status(ErrorCode::OBJECT_NOT_FOUND);
  auto& shard = objects_.ShardFor(kv);
  MutexLock lock(&shard.mu());
  auto st = shard.promotions().find(kv);
  auto it = shard.objects().find(kv);
  if (st == shard.promotions().end() || st->second.task_id != task_id ||
      it == shard.objects().end()) {
    return Status(ErrorCode::OBJECT_NOT_FOUND, "no such promotion task");
  }
  if (st->second.holder != *idx) {
    return Status(ErrorCode::INVALID_PARAMS,
                  "only the holder of the source may promote it");
  }
  if (size != it->second.size) {
    return Status(ErrorCode::INVALID_PARAMS,
                  fmt::format("size {} does not match the object's {}", size,
                              uint64_t{it->second.size}));
  }
  if (st->second.staged)
    return Status(ErrorCode::INVALID_PARAMS, "promotion already started");
  auto holder = nodes_.Info(*idx);
  const std::string holder_id = holder ? holder->node_id : std::string();
  std::optional<Placement> p = promotions_.Stage(st->second, size, holder_id);
  if (!p) {
    return Status(ErrorCode::NO_AVAILABLE_HANDLE, "no DRAM for the promotion");
  }
  Replica staged{p->offset, p->segment, p->handle, ReplicaKind::kMemory,
                 ReplicaStatus::kProcessing};
  ReplicaDesc desc = Describe(staged, size);
  // Under the shard lock, before the staged range can be freed.
  desc.write_generation = write_generations_.Next();
  return desc;
}

Status MasterService::NotifyPromotion(const std::string& node_id,
                                      const std::string& tenant,
                                      const std::string& key, uint64_t task_id,
                                      bool success, bool expired) {
  KVPOOL_FAILPOINT("master.promotion_call.before");
  if (Status s = ValidateName(tenant, key); !s.ok()) return s;
  auto idx = nodes_.IndexOf(node_id);
  if (!idx)
    return Status(ErrorCode::CLIENT_NOT_FOUND, "unknown node " + node_id);
  ObjectKeyView kv;
  if (!LookupKey(tenant, key, &kv)) return Status(ErrorCode::OBJECT_NOT_FOUND);
  auto& shard = objects_.ShardFor(kv);
  MutexLock lock(&shard.mu());
  auto st = shard.promotions().find(kv);
  if (st == shard.promotions().end() || st->second.task_id != task_id) {
    return Status(ErrorCode::OBJECT_NOT_FOUND,
                  "no such promotion task (cancelled or reaped)");
  }
  if (st->second.holder != *idx) {
    return Status(ErrorCode::INVALID_PARAMS,
                  "only the holder of the source may report it");
  }
  if (!success && expired && st->second.deadline_ms > 0) {
    promotions_.Expire(shard, kv, "holder");
    return Status::OK();
  }
  if (!success && expired && !st->second.staged) {
    // The holder dropped it by the deadline it was handed, which a later
    // trigger has cleared since (an exist taking it over, a router trigger
    // without one): it goes back to the holder, with none.
    auto obj = shard.objects().find(kv);
    st->second.with_holder = false;  // in the mailbox again
    if (obj != shard.objects().end() &&
        nodes_.PushPromotion(
            st->second.holder,
            PromotionTaskMsg{tenants_.Name(kv.tenant), key, obj->second.size,
                             st->second.task_id, st->second.source,
                             st->second.from_prefetch, 0})) {
      metrics_
          .GetCounter("kvpool_master_promotion_requeued_total", "",
                      "tasks a holder dropped by a deadline that had been "
                      "cleared, handed to it again")
          .Inc();
      return Status::OK();
    }
  }
  const PromotionState state = promotions_.Take(shard, st);
  Placement staged{state.staged_segment, state.staged_handle,
                   state.staged_offset};
  auto it = shard.objects().find(kv);
  bool usable = success && state.staged && it != shard.objects().end() &&
                segments_.IsMounted(state.staged_segment);
  const int source = static_cast<int>(state.source) % 3;
  tiering_metrics_.outcome[source][usable ? 0 : 1]->Inc();
  if (!usable) {
    // The holder reports after its last write. Into its own segment that
    // write is done; into another node's, over TCP, a write it gave up on
    // may still land, so that range waits out the grace first.
    if (state.staged) {
      auto seg = segments_.Info(state.staged_segment);
      auto holder = nodes_.Info(state.holder);
      if (seg && holder && seg->node_id != holder->node_id) {
        segments_.FreeAt(staged, clock_->NowMs() + kTaskGraceMs);
      } else {
        segments_.Free(staged);
      }
    }
    promotions_.Finished(false);
    return success ? Status(ErrorCode::INVALID_PARAMS,
                            "promotion was not started or lost its DRAM")
                   : Status::OK();
  }
  tiering_metrics_.promotion_duration[source]->Observe(
      static_cast<double>(clock_->NowMs() - state.created_ms) / 1000.0);
  ObjectMeta& m = it->second;
  m.replicas.insert(m.replicas.begin(),
                    Replica{staged.offset, staged.segment, staged.handle,
                            ReplicaKind::kMemory, ReplicaStatus::kComplete});
  NotePlaced(it->first, m, &m.replicas.front());
  EmitPerHolder(events::TierEventKind::kPromoted, it->first, m.size,
                std::span<const Replica>(m.replicas.data(), 1),
                static_cast<events::Trigger>(state.source),
                m.FirstCompleteDisk() != nullptr);
  const int64_t now = clock_->NowMs();
  m.set_last_access_ms(now);
  if (state.from_prefetch && state.get_before_landing) {
    // Its get came first and read the SSD: the prefetch missed its window.
    tiering_metrics_.prefetch_fate.With("landed_after_get").Inc();
  } else if (state.from_prefetch) {
    // A prefetched block must survive until its get arrives.
    m.set_lease_deadline_ms(
        std::max(m.lease_deadline_ms(), now + config_.default_kv_lease_ttl));
    m.prefetched_unread = true;
  }
  promotions_.Finished(true);
  return Status::OK();
}

void MasterService::ReapTasks(int64_t now) {
  uint64_t offload_expired = 0;
  for (size_t i = 0; i < ObjectStore::kShards; ++i) {
    auto& shard = objects_.shard(i);
    MutexLock lock(&shard.mu());
    promotions_.Reap(shard, now);
    offload_expired += offload_scheduler_.Reap(shard, now);
  }
  offload_scheduler_.CountExpired(offload_expired);
}

}  // namespace kvpool

namespace kvpool {

std::vector<MasterService::PrefetchRegistration>
MasterService::RegisterPrefetchTask(const std::string& node_id,
                                    const std::string& tenant,
                                    const std::vector<std::string>& keys) {
  std::vector<PrefetchRegistration> out(keys.size());
  auto idx = nodes_.IndexOf(node_id);
  bool serving;
  {
    MutexLock lock(&bg_mu_);
    serving = !bg_stop_;
  }
  const int64_t now = clock_->NowMs();
  for (size_t i = 0; i < keys.size(); ++i) {
    auto& r = out[i];
    if (!serving) {
      r.code = ErrorCode::UNAVAILABLE_IN_CURRENT_STATUS;
      continue;
    }
    if (Status s = ValidateName(tenant, keys[i]); !s.ok()) {
      r.code = s.code();
      continue;
    }
    ObjectKeyView kv;
    if (!LookupKey(tenant, keys[i], &kv)) {
      r.code = ErrorCode::OBJECT_NOT_FOUND;
      continue;
    }
    auto& shard = objects_.ShardFor(kv);
    MutexLock lock(&shard.mu());
    auto it = shard.objects().find(kv);
    if (it == shard.objects().end()) {
      r.code = ErrorCode::OBJECT_NOT_FOUND;
      continue;
    }
    ObjectMeta& m = it->second;
    if (m.HasProcessing() || shard.upserts().count(kv)) {
      r.code = ErrorCode::REPLICA_IS_NOT_READY;  // a put is in flight
      continue;
    }
    if (m.HasCompleteMemory()) {
      r.code = ErrorCode::PROMOTION_ALREADY_EXISTS;
      continue;
    }
    if (auto p = shard.promotions().find(kv); p != shard.promotions().end()) {
      // Still in the mailbox of this holder: it runs the task now, as its
      // own exist promotion (docs/prefetch_on_exist.md).
      if (idx && promotions_.ClaimForExist(p->second, *idx)) {
        r.task_id = p->second.task_id;
        r.size = m.size;
        continue;
      }
      promotions_.TakeOverForExist(p->second);
      r.code = ErrorCode::PROMOTION_ALREADY_EXISTS;
      continue;
    }
    if (m.FirstCompleteDisk() == nullptr) {
      r.code = ErrorCode::REPLICA_IS_NOT_READY;
      continue;
    }
    if (!idx || !m.HasDiskOn(*idx)) {
      r.code = ErrorCode::INVALID_PARAMS;  // only the holder may register
      continue;
    }
    r.task_id = promotions_.AdmitExist(shard, it->first, *idx, now);
    if (r.task_id == 0) {
      r.code = ErrorCode::KEYS_ULTRA_LIMIT;
      continue;
    }
    r.size = m.size;
  }
  return out;
}

}  // namespace kvpool

namespace kvpool {

Result<std::vector<MasterService::PrefetchStatus>>
MasterService::BatchPrefetchToMemory(const std::string& tenant,
                                     const std::vector<std::string>& keys,
                                     int64_t deadline_in_ms) {
  if (!config_.enable_prefetch_trigger) {
    return Status(ErrorCode::UNAVAILABLE_IN_CURRENT_STATUS,
                  "enable_prefetch_trigger is off");
  }
  if (Status s = ValidateTenant(tenant); !s.ok()) return s;
  std::vector<PrefetchStatus> out(keys.size(), PrefetchStatus::kNotFound);
  auto count = [&](const char* status) {
    tiering_metrics_.trigger_status.With(status).Inc();
  };
  // Phase 1, read-only: classify every key without changing anything. Keys
  // in DRAM (lease refresh) and keys with an SSD source go on to phase 2.
  std::vector<ObjectKeyView> views(keys.size());
  std::vector<size_t> candidates;
  for (size_t i = 0; i < keys.size(); ++i) {
    // A key over max_key_bytes was never stored: NOT_FOUND, as the RFC's
    // statuses have no other for it.
    if (!KeyFits(keys[i]) || !LookupKey(tenant, keys[i], &views[i])) continue;
    auto& shard = objects_.ShardFor(views[i]);
    MutexLock lock(&shard.mu());
    auto it = shard.objects().find(views[i]);
    if (it == shard.objects().end()) continue;
    const ObjectMeta& m = it->second;
    if (m.HasCompleteMemory()) {
      out[i] = PrefetchStatus::kInMemory;
      candidates.push_back(i);
    } else if (m.FirstCompleteDisk() == nullptr) {
      out[i] = PrefetchStatus::kNoLocalDisk;
    } else {
      out[i] = PrefetchStatus::kQueued;  // provisional: decided in phase 2
      candidates.push_back(i);
    }
  }
  if (prefetch_phase_hook_) prefetch_phase_hook_();
  // The main-cache watermark, read once per batch (the gate promote-on-hit
  // uses; the prefetch buffer is not part of it).
  const bool over_watermark = promotions_.OverWatermark();
  const int64_t now = clock_->NowMs();
  const int64_t lease = now + config_.prefetch_trigger_lease_ttl_ms;
  // Phase 2, read-write: the RFC's decision flow, each key under its shard
  // lock, re-checking what phase 1 saw.
  for (size_t i : candidates) {
    auto& shard = objects_.ShardFor(views[i]);
    MutexLock lock(&shard.mu());
    auto it = shard.objects().find(views[i]);
    if (out[i] == PrefetchStatus::kInMemory) {
      // In DRAM at phase 1: IN_MEMORY, its lease refreshed.
      if (it != shard.objects().end()) {
        it->second.set_lease_deadline_ms(
            std::max(it->second.lease_deadline_ms(), lease));
        CountPendingRead(it->second, now);
      }
      continue;
    }
    if (it == shard.objects().end()) {
      out[i] = PrefetchStatus::kNotFound;  // removed in between
      continue;
    }
    ObjectMeta& m = it->second;
    const Replica* src = m.FirstCompleteDisk();
    if (src == nullptr && !m.HasCompleteMemory()) {
      out[i] = PrefetchStatus::kNoLocalDisk;
      continue;
    }
    // GrantLeaseForGroup: the lease covers the trigger -> get window, so a
    // promoted replica survives until the request's get.
    m.set_lease_deadline_ms(std::max(m.lease_deadline_ms(), lease));
    CountPendingRead(m, now);
    if (m.HasCompleteMemory()) {
      // TOCTOU: a MEMORY replica appeared between the phases (a promotion
      // landed or a put completed); the lease is already granted.
      out[i] = PrefetchStatus::kInMemory;
      metrics_
          .GetCounter("kvpool_master_prefetch_toctou_total", "",
                      "keys found in DRAM by the read-write phase only")
          .Inc();
      continue;
    }
    if (auto p = shard.promotions().find(views[i]);
        p != shard.promotions().end()) {
      out[i] = PrefetchStatus::kQueued;  // idempotent re-trigger
      PromotionScheduler::ExtendDeadline(p->second, now, deadline_in_ms);
      continue;
    }
    if (over_watermark) {
      out[i] = PrefetchStatus::kThrottledWatermark;
      continue;
    }
    auto holder = nodes_.Info(src->segment);
    if (!holder) {
      out[i] = PrefetchStatus::kNoLocalDisk;  // its holder just died
      continue;
    }
    switch (promotions_.AdmitRouter(shard, it->first, m.size, src->segment,
                                    holder->node_id, now, deadline_in_ms)) {
      case PromotionScheduler::RouterAdmission::kQueued:
        out[i] = PrefetchStatus::kQueued;
        break;
      case PromotionScheduler::RouterAdmission::kCap:
        out[i] = PrefetchStatus::kThrottledCap;
        break;
      case PromotionScheduler::RouterAdmission::kBufferFull:
        out[i] = PrefetchStatus::kThrottledWatermark;
        break;
      case PromotionScheduler::RouterAdmission::kHolderGone:
        out[i] = PrefetchStatus::kNoLocalDisk;  // its holder just went
        break;
    }
  }
  for (PrefetchStatus st : out) {
    count(TieringMetrics::kTriggerStatusNames[static_cast<int>(st)]);
  }
  return out;
}

}  // namespace kvpool
