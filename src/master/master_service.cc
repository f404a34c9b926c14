#include "master/master_service.h"
#include "common/failpoint.h"
#include "common/thread_name.h"

#include <fmt/format.h>
#include <re2/re2.h>

#include <spdlog/spdlog.h>
#include "common/capability.h"

#include <algorithm>
#include <cstring>
#include <random>

namespace kvpool {

namespace {
SegmentManager::Strategy ParseStrategy(const std::string& s) {
  return s == "random" ? SegmentManager::Strategy::kRandom
                       : SegmentManager::Strategy::kFreeRatioFirst;
}
const std::string& TenantOrDefault(const std::string& t) {
  static const std::string kDefault = kDefaultTenant;
  return t.empty() ? kDefault : t;
}
// A liveness tick may count for two housekeeping periods, never for more
// than a quarter of client_ttl: after a pause every node and client keeps
// most of its grace period.
int64_t LivenessStepMs(const MasterConfig& c) {
  return std::max<int64_t>(10, std::min<int64_t>(2 * c.housekeeping_interval_ms,
                                                 c.client_ttl * 1000 / 4));
}
}  // namespace

MasterService::MasterService(MasterConfig config, const Clock* clock)
    : config_(std::move(config)),
      max_key_bytes_(static_cast<size_t>(config_.max_key_bytes)),
      max_tenant_name_bytes_(
          static_cast<size_t>(config_.max_tenant_name_bytes)),
      clock_(clock),
      segments_(ParseStrategy(config_.allocation_strategy)),
      nodes_(clock, LivenessStepMs(config_)),
      clients_(clock, LivenessStepMs(config_), config_.client_ttl * 1000,
               kMaxTrackedClients),
      incarnation_(std::random_device{}() |
                   (uint64_t(std::random_device{}()) << 32) | 1),
      emulate_pre_prefetch_(config_.emulate_pre_prefetch_master),
      floor_(static_cast<size_t>(
          std::max<int64_t>(1, config_.version_floor_slots))),
      // Tenants come and go far less often than keys.
      tenant_floor_(static_cast<size_t>(std::clamp<int64_t>(
          config_.version_floor_slots / 16, 1, int64_t{1} << 16))),
      leases_(LeasePolicy::Options::FromConfig(config_), segments_,
              LeasePolicy::Metrics{
                  .registry = &metrics_,
                  .prefetch_window = tiering_metrics_.prefetch_window,
                  .prefetch_fate = &tiering_metrics_.prefetch_fate,
              }),
      eviction_(EvictionPolicy::Options::FromConfig(config_), clock_, objects_,
                segments_, metrics_,
                EvictionPolicy::Hooks{
                    .queue_offload =
                        [this](Shard& shard, const ObjectKey& key,
                               const ObjectMeta& m, bool* holder_ssd_full) {
                          // EvictionPolicy calls its hooks under the lock.
                          shard.AssertHeld();
                          return offload_scheduler_.Queue(shard, key, m,
                                                          holder_ssd_full);
                        },
                    .count_prefetch_fate =
                        [this](ObjectMeta& m, const char* fate) {
                          leases_.CountPrefetchFate(m, fate);
                        },
                    .release_replicas =
                        [this](std::span<const Replica> replicas) {
                          ReleaseReplicas(replicas, 0);
                        },
                    .evicted =
                        [this](const ObjectKey& key, const ObjectMeta& m,
                               std::span<const Replica> taken) {
                          EmitPerHolder(events::TierEventKind::kEvicted, key,
                                        m.size, taken, events::Trigger::kNone,
                                        m.FirstCompleteDisk() != nullptr);
                        },
                    .erase_evicted =
                        [this](Shard& shard, ObjectMap::iterator it) {
                          shard.AssertHeld();  // as queue_offload
                          return EraseObject(shard, it, 0,
                                             EraseCause::kEvicted);
                        },
                }),
      promotions_(
          PromotionScheduler::Options::FromConfig(config_), clock_, segments_,
          metrics_, tiering_metrics_,
          PromotionScheduler::Hooks{
              .push_promotion =
                  [this](uint32_t holder, PromotionTaskMsg task) {
                    return nodes_.PushPromotion(holder, std::move(task));
                  },
              .tenant_name =
                  [this](uint32_t tenant) { return tenants_.Name(tenant); },
              .request_buffer_room =
                  [this](const SegmentUsage& u, uint64_t reserved,
                         uint64_t size) {
                    eviction_.RequestBufferRoom(u, reserved, size);
                    bg_cv_.SignalAll();
                  },
          }),
      offload_scheduler_(
          OffloadScheduler::Options::FromConfig(config_), clock_, segments_,
          nodes_, metrics_,
          [this](uint32_t tenant) { return tenants_.Name(tenant); }),
      placement_(PlacementPolicy::Options::FromConfig(config_), segments_,
                 nodes_, offload_scheduler_, metrics_,
                 [this](uint64_t bytes, const std::vector<uint32_t>& segs) {
                   return eviction_.EvictBytes(bytes, SegmentKind::kMain,
                                               &segs);
                 }) {
  // Never unpinned: the default tenant stays, outside max_tenants.
  tenants_.Pin(kDefaultTenant, 1);
  // The OK series exist from the start, so a scraper sees every result
  // counter (and rate() has a zero to start from) before the first call.
  for (int o = 0; o < kResultOps; ++o) {
    result_counters_[o * kResultCodeSlots].store(
        &metrics_.GetCounter(
            fmt::format("kvpool_master_{}_total", kResultOpNames[o]),
            fmt::format("result=\"{}\"", ErrorCodeName(ErrorCode::OK))),
        std::memory_order_release);
  }
  metrics_.AddGauge(
      "kvpool_master_objects", "", [this] { return double(objects_.Size()); },
      "objects known to the master");
  metrics_.AddGauge(
      "kvpool_master_tenants", "", [this] { return double(tenant_count()); },
      "tenants the master keeps besides the default one (max_tenants)");
  for (auto [kind, name] :
       {std::pair{SegmentKind::kMain, "main"},
        std::pair{SegmentKind::kPrefetchBuffer, "prefetch_buffer"}}) {
    std::string label = fmt::format("kind=\"{}\"", name);
    metrics_.AddGauge(
        "kvpool_master_segment_used_bytes", label,
        [this, kind = kind] { return double(segments_.Usage(kind).used); });
    metrics_.AddGauge(
        "kvpool_master_segment_capacity_bytes", label,
        [this, kind = kind] { return double(segments_.Usage(kind).capacity); });
    metrics_.AddGauge(
        "kvpool_master_watermark_ratio", label,
        [this, kind = kind] { return segments_.Usage(kind).ratio(); });
  }
  metrics_.GetCounter("kvpool_master_puts_released_dead_client_total", "",
                      "unfinished puts released because their client fell "
                      "silent for client_ttl (died)");
  metrics_.AddGauge(
      "kvpool_master_clients_tracked", "",
      [this] { return double(clients_.size()); },
      "clients with puts in flight heard of within client_ttl");
  metrics_.AddGauge("kvpool_master_graveyard_ranges", "",
                    [this] { return double(segments_.graveyard_size()); });
  metrics_.AddGauge("kvpool_master_dram_events_queued", "",
                    [this] { return double(nodes_.dram_events_queued()); });
  metrics_.AddGauge("kvpool_master_held_bytes", "", [this] {
    return double(segments_.HeldBytes(SegmentKind::kMain) +
                  segments_.HeldBytes(SegmentKind::kPrefetchBuffer));
  });
  metrics_.AddGauge("kvpool_master_offloads_in_flight", "",
                    [this] { return double(offload_scheduler_.in_flight()); });
  metrics_.AddGauge("kvpool_master_promotion_in_flight", "",
                    [this] { return double(promotions_.in_flight()); });
  using Field = uint64_t PromotionCounters::*;
  for (auto [name, field] :
       {std::pair{"admitted", &PromotionCounters::admitted},
        std::pair{"completed", &PromotionCounters::completed},
        std::pair{"failed", &PromotionCounters::failed},
        std::pair{"cancelled", &PromotionCounters::cancelled},
        std::pair{"expired", &PromotionCounters::expired}}) {
    metrics_.AddGauge("kvpool_master_promotions_total",
                      fmt::format("state=\"{}\"", name),
                      [this, field = Field(field)] {
                        return double(promotions_.counters().*field);
                      });
  }
}

MasterService::~MasterService() { Stop(); }

void MasterService::Start() {
  MutexLock lock(&bg_mu_);
  if (bg_thread_.joinable()) return;
  bg_stop_ = false;
  bg_thread_ = std::thread([this] {
    SetThreadName("kvp-master-bg");
    BackgroundLoop();
  });
}

void MasterService::Stop() {
  {
    MutexLock lock(&bg_mu_);
    bg_stop_ = true;
  }
  nodes_.WakeAll();
  bg_cv_.SignalAll();
  if (bg_thread_.joinable()) bg_thread_.join();
}

void MasterService::BackgroundLoop() {
  MutexLock lock(&bg_mu_);
  while (!bg_stop_) {
    bg_cv_.WaitFor(&bg_mu_,
                   std::chrono::milliseconds(config_.housekeeping_interval_ms));
    if (bg_stop_) break;
    lock.Unlock();
    EvictIfNeeded();
    Housekeep();
    lock.Lock();
  }
}

void MasterService::CountResult(const char* op, ErrorCode code) {
  // Every put, get and exist of every key lands here: the counter is looked
  // up by name once per (op, code) and then found by index, so the hot path
  // formats nothing and takes no registry lock.
  const int slot = -static_cast<int>(code);
  if (slot < 0 || slot >= kResultCodeSlots) {
    metrics_
        .GetCounter(fmt::format("kvpool_master_{}_total", op),
                    fmt::format("result=\"{}\"", ErrorCodeName(code)))
        .Inc();
    return;
  }
  int o = 0;
  while (o < kResultOps && std::strcmp(kResultOpNames[o], op) != 0) ++o;
  if (o == kResultOps) {
    metrics_
        .GetCounter(fmt::format("kvpool_master_{}_total", op),
                    fmt::format("result=\"{}\"", ErrorCodeName(code)))
        .Inc();
    return;
  }
  auto& cell = result_counters_[o * kResultCodeSlots + slot];
  Counter* c = cell.load(std::memory_order_acquire);
  if (c == nullptr) {
    c = &metrics_.GetCounter(fmt::format("kvpool_master_{}_total", op),
                             fmt::format("result=\"{}\"", ErrorCodeName(code)));
    cell.store(c, std::memory_order_release);  // the same counter if raced
  }
  c->Inc();
}

Status MasterService::ValidateKey(std::string_view key) const {
  if (key.empty()) return Status(ErrorCode::INVALID_KEY, "empty key");
  if (key.size() > max_key_bytes_) {
    return Status(ErrorCode::INVALID_KEY,
                  fmt::format("key of {} bytes exceeds max_key_bytes ({})",
                              key.size(), max_key_bytes_));
  }
  return Status::OK();
}

Status MasterService::ValidateTenant(std::string_view tenant) const {
  if (tenant.size() > max_tenant_name_bytes_) {
    return Status(
        ErrorCode::INVALID_PARAMS,
        fmt::format("tenant name of {} bytes exceeds max_tenant_name_bytes "
                    "({})",
                    tenant.size(), max_tenant_name_bytes_));
  }
  return Status::OK();
}

Status MasterService::ValidateName(std::string_view tenant,
                                   std::string_view key) const {
  if (Status s = ValidateTenant(tenant); !s.ok()) return s;
  return ValidateKey(key);
}

Status MasterService::PinKey(const std::string& tenant, const std::string& key,
                             ObjectKey* out, TenantPin* pin) {
  // +1: the default tenant's entry, which max_tenants does not count.
  const int64_t id = tenants_.Pin(TenantOrDefault(tenant),
                                  static_cast<size_t>(config_.max_tenants) + 1);
  if (id < 0) {
    metrics_
        .GetCounter("kvpool_master_tenant_limit_refusals_total", "",
                    "requests refused because they would create a tenant "
                    "beyond max_tenants")
        .Inc();
    return Status(ErrorCode::NO_AVAILABLE_HANDLE,
                  fmt::format("the master keeps max_tenants ({}) tenants "
                              "already: no new tenant until one is empty",
                              config_.max_tenants));
  }
  *pin = TenantPin(&tenants_, static_cast<uint32_t>(id));
  *out = ObjectKey{static_cast<uint32_t>(id), key};
  return Status::OK();
}

bool MasterService::LookupKey(const std::string& tenant, const std::string& key,
                              ObjectKeyView* out) const {
  int64_t id = tenants_.Lookup(TenantOrDefault(tenant));
  if (id < 0) return false;
  *out = ObjectKeyView{static_cast<uint32_t>(id), key};
  return true;
}

ReplicaDesc MasterService::Describe(const Replica& r, uint64_t size) const {
  ReplicaDesc d;
  d.kind = r.kind;
  d.status = r.status;
  d.offset = r.offset;
  d.length = size;
  if (r.kind == ReplicaKind::kMemory) {
    d.segment = segments_.Info(r.segment);
  } else {
    d.holder = nodes_.Info(r.segment);
  }
  return d;
}

void MasterService::ReleaseReplicas(std::span<const Replica> replicas,
                                    int64_t not_before_ms) {
  int64_t now = clock_->NowMs();
  for (const auto& r : replicas) {
    if (r.kind != ReplicaKind::kMemory) continue;
    Placement p{r.segment, r.handle, r.offset};
    if (r.status == ReplicaStatus::kComplete) {
      // A node's directory names this range: reuse it only once the node
      // has applied the free (AckDram hands it back).
      auto info = segments_.Info(r.segment);
      auto idx = info ? nodes_.IndexOf(info->node_id) : std::nullopt;
      // Held before the node can see the free, so its acknowledgement (which
      // unholds) always comes after.
      if (idx) {
        segments_.Hold(p);
        if (nodes_.PushDramFreed(*idx, p, not_before_ms)) continue;
        segments_.Unhold(p);
      }
    }
    if (not_before_ms > now) {
      segments_.FreeAt(p, not_before_ms);
    } else {
      segments_.Free(p);
    }
  }
}

// ---------------------------------------------------------------- segments

Status MasterService::UnmountSegment(const std::string& node_id,
                                     uint32_t segment_id) {
  auto info = segments_.Info(segment_id);
  if (!info || info->node_id != node_id) {
    return Status(
        ErrorCode::SEGMENT_NOT_FOUND,
        fmt::format("node {} has no segment {}", node_id, segment_id));
  }
  Status s = segments_.Unmount(segment_id);
  if (s.ok()) DropSegments({segment_id}, node_id);
  return s;
}

Status MasterService::Heartbeat(const std::string& node_id, int64_t wait_ms,
                                size_t max_offload, NodeTasks* tasks,
                                uint64_t dram_acked_seq,
                                std::optional<size_t> promotion_room) {
  if (!nodes_.Touch(node_id)) {
    return Status(ErrorCode::CLIENT_NOT_FOUND,
                  "unknown node " + node_id + ": remount");
  }
  const int64_t now = clock_->NowMs();
  const size_t due =
      nodes_.AckDram(node_id, dram_acked_seq, [&](const DueFree& f) {
        segments_.Unhold(f.placement);
        if (f.not_before_ms > now) {
          segments_.FreeAt(f.placement, f.not_before_ms);
        } else {
          segments_.Free(f.placement);
        }
      });
  if (due > 0) offload_scheduler_.RoomFreed();  // puts waiting for room
  if (tasks != nullptr) {
    // One task per beat (the knob's default) caps a holder's executor at
    // one task per round trip, below its disk: it says how many it can
    // take, and a full queue takes none (rather than one task per beat,
    // each beat answered at once). A knob of 0 (no promotions by
    // heartbeat) stays 0.
    size_t max_promotion =
        static_cast<size_t>(config_.promotion_max_per_heartbeat);
    const bool room_stated = max_promotion > 0 && promotion_room.has_value();
    if (room_stated)
      max_promotion = std::min(*promotion_room, kMaxPromotionRoom);
    nodes_.TakeTasks(node_id, wait_ms, max_offload, max_promotion, tasks,
                     room_stated);
    // Tasks past their deadline make room for the next ones (bounded, so a
    // flood of expired tasks cannot hold the heartbeat).
    for (int round = 0;
         round < 8 && DropExpiredPromotions(&tasks->promotions) > 0 &&
         tasks->promotions.size() < max_promotion;
         ++round) {
      NodeTasks more;
      nodes_.TakeTasks(node_id, 0, 0, max_promotion - tasks->promotions.size(),
                       &more);
      for (auto& d : more.disk_drops) tasks->disk_drops.push_back(std::move(d));
      if (more.promotions.empty()) break;
      for (auto& t : more.promotions) tasks->promotions.push_back(std::move(t));
    }
  }
  return Status::OK();
}

Status MasterService::PullPromotionTasks(const std::string& node_id, size_t max,
                                         std::vector<PromotionTaskMsg>* out) {
  const size_t before = out->size();
  if (!nodes_.TakePromotions(node_id, max, out)) {
    return Status(ErrorCode::CLIENT_NOT_FOUND,
                  "unknown node " + node_id + ": remount");
  }
  for (int round = 0; round < 8; ++round) {
    std::vector<PromotionTaskMsg> taken(
        std::make_move_iterator(out->begin() + long(before)),
        std::make_move_iterator(out->end()));
    out->resize(before);
    const size_t dropped = DropExpiredPromotions(&taken);
    for (auto& t : taken) out->push_back(std::move(t));
    if (dropped == 0 || out->size() - before >= max) break;
    const size_t had = out->size();
    nodes_.TakePromotions(node_id, max - (out->size() - before), out);
    if (out->size() == had) break;
  }
  return Status::OK();
}

void MasterService::DropSegments(const std::vector<uint32_t>& ids,
                                 const std::string& node_id) {
  if (ids.empty()) return;
  auto gone = [&](const Replica& r) {
    return r.kind == ReplicaKind::kMemory &&
           std::find(ids.begin(), ids.end(), r.segment) != ids.end();
  };
  uint64_t dropped_objects = 0;
  for (size_t i = 0; i < ObjectStore::kShards; ++i) {
    auto& shard = objects_.shard(i);
    MutexLock lock(&shard.mu());
    for (auto it = shard.upserts().begin(); it != shard.upserts().end();) {
      auto& reps = it->second.replicas;
      reps.erase(std::remove_if(reps.begin(), reps.end(), gone), reps.end());
      if (reps.empty()) {
        const uint32_t tenant = it->first.tenant;
        shard.upserts().erase(it++);  // absl: other iterators stay valid
        tenants_.Unref(tenant);
      } else {
        ++it;
      }
    }
    for (auto it = shard.objects().begin(); it != shard.objects().end();) {
      auto& reps = it->second.replicas;
      const size_t before = reps.size();
      reps.erase(std::remove_if(reps.begin(), reps.end(), gone), reps.end());
      if (reps.size() != before) {
        // The segments are unmounted already: which of the two kinds the
        // lost copies were in is no longer known, so both are named.
        EmitTierEvent(events::TierEventKind::kLost, it->first, it->second.size,
                      events::kMediumDram | events::kMediumPrefetchBuffer,
                      node_id, events::Trigger::kNone,
                      it->second.FirstCompleteDisk() != nullptr);
      }
      if (reps.empty()) {
        it = EraseObject(shard, it, 0, EraseCause::kLost);
        ++dropped_objects;
      } else {
        ++it;
      }
    }
  }
  metrics_
      .GetCounter("kvpool_master_objects_lost_total", "",
                  "objects whose last replica died")
      .Inc(dropped_objects);
}

void MasterService::DropNode(const NodeInfo& node) {
  auto ids = segments_.UnmountNode(node.node_id);
  spdlog::warn("node {} missed heartbeats for {}s: unmounted {} segment(s)",
               node.node_id, config_.client_ttl, ids.size());
  DropSegments(ids, node.node_id);
  // Its SSD copies and the tasks it was running go with it.
  uint64_t lost = 0;
  for (size_t i = 0; i < ObjectStore::kShards; ++i) {
    auto& shard = objects_.shard(i);
    MutexLock lock(&shard.mu());
    for (auto it = shard.promotions().begin();
         it != shard.promotions().end();) {
      if (it->second.holder != node.index) {
        ++it;
        continue;
      }
      ObjectKeyView kv{it->first.tenant, it->first.key};
      ++it;
      promotions_.Cancel(shard, kv);
    }
    offload_scheduler_.DropHolder(shard, node.index);
    for (auto it = shard.objects().begin(); it != shard.objects().end();) {
      auto& reps = it->second.replicas;
      const size_t before = reps.size();
      reps.erase(std::remove_if(reps.begin(), reps.end(),
                                [&](const Replica& r) {
                                  return r.kind == ReplicaKind::kLocalDisk &&
                                         r.segment == node.index;
                                }),
                 reps.end());
      if (reps.size() != before) {
        EmitTierEvent(events::TierEventKind::kLost, it->first, it->second.size,
                      events::kMediumSsd, node.node_id);
      }
      if (reps.empty()) {
        it = EraseObject(shard, it, 0, EraseCause::kLost);
        ++lost;
      } else {
        ++it;
      }
    }
  }
  metrics_.GetCounter("kvpool_master_objects_lost_total").Inc(lost);
  metrics_.GetCounter("kvpool_master_nodes_expired_total").Inc();
}

// Puts are in master_put.cc; eviction is EvictionPolicy's
// (eviction_policy.cc).

// --------------------------------------------------------------------- get

Result<GetResult> MasterService::GetReplicaList(const std::string& tenant,
                                                const std::string& key) {
  auto fail = [&](Status s) {
    CountResult("gets", s.code());
    return s;
  };
  if (Status s = ValidateName(tenant, key); !s.ok()) return fail(s);
  ObjectKeyView okey;
  if (!LookupKey(tenant, key, &okey))
    return fail(Status(ErrorCode::OBJECT_NOT_FOUND));
  auto& shard = objects_.ShardFor(okey);
  GetResult out;
  {
    MutexLock lock(&shard.mu());
    auto it = shard.objects().find(okey);
    if (it == shard.objects().end())
      return fail(Status(ErrorCode::OBJECT_NOT_FOUND));
    ObjectMeta& m = it->second;
    if (!m.HasComplete()) return fail(Status(ErrorCode::REPLICA_IS_NOT_READY));
    const int64_t now = clock_->NowMs();
    if (m.prefetched_unread && m.HasCompleteMemory()) {
      leases_.CountPrefetchFate(
          m, m.LeaseLive(now) ? "read_from_dram" : "read_after_lease_end");
    } else if (!m.HasCompleteMemory()) {
      auto p = shard.promotions().find(okey);
      if (p != shard.promotions().end() && p->second.from_prefetch)
        p->second.get_before_landing = true;  // this get reads the SSD
    }
    out.lease_ttl_ms = leases_.GrantReadLease(m, now);
    if (m.SoftPinned(now)) m.set_soft_pin_deadline_ms(now + m.soft_pin_ttl_ms);
    m.set_last_access_ms(now);
    out.size = m.size;
    for (const auto& r : m.replicas) {
      if (r.status == ReplicaStatus::kComplete)
        out.replicas.push_back(Describe(r, m.size));
    }
    if (config_.promotion_on_hit && !m.HasCompleteMemory() &&
        m.FirstCompleteDisk()) {
      promotions_.MaybePromoteOnHit(shard, it->first, m);
    }
  }
  std::stable_partition(
      out.replicas.begin(), out.replicas.end(),
      [](const ReplicaDesc& d) { return d.kind == ReplicaKind::kMemory; });
  CountResult("gets", ErrorCode::OK);
  return out;
}

ErrorCode MasterService::ExistKey(const std::string& tenant,
                                  const std::string& key, bool grant_lease) {
  ErrorCode code = ErrorCode::OBJECT_NOT_FOUND;
  if (Status s = ValidateName(tenant, key); !s.ok()) {
    code = s.code();
  } else if (ObjectKeyView okey; LookupKey(tenant, key, &okey)) {
    auto& shard = objects_.ShardFor(okey);
    MutexLock lock(&shard.mu());
    auto it = shard.objects().find(okey);
    if (it != shard.objects().end() && it->second.HasComplete()) {
      code = ErrorCode::OK;
      if (grant_lease) {
        const int64_t now = clock_->NowMs();
        const int64_t d = now + config_.default_kv_lease_ttl;
        ObjectMeta& m = it->second;
        m.set_lease_deadline_ms(std::max(m.lease_deadline_ms(), d));
        m.set_reader_lease_deadline_ms(
            std::max(m.reader_lease_deadline_ms(), d));
      }
    }
  }
  CountResult("exists", code);
  return code;
}

void MasterService::QueryOne(int64_t tenant_id, std::string_view key,
                             int64_t now, BatchQueryResult* out) const {
  QueryItem item;
  item.first_replica = static_cast<uint32_t>(out->replicas.size());
  if (!KeyFits(key)) {
    item.code = ErrorCode::INVALID_KEY;
  } else if (tenant_id < 0) {
    item.code = ErrorCode::OBJECT_NOT_FOUND;
  } else {
    ObjectKeyView view{static_cast<uint32_t>(tenant_id), key};
    auto& shard = const_cast<ObjectStore&>(objects_).ShardFor(view);
    MutexLock lock(&shard.mu());
    auto it = shard.objects().find(view);
    if (it == shard.objects().end()) {
      item.code = ErrorCode::OBJECT_NOT_FOUND;
    } else {
      const ObjectMeta& m = it->second;
      item.size = m.size;
      item.lease_remaining_ms = m.lease_deadline_ms() - now;
      out->replicas.insert(out->replicas.end(), m.replicas.begin(),
                           m.replicas.end());
      item.num_replicas = static_cast<uint32_t>(m.replicas.size());
    }
  }
  out->items.push_back(item);
}

void MasterService::PrefetchLookup(int64_t tenant_id, std::string_view key,
                                   PrefetchStage stage) const {
  if (tenant_id < 0 || !KeyFits(key)) return;
  ObjectKeyView view{static_cast<uint32_t>(tenant_id), key};
  auto& shard = const_cast<ObjectStore&>(objects_).ShardFor(view);
  // Under the lock: the table's arrays may be reallocated by a writer.
  MutexLock lock(&shard.mu());
  if (stage == PrefetchStage::kSlot) {
    shard.objects().prefetch(view);
    return;
  }
  auto it = shard.objects().find(view);
  if (it == shard.objects().end()) return;
  // The key, the fields QueryOne reads and the inline replicas: every cache
  // line the node touches. A node is not line-aligned (malloc's 16), so one
  // of 104 bytes spans three lines when it starts past a line's 24th byte.
  constexpr uintptr_t kLine = 64;
  const uintptr_t node = reinterpret_cast<uintptr_t>(&*it);
  for (uintptr_t line = node & ~(kLine - 1); line < node + sizeof(*it);
       line += kLine) {
    __builtin_prefetch(reinterpret_cast<const void*>(line));
  }
}

QueryResult MasterService::QueryReadOnly(const std::string& tenant,
                                         const std::string& key) const {
  BatchQueryResult batch;
  QueryReadOnlyBatch(tenant, std::vector<std::string_view>{key}, &batch);
  const QueryItem& item = batch.items[0];
  QueryResult q;
  q.code = item.code;
  q.size = item.size;
  q.lease_remaining_ms = item.lease_remaining_ms;
  for (uint32_t i = 0; i < item.num_replicas; ++i) {
    q.replicas.push_back(
        Describe(batch.replicas[item.first_replica + i], item.size));
  }
  return q;
}

// ------------------------------------------------------------------ remove

Status MasterService::Remove(const std::string& tenant, const std::string& key,
                             bool force) {
  if (Status s = ValidateName(tenant, key); !s.ok()) return s;
  ObjectKeyView okey;
  if (!LookupKey(tenant, key, &okey)) {
    // As for an unknown key below, and without creating the tenant: its
    // floor is keyed by name.
    floor_.Raise(FloorHash(TenantTable::HashName(TenantOrDefault(tenant)), key),
                 versions_.Next());
    return Status(ErrorCode::OBJECT_NOT_FOUND);
  }
  auto& shard = objects_.ShardFor(okey);
  std::vector<std::pair<uint32_t, uint64_t>> holders;
  {
    MutexLock lock(&shard.mu());
    auto it = shard.objects().find(okey);
    if (it == shard.objects().end()) {
      // A node may still re-register a copy this master has not heard of yet
      // (it just restarted): that copy is older than this remove.
      floor_.Raise(FloorHash(okey), versions_.Next());
      return Status(ErrorCode::OBJECT_NOT_FOUND);
    }
    ObjectMeta& m = it->second;
    const int64_t now = clock_->NowMs();
    if (!force && m.LeaseLive(now)) {
      metrics_
          .GetCounter("kvpool_master_lease_refusals_total", "",
                      "removes refused by a lease")
          .Inc();
      return Status(
          ErrorCode::OBJECT_HAS_LEASE,
          fmt::format("leased for {} more ms", m.lease_deadline_ms() - now));
    }
    if (!force && m.HasProcessing()) {
      return Status(ErrorCode::REPLICA_IS_NOT_READY,
                    "a put of this key is in progress");
    }
    RemoveObject(shard, it, &holders, /*emit_event=*/true);
  }
  KVPOOL_FAILPOINT("master.remove.after_erase");
  // Answered once no holder can bring the value back (holder_ack_timeout_ms).
  AwaitHolders(holders);
  return Status::OK();
}

MasterService::ObjectMap::iterator MasterService::RemoveObject(
    Shard& shard, ObjectMap::iterator it,
    std::vector<std::pair<uint32_t, uint64_t>>* holders, bool emit_event) {
  ObjectMeta& m = it->second;
  if (emit_event) {
    EmitPerHolder(events::TierEventKind::kRemoved, it->first, m.size,
                  m.replicas);
  }
  // A forced remove must not pull bytes from under a reader or a writer.
  int64_t not_before = m.lease_deadline_ms();
  if (m.HasProcessing()) {
    not_before =
        std::max(not_before, m.last_access_ms() +
                                 config_.put_start_release_timeout_sec * 1000);
  }
  const ReplicaList replicas = m.replicas;
  DropDiskCopies(it->first, m);
  auto next = EraseObject(shard, it, not_before);
  CollectHolders(replicas, holders);
  return next;
}

Result<uint64_t> MasterService::RemoveAll(const std::string& tenant,
                                          bool force) {
  return RemoveMatching(tenant, force, nullptr);
}

Result<uint64_t> MasterService::RemoveByRegex(const std::string& tenant,
                                              const std::string& key_regex,
                                              bool force) {
  // RE2: matching is linear in the key (a pattern such as (a|a)*b took a
  // backtracking engine seconds per key, under a shard lock); memory is
  // bounded, and what RE2 cannot do in that bound (backreferences,
  // lookaround) is refused as a bad pattern.
  constexpr size_t kMaxPattern = 4096;
  if (key_regex.size() > kMaxPattern) {
    return Status(ErrorCode::INVALID_PARAMS,
                  fmt::format("key regex of {} bytes, limit {}",
                              key_regex.size(), kMaxPattern));
  }
  RE2::Options opts;
  opts.set_log_errors(false);
  opts.set_max_mem(8 << 20);
  RE2 re(key_regex, opts);
  if (!re.ok()) {
    return Status(ErrorCode::INVALID_PARAMS,
                  fmt::format("bad key regex '{}': {}", key_regex, re.error()));
  }
  return RemoveMatching(tenant, force, &re);
}

Result<uint64_t> MasterService::RemoveMatching(const std::string& tenant,
                                               bool force,
                                               const re2::RE2* key_regex) {
  if (Status s = ValidateTenant(tenant); !s.ok()) return s;
  const std::string& name = TenantOrDefault(tenant);
  if (key_regex == nullptr) {
    // Copies a node has yet to re-register (this master just started, or
    // the node was declared dead) are removed too: none older comes back.
    // Keyed by name, so an unknown tenant is not created for it.
    tenant_floor_.Raise(TenantTable::HashName(name), versions_.Next());
  }
  const int64_t tid = tenants_.Lookup(name);
  if (tid < 0) return uint64_t{0};
  uint64_t removed = 0;
  const int64_t now = clock_->NowMs();
  std::vector<std::pair<uint32_t, uint64_t>> holders;
  for (size_t i = 0; i < ObjectStore::kShards; ++i) {
    auto& shard = objects_.shard(i);
    MutexLock lock(&shard.mu());
    for (auto it = shard.objects().begin(); it != shard.objects().end();) {
      ObjectMeta& m = it->second;
      bool removable =
          it->first.tenant == static_cast<uint32_t>(tid) &&
          (force || (!m.LeaseLive(now) && !m.HasProcessing())) &&
          (!key_regex || RE2::FullMatch(it->first.key.view(), *key_regex));
      if (!removable) {
        ++it;
        continue;
      }
      // remove_all is one AllBlocksCleared after the sweep, not an event
      // per key (docs/kv_events.md, "Ordering").
      it = RemoveObject(shard, it, &holders, key_regex != nullptr);
      ++removed;
    }
  }
  if (key_regex == nullptr) EmitCleared(name);
  AwaitHolders(holders);
  return removed;
}

// ------------------------------------------------------------ housekeeping

void MasterService::Housekeep() {
  const int64_t now = clock_->NowMs();
  segments_.ReleaseDue(now);
  ReopenSegments(now);

  clients_.Tick();
  const uint64_t pauses = nodes_.pauses_survived();
  for (const auto& node : nodes_.ExpireSilent(config_.client_ttl * 1000))
    DropNode(*node);
  if (nodes_.pauses_survived() != pauses) {
    spdlog::warn(
        "master: housekeeping had not run for over a second (paused or "
        "stalled); that time is not counted against the nodes' heartbeats");
    metrics_
        .GetCounter("kvpool_master_pauses_survived_total", "",
                    "gaps in the master's own running that were not counted "
                    "as node silence")
        .Inc();
  }

  // Abandoned puts and expired tasks: full scans, so at most once a second.
  if (now - last_slow_housekeep_ms_ < 1000) return;
  last_slow_housekeep_ms_ = now;
  ReapTasks(now);
  ReclaimPendingPuts(now);
}

// ------------------------------------------------------------------- stats

MasterStats MasterService::Stats() const {
  MasterStats s;
  for (size_t i = 0; i < ObjectStore::kShards; ++i) {
    auto& shard = const_cast<ObjectStore&>(objects_).shard(i);
    MutexLock lock(&shard.mu());
    s.objects += shard.objects().size();
    for (const auto& [k, m] : shard.objects()) {
      for (const auto& r : m.replicas) {
        s.memory_replicas += r.kind == ReplicaKind::kMemory;
        s.disk_replicas += r.kind == ReplicaKind::kLocalDisk;
      }
    }
  }
  s.evicted_objects = eviction_.evicted_objects();
  s.evicted_bytes = eviction_.evicted_bytes();
  s.pauses_survived = nodes_.pauses_survived();
  s.segments = segments_.Snapshot();
  // Not in the pool until its node serves it (opens_when_served).
  std::erase_if(s.segments, [this](const SegmentSnapshot& seg) {
    return closed_segments_.Unserved(seg.info.id);
  });
  return s;
}

std::string MasterService::StatusJson() const {
  MasterStats s = Stats();
  std::string segs;
  for (const auto& seg : s.segments) {
    if (!segs.empty()) segs += ",";
    segs += fmt::format(
        R"({{"id":{},"node":"{}","kind":"{}","capacity":{},"used":{},"endpoint":"{}"}})",
        seg.info.id, seg.info.node_id,
        seg.info.kind == SegmentKind::kMain ? "main" : "prefetch_buffer",
        seg.info.capacity, seg.used, seg.info.data_endpoint);
  }
  SegmentUsage main = segments_.Usage(SegmentKind::kMain);
  SegmentUsage pb = segments_.Usage(SegmentKind::kPrefetchBuffer);
  const PromotionCounters promo = promotions_.counters();
  return fmt::format(
      R"({{"objects":{},"memory_replicas":{},"disk_replicas":{},"evicted_objects":{},"evicted_bytes":{},)"
      R"("offloads_in_flight":{},"promotions":{{"admitted":{},"completed":{},"failed":{},)"
      R"("cancelled":{},"expired":{},"in_flight":{}}},)"
      R"("main":{{"used":{},"capacity":{},"watermark":{:.4f}}},)"
      R"("prefetch_buffer":{{"used":{},"capacity":{},"watermark":{:.4f}}},"segments":[{}]}})",
      s.objects, s.memory_replicas, s.disk_replicas, s.evicted_objects,
      s.evicted_bytes, offload_scheduler_.in_flight(), promo.admitted,
      promo.completed, promo.failed, promo.cancelled, promo.expired,
      promo.in_flight, main.used, main.capacity, main.ratio(), pb.used,
      pb.capacity, pb.ratio(), segs);
}

}  // namespace kvpool
