// Deadline-aware router prefetch: the hand-out filter that drops promotions
// whose deadline passed before their SSD read could start, and the release
// of such an entry. The mailbox order itself is PromotionQueue's.
#include <fmt/format.h>

#include <algorithm>

#include "master/master_service.h"

namespace kvpool {

void MasterService::ExpirePromotion(Shard& shard, const ObjectKeyView& key,
                                    const char* where) {
  auto it = shard.promotions.find(key);
  if (it == shard.promotions.end()) return;
  ReleaseBufferReservation(it->second);
  const int64_t now = clock_->NowMs();
  if (it->second.staged) {
    // The holder may still be writing the staged range.
    segments_.FreeAt(
        Placement{it->second.staged_segment, it->second.staged_handle,
                  it->second.staged_offset},
        now + kTaskGraceMs);
  }
  shard.promotions.erase(it);
  --promotion_in_flight_;
  ++promo_expired_;
  if (auto obj = shard.objects.find(key); obj != shard.objects.end()) {
    // The trigger's lease held a replica that will not come; readers keep
    // theirs.
    ObjectMeta& m = obj->second;
    if (!m.HasCompleteMemory())
      m.lease_deadline_ms = m.reader_lease_deadline_ms;
  }
  tiering_metrics_.prefetch_fate.With("expired").Inc();
  metrics_
      .GetCounter("kvpool_master_promotion_deadline_expired_total",
                  fmt::format("where=\"{}\"", where),
                  "router promotions dropped unread: their deadline passed")
      .Inc();
}

size_t MasterService::DropExpiredPromotions(
    std::vector<PromotionTaskMsg>* tasks) {
  const int64_t now = clock_->NowMs();
  size_t dropped = 0;
  auto keep = tasks->begin();
  for (auto& t : *tasks) {
    bool expired = false;
    ObjectKeyView kv;
    if (t.deadline_ms > 0 && LookupKey(t.tenant, t.key, &kv)) {
      auto& shard = objects_.ShardFor(kv);
      std::lock_guard<std::mutex> lock(shard.mu);
      auto st = shard.promotions.find(kv);
      if (st != shard.promotions.end() && st->second.task_id == t.task_id) {
        const int64_t d = st->second.deadline_ms;
        // Past its deadline, or already read from the SSD by every get the
        // router announced for it: too late either way.
        auto obj = shard.objects.find(kv);
        const bool all_read = st->second.get_before_landing &&
                              obj != shard.objects.end() &&
                              obj->second.pending_prefetch_reads == 0;
        if (d > 0 && (now >= d || all_read)) {
          ExpirePromotion(shard, kv, now >= d ? "master" : "master_after_get");
          expired = true;
        } else {
          t.deadline_in_ms = d > 0 ? d - now : 0;
        }
      }
    }
    if (expired) {
      ++dropped;
    } else {
      if (&*keep != &t) *keep = std::move(t);
      ++keep;
    }
  }
  tasks->erase(keep, tasks->end());
  return dropped;
}

}  // namespace kvpool
