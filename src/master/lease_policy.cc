#include "master/lease_policy.h"

#include <algorithm>

namespace kvpool {

LeasePolicy::Options LeasePolicy::Options::FromConfig(const MasterConfig& c) {
  Options o;
  o.default_kv_lease_ttl = c.default_kv_lease_ttl;
  o.prefetch_consumed_lease_ms = c.prefetch_consumed_lease_ms;
  return o;
}

LeasePolicy::LeasePolicy(Options options, const SegmentManager& segments,
                         Metrics metrics)
    : options_(options), segments_(segments), metrics_(metrics) {}

void LeasePolicy::CountPrefetchFate(ObjectMeta& m, const char* fate) const {
  if (!m.prefetched_unread) return;
  m.prefetched_unread = false;
  metrics_.prefetch_fate->With(fate).Inc();
}

bool LeasePolicy::OnlyInPrefetchBuffer(const ObjectMeta& m) const {
  bool any = false;
  for (const auto& r : m.replicas) {
    if (r.kind != ReplicaKind::kMemory || r.status != ReplicaStatus::kComplete)
      continue;
    auto info = segments_.Info(r.segment);
    if (!info || info->kind != SegmentKind::kPrefetchBuffer) return false;
    any = true;
  }
  return any;
}

int64_t LeasePolicy::GrantReadLease(ObjectMeta& m, int64_t now) const {
  const bool consumed_trigger = m.pending_prefetch_reads > 0;
  if (consumed_trigger) {
    --m.pending_prefetch_reads;
    metrics_.prefetch_window->Observe(
        static_cast<uint32_t>(static_cast<uint32_t>(now) -
                              m.pending_trigger_ms32) /
        1000.0);
    // A later pending trigger's window counts from this get.
    m.pending_trigger_ms32 = static_cast<uint32_t>(now);
  }
  int64_t ttl = options_.default_kv_lease_ttl;
  const bool recycle =
      options_.prefetch_consumed_lease_ms > 0 && OnlyInPrefetchBuffer(m);
  if (recycle) ttl = std::min(ttl, options_.prefetch_consumed_lease_ms);
  m.set_reader_lease_deadline_ms(
      std::max(m.reader_lease_deadline_ms(), now + ttl));
  if (recycle && consumed_trigger && m.pending_prefetch_reads == 0) {
    // The last request the router announced has read it: the trigger's and
    // the landing's leases have done their job. Readers keep theirs: the
    // object's lease becomes exactly the readers' part, which also raises a
    // trigger lease that ran out before this get came.
    if (m.lease_deadline_ms() > m.reader_lease_deadline_ms()) {
      metrics_.registry
          ->GetCounter("kvpool_master_prefetch_buffer_recycled_total", "",
                       "buffered blocks whose trigger lease was dropped by "
                       "their consuming get")
          .Inc();
    }
    m.set_lease_deadline_ms(m.reader_lease_deadline_ms());
  } else {
    m.set_lease_deadline_ms(std::max(m.lease_deadline_ms(), now + ttl));
  }
  return ttl;
}

}  // namespace kvpool
