#include "master/promotion_scheduler.h"

#include <fmt/format.h>

#include <algorithm>

namespace kvpool {

PromotionScheduler::Options PromotionScheduler::Options::FromConfig(
    const MasterConfig& c) {
  Options o;
  o.promotion_admission_threshold = c.promotion_admission_threshold;
  o.promotion_queue_limit = c.promotion_queue_limit;
  o.promotion_task_ttl_sec = c.promotion_task_ttl_sec;
  o.eviction_high_watermark_ratio = c.eviction_high_watermark_ratio;
  o.prefetch_strict_buffer = c.prefetch_strict_buffer;
  return o;
}

PromotionScheduler::PromotionScheduler(Options options, const Clock* clock,
                                       SegmentManager& segments,
                                       MetricsRegistry& metrics,
                                       TieringMetrics& tiering, Hooks hooks)
    : options_(options),
      clock_(clock),
      segments_(segments),
      metrics_(metrics),
      tiering_(tiering),
      hooks_(std::move(hooks)) {}

bool PromotionScheduler::TryReserveSlot() {
  // Reserve-then-check under concurrency: two triggers on different shards
  // must not both pass a check of the same last slot.
  const uint64_t limit = static_cast<uint64_t>(options_.promotion_queue_limit);
  uint64_t cur = in_flight_.load();
  while (cur < limit) {
    if (in_flight_.compare_exchange_weak(cur, cur + 1)) return true;
  }
  return false;
}

bool PromotionScheduler::ReserveBuffer(uint32_t holder,
                                       const std::string& node_id,
                                       uint64_t size) {
  SegmentUsage u = segments_.UsageOf(SegmentKind::kPrefetchBuffer, node_id);
  uint64_t reserved_at_refusal = 0;
  {
    MutexLock lock(&buffer_mu_);
    uint64_t& reserved = buffer_reserved_[holder];
    // The buffer's own watermark: full at the high watermark, counting what
    // queued router promotions will need.
    double limit = options_.eviction_high_watermark_ratio * double(u.capacity);
    if (double(u.used + reserved + size) <= limit) {
      reserved += size;
      return true;
    }
    // Full: ask for replicas whose lease ended to be drained (the buffer
    // may sit just under its watermark with nothing evicting it), so a
    // later trigger finds room. This one is throttled.
    hooks_.request_buffer_room(u, reserved, size);
    reserved_at_refusal = reserved;
  }
  // What filled it, summed over refusals: replicas in it, or the
  // reservations of queued tasks (outside buffer_mu_, a leaf lock).
  constexpr const char* kHelp =
      "bytes of the prefetch buffer taken when a router trigger found it "
      "full, summed over those refusals: part=used (replicas in it) or "
      "part=reserved (queued router promotions' reservations)";
  metrics_
      .GetCounter("kvpool_master_prefetch_buffer_full_bytes_total",
                  "part=\"used\"", kHelp)
      .Inc(u.used);
  metrics_
      .GetCounter("kvpool_master_prefetch_buffer_full_bytes_total",
                  "part=\"reserved\"", kHelp)
      .Inc(reserved_at_refusal);
  return false;
}

void PromotionScheduler::ReleaseBufferReservation(PromotionState& st) {
  if (st.buffer_reserved == 0) return;
  MutexLock lock(&buffer_mu_);
  uint64_t& reserved = buffer_reserved_[st.holder];
  reserved -= std::min(reserved, st.buffer_reserved);
  st.buffer_reserved = 0;
}

bool PromotionScheduler::OverWatermark() const {
  return segments_.Usage(SegmentKind::kMain).ratio() >=
         options_.eviction_high_watermark_ratio;
}

const char* PromotionScheduler::MaybePromoteOnHit(Shard& shard,
                                                  const ObjectKey& key,
                                                  ObjectMeta& m) {
  auto reject = [&](const char* reason) {
    tiering_.promotion_rejected.With(reason).Inc();
    return reason;
  };
  if (sketch_.Increment(key.tenant, key.key) <
      static_cast<uint64_t>(options_.promotion_admission_threshold)) {
    return reject("frequency");
  }
  if (OverWatermark()) return reject("watermark");
  if (shard.promotions().count(key) || m.HasProcessing() ||
      shard.upserts().count(key)) {
    return reject("dedup");
  }
  if (!TryReserveSlot()) return reject("cap");
  const Replica* src = m.FirstCompleteDisk();
  PromotionState st;
  st.task_id = NewTaskId();
  st.holder = src->segment;
  st.created_ms = clock_->NowMs();
  st.source = TriggerSource::kOnHit;
  if (!Queue(
          shard, key, st,
          PromotionTaskMsg{hooks_.tenant_name(key.tenant), std::string(key.key),
                           m.size, st.task_id, st.source, false})) {
    return "holder_gone";  // the holder was dropped meanwhile
  }
  return nullptr;
}

bool PromotionScheduler::Queue(Shard& shard, const ObjectKey& key,
                               PromotionState& st, PromotionTaskMsg task) {
  if (!hooks_.push_promotion(st.holder, std::move(task))) {
    // The holder was dropped after the caller's checks (its sweep may have
    // passed this shard already): nothing may wait for a mailbox that is
    // gone.
    ReleaseBufferReservation(st);
    ReleaseSlot();
    return false;
  }
  Admit(shard, key, st);
  return true;
}

void PromotionScheduler::Admit(Shard& shard, const ObjectKey& key,
                               const PromotionState& st) {
  shard.promotions()[key] = st;
  ++admitted_;
}

PromotionScheduler::RouterAdmission PromotionScheduler::AdmitRouter(
    Shard& shard, const ObjectKey& key, uint64_t size, uint32_t holder,
    const std::string& holder_node_id, int64_t now, int64_t deadline_in_ms) {
  if (!TryReserveSlot()) return RouterAdmission::kCap;
  PromotionState st;
  st.holder = holder;
  // A holder with a prefetch buffer: the buffer's own watermark, with
  // what queued router promotions will need, is a second gate.
  if (segments_.UsageOf(SegmentKind::kPrefetchBuffer, holder_node_id).capacity >
          0 &&
      options_.prefetch_strict_buffer) {
    if (!ReserveBuffer(st.holder, holder_node_id, size)) {
      ReleaseSlot();
      metrics_
          .GetCounter("kvpool_master_prefetch_buffer_full_total", "",
                      "router promotions that found the holder's buffer "
                      "full")
          .Inc();
      return RouterAdmission::kBufferFull;
    }
    st.buffer_reserved = size;
  }
  st.task_id = NewTaskId();
  st.created_ms = now;
  st.source = TriggerSource::kRouter;
  st.from_prefetch = true;
  st.deadline_ms = deadline_in_ms > 0 ? now + deadline_in_ms : 0;
  if (!Queue(shard, key, st,
             PromotionTaskMsg{hooks_.tenant_name(key.tenant),
                              std::string(key.key), size, st.task_id, st.source,
                              true, st.deadline_ms})) {
    return RouterAdmission::kHolderGone;
  }
  return RouterAdmission::kQueued;
}

uint64_t PromotionScheduler::AdmitExist(Shard& shard, const ObjectKey& key,
                                        uint32_t holder, int64_t now) {
  if (!TryReserveSlot()) return 0;
  PromotionState st;
  st.task_id = NewTaskId();
  st.holder = holder;
  st.created_ms = now;
  st.source = TriggerSource::kExist;
  st.from_prefetch = true;
  Admit(shard, key, st);
  return st.task_id;
}

void PromotionScheduler::ExtendDeadline(PromotionState& st, int64_t now,
                                        int64_t deadline_in_ms) {
  int64_t& d = st.deadline_ms;
  if (deadline_in_ms <= 0) {
    d = 0;
  } else if (d > 0) {
    d = std::max(d, now + deadline_in_ms);
  }
}

void PromotionScheduler::TakeOverForExist(PromotionState& st) {
  // The router triggers at routing, before the engine's exist: its queued
  // promotion would refuse the exist path's and then, past its deadline,
  // be dropped unread, so the block would never reach main DRAM for the
  // requests that share it. Once staged it lands in the buffer as asked.
  if (st.source != TriggerSource::kRouter || st.staged) return;
  ReleaseBufferReservation(st);
  st.deadline_ms = 0;
  st.source = TriggerSource::kExist;
  metrics_
      .GetCounter("kvpool_master_prefetch_router_taken_by_exist_total", "",
                  "queued router promotions an exist trigger made its own (no "
                  "deadline, main DRAM)")
      .Inc();
}

bool PromotionScheduler::ClaimForExist(PromotionState& st, uint32_t holder) {
  if (st.source != TriggerSource::kRouter || st.staged || st.with_holder ||
      st.holder != holder) {
    return false;
  }
  TakeOverForExist(st);
  st.with_holder = true;
  metrics_
      .GetCounter("kvpool_master_prefetch_router_claimed_by_exist_total", "",
                  "router promotions still in the master's mailbox that "
                  "their holder's exist trigger ran at once")
      .Inc();
  return true;
}

std::optional<Placement> PromotionScheduler::Stage(
    PromotionState& st, uint64_t size, const std::string& holder_id) {
  std::vector<Placement> placements;
  const bool has_buffer =
      st.source == TriggerSource::kRouter &&
      segments_.UsageOf(SegmentKind::kPrefetchBuffer, holder_id).capacity > 0;
  ReleaseBufferReservation(st);  // now used, or failed
  if (has_buffer) {
    auto p =
        segments_.AllocateOn(size, SegmentKind::kPrefetchBuffer, holder_id);
    if (p) placements.push_back(*p);
    if (!p) {
      metrics_
          .GetCounter("kvpool_master_prefetch_buffer_full_total", "",
                      "router promotions that found the holder's buffer full")
          .Inc();
    }
  }
  if (placements.empty() && (!has_buffer || !options_.prefetch_strict_buffer)) {
    placements = segments_.Allocate(size, 1, SegmentKind::kMain, holder_id);
  }
  if (placements.empty()) {
    metrics_.GetCounter("kvpool_master_promotion_alloc_failed_total").Inc();
    return std::nullopt;
  }
  st.staged = true;
  st.staged_segment = placements[0].segment;
  st.staged_handle = placements[0].handle;
  st.staged_offset = placements[0].offset;
  return placements[0];
}

PromotionState PromotionScheduler::Take(Shard& shard,
                                        PromotionMap::iterator it) {
  PromotionState state = it->second;
  ReleaseBufferReservation(state);
  shard.promotions().erase(it);
  --in_flight_;
  return state;
}

void PromotionScheduler::FreeStaged(const PromotionState& st, int64_t now) {
  if (!st.staged) return;
  segments_.FreeAt(
      Placement{st.staged_segment, st.staged_handle, st.staged_offset},
      now + kTaskGraceMs);
}

void PromotionScheduler::Cancel(Shard& shard, const ObjectKeyView& key) {
  auto it = shard.promotions().find(key);
  if (it == shard.promotions().end()) return;
  ReleaseBufferReservation(it->second);
  if (it->second.staged) FreeStaged(it->second, clock_->NowMs());
  shard.promotions().erase(it);
  --in_flight_;
  ++cancelled_;
}

void PromotionScheduler::Expire(Shard& shard, const ObjectKeyView& key,
                                const char* where) {
  auto it = shard.promotions().find(key);
  if (it == shard.promotions().end()) return;
  ReleaseBufferReservation(it->second);
  FreeStaged(it->second, clock_->NowMs());
  shard.promotions().erase(it);
  --in_flight_;
  ++expired_;
  if (auto obj = shard.objects().find(key); obj != shard.objects().end()) {
    // The trigger's lease held a replica that will not come; readers keep
    // theirs.
    ObjectMeta& m = obj->second;
    if (!m.HasCompleteMemory())
      m.set_lease_deadline_ms(m.reader_lease_deadline_ms());
  }
  tiering_.prefetch_fate.With("expired").Inc();
  metrics_
      .GetCounter("kvpool_master_promotion_deadline_expired_total",
                  fmt::format("where=\"{}\"", where),
                  "router promotions dropped unread: their deadline passed")
      .Inc();
}

PromotionScheduler::HandOutResult PromotionScheduler::HandOut(
    Shard& shard, const ObjectKeyView& key, int64_t now, PromotionTaskMsg& t) {
  auto st = shard.promotions().find(key);
  if (st == shard.promotions().end() || st->second.task_id != t.task_id) {
    // Its holder's report on an unknown task is refused there.
    return HandOutResult::kDeliver;
  }
  if (st->second.with_holder) return HandOutResult::kDuplicate;
  const int64_t d = st->second.deadline_ms;
  // Past its deadline, or already read from the SSD by every get the
  // router announced for it: too late either way.
  auto obj = shard.objects().find(key);
  const bool all_read = st->second.get_before_landing &&
                        obj != shard.objects().end() &&
                        obj->second.pending_prefetch_reads == 0;
  if (d > 0 && (now >= d || all_read)) {
    Expire(shard, key, now >= d ? "master" : "master_after_get");
    return HandOutResult::kExpired;
  }
  t.deadline_in_ms = d > 0 ? d - now : 0;
  st->second.with_holder = true;
  return HandOutResult::kDeliver;
}

void PromotionScheduler::Reap(Shard& shard, int64_t now) {
  const int64_t promo_ttl = options_.promotion_task_ttl_sec * 1000;
  for (auto it = shard.promotions().begin(); it != shard.promotions().end();) {
    if (now - it->second.created_ms <= promo_ttl) {
      ++it;
      continue;
    }
    ReleaseBufferReservation(it->second);
    FreeStaged(it->second, now);
    it = shard.promotions().erase(it);
    --in_flight_;
    ++expired_;
  }
}

PromotionCounters PromotionScheduler::counters() const {
  return PromotionCounters{admitted_.load(), completed_.load(),
                           failed_.load(),   cancelled_.load(),
                           expired_.load(),  in_flight_.load()};
}

}  // namespace kvpool
