// LeasePolicy: the read lease a get grants on an object, and the fate of a
// prefetched replica. It decides on one ObjectMeta at a time; finding the
// object and locking its shard stay with MasterService, which calls in with
// the shard's lock held.
//
// Promises:
// - A get extends the object's lease and its readers' part
//   (reader_lease_deadline_ms) to at least now + default_kv_lease_ttl, and
//   returns that TTL.
// - With prefetch_consumed_lease_ms > 0, a get of an object whose COMPLETE
//   memory replicas all live in prefetch buffers is granted only
//   min(default_kv_lease_ttl, prefetch_consumed_lease_ms) ("recycle"), and
//   the get that consumes the last pending router trigger drops the
//   trigger's (and the landing's) lease down to the readers' part.
// - Nothing a reader was granted is ever shortened: reader_lease_deadline_ms
//   only grows, and dropping the trigger's lease lowers lease_deadline_ms
//   to the readers' part, never below it (and raises it there when the
//   trigger's lease ran out before its consuming get came).
// - The fate of a prefetched replica is counted once, at the first of read,
//   eviction or removal.
//
// Thread-safe as far as its own state goes (it has none besides the
// metrics, which are): the ObjectMeta it is handed must be guarded by the
// caller.
#ifndef KVPOOL_MASTER_LEASE_POLICY_H_
#define KVPOOL_MASTER_LEASE_POLICY_H_

#include <cstdint>

#include "common/metrics.h"
#include "master/master_config.h"
#include "master/object_store.h"
#include "master/segment_manager.h"

namespace kvpool {

class LeasePolicy {
 public:
  // The knobs it reads, named as in MasterConfig.
  struct Options {
    int64_t default_kv_lease_ttl = 10000;
    int64_t prefetch_consumed_lease_ms = 0;
    static Options FromConfig(const MasterConfig& c);
  };

  // The series it counts into. The registry is used for a counter created
  // on first use, so it is listed only once something was recycled.
  struct Metrics {
    MetricsRegistry* registry = nullptr;
    // kvpool_master_prefetch_window_seconds
    Histogram* prefetch_window = nullptr;
    // kvpool_master_prefetch_fate_total
    CounterVec* prefetch_fate = nullptr;
  };

  // `segments` answers which segments are prefetch buffers; it and the
  // metrics must outlive the policy.
  LeasePolicy(Options options, const SegmentManager& segments, Metrics metrics);
  LeasePolicy(const LeasePolicy&) = delete;
  LeasePolicy& operator=(const LeasePolicy&) = delete;

  // A get's lease on `m` at `now`; returns its TTL in ms. Consumes one
  // pending router trigger (observing its window), and recycles buffered
  // replicas when prefetch_consumed_lease_ms is set.
  int64_t GrantReadLease(ObjectMeta& m, int64_t now) const;
  // Counts `fate` if `m`'s replica came from a prefetch no get has read
  // yet, and marks it read, so that each prefetch has one fate.
  void CountPrefetchFate(ObjectMeta& m, const char* fate) const;
  // Whether every COMPLETE memory replica of `m` (at least one) lives in a
  // mounted prefetch buffer segment.
  bool OnlyInPrefetchBuffer(const ObjectMeta& m) const;

 private:
  const Options options_;
  const SegmentManager& segments_;
  const Metrics metrics_;
};

}  // namespace kvpool

#endif  // KVPOOL_MASTER_LEASE_POLICY_H_
