// EvictionPolicy: which DRAM replicas the master gives up when a tier runs
// full, and in what order. It reads the object table and the segments and
// decides; what dropping a replica entails beyond that (the object's erase
// with its version floor and tasks, the node's directory, offload tasks)
// stays with MasterService, reached through the few Hooks below.
//
// Promise: a replica is evicted only if its object is COMPLETE, unleased,
// not hard-pinned, not soft-pinned (unless nothing else is left and
// allow_evict_soft_pinned_objects), not read by a pending offload, and lies
// in a segment of the kind being evicted that was open when the pass began
// (a segment mounted during a pass -- a node re-registering its directory
// -- is never part of it). Unpinned objects go before
// soft-pinned ones; within each, objects that keep an SSD copy before those
// that would be lost; then least recently used first. With offload on, an
// object with no SSD copy is copied first rather than dropped, unless
// offload_force_evict, its holder's SSD is full, or it lies only in extra
// segments (each counted).
//
// Thread-safe: one eviction pass at a time (its own mutex, taken before any
// shard lock); shards are locked one at a time, and the hooks are called
// with the shard's lock held.
#ifndef KVPOOL_MASTER_EVICTION_POLICY_H_
#define KVPOOL_MASTER_EVICTION_POLICY_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <vector>

#include "common/clock.h"
#include "common/metrics.h"
#include "common/mutex.h"
#include "master/master_config.h"
#include "master/object_store.h"
#include "master/segment_manager.h"

namespace kvpool {

class EvictionPolicy {
 public:
  using Shard = ObjectStore::Shard;
  using ObjectMap = ObjectStore::ObjectMap;

  // The knobs it reads, named as in MasterConfig.
  struct Options {
    double eviction_high_watermark_ratio = 0.90;
    double eviction_ratio = 0.05;
    bool allow_evict_soft_pinned_objects = true;
    bool enable_offload = false;
    bool offload_force_evict = false;
    static Options FromConfig(const MasterConfig& c);
  };

  // What the owner of the object table does for it; each is called with
  // the shard's lock held.
  struct Hooks {
    // Queues an SSD copy of `m`; false when none was queued, with
    // `*holder_ssd_full` set if a holder was skipped because its SSD is full.
    // Called only with enable_offload.
    std::function<bool(Shard&, const ObjectKey&, const ObjectMeta&,
                       bool* holder_ssd_full)>
        queue_offload;
    // Counts the fate of a prefetched replica no get has read.
    std::function<void(ObjectMeta&, const char* fate)> count_prefetch_fate;
    // Lets go of the evicted MEMORY ranges (no reader or writer holds them).
    std::function<void(std::span<const Replica>)> release_replicas;
    // Tells of the DRAM (kind kMain) or prefetch buffer replicas just taken
    // from `m`, `taken` (KV events); optional. Called before erase_evicted.
    std::function<void(const ObjectKey&, const ObjectMeta&,
                       std::span<const Replica> taken)>
        evicted;
    // Erases an object left with no replica; returns the iterator past it.
    std::function<ObjectMap::iterator(Shard&, ObjectMap::iterator)>
        erase_evicted;
  };

  EvictionPolicy(Options options, const Clock* clock, ObjectStore& objects,
                 SegmentManager& segments, MetricsRegistry& metrics,
                 Hooks hooks);
  EvictionPolicy(const EvictionPolicy&) = delete;
  EvictionPolicy& operator=(const EvictionPolicy&) = delete;

  // Evicts when the MAIN segments are at or above the high watermark, down
  // to it and a further eviction_ratio of capacity; likewise the
  // PREFETCH_BUFFER segments, each on its own reading, one eviction_ratio
  // earlier; then what RequestBufferRoom asked for. Returns the bytes freed.
  uint64_t EvictIfNeeded() ABSL_LOCKS_EXCLUDED(evict_mu_);
  // Frees at least `bytes` of the replicas in segments of `kind` if it can,
  // in the order of the promise above; with `only`, of those segments alone
  // (ascending). Returns the bytes freed.
  uint64_t EvictBytes(uint64_t bytes, SegmentKind kind = SegmentKind::kMain,
                      const std::vector<uint32_t>* only = nullptr)
      ABSL_LOCKS_EXCLUDED(evict_mu_);
  // A prefetch buffer with usage `u`, of which `reserved` bytes are promised
  // to queued promotions, could not take `size` more: the next
  // EvictIfNeeded drains enough of the prefetch buffers to take it with the
  // buffer back at its low mark (high watermark - eviction_ratio).
  void RequestBufferRoom(const SegmentUsage& u, uint64_t reserved,
                         uint64_t size);

  uint64_t evicted_objects() const { return evicted_objects_.load(); }
  uint64_t evicted_bytes() const { return evicted_bytes_.load(); }

 private:
  // Candidates come in rounds: unpinned before soft-pinned, and within
  // each, objects that keep an SSD copy before objects that would be lost.
  struct Round {
    bool allow_soft;
    bool with_copy;
  };
  // How one EvictBytes call sees the table: which replicas count, which
  // objects may go and in what order.
  class Pass;
  // What one EvictBytes call did, for the metrics.
  struct Tally {
    uint64_t freed = 0;
    uint64_t queued = 0;  // offloads queued instead of a drop
    uint64_t kept = 0;    // no copy, none queued, not forced
    uint64_t forced = 0;  // dropped with no copy: offload_force_evict
    uint64_t dropped_ssd_full = 0;
    uint64_t dropped_extra = 0;
  };

  // Candidate selection: the rank at or below which the round's candidates
  // free `want` bytes (no key copied); nullopt when the round has none.
  std::optional<int64_t> SelectCutoff(const Pass& pass, Round round,
                                      uint64_t want)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(evict_mu_);
  // Evicts the round's candidates ranked at or below `cutoff` until
  // `bytes` are freed in all.
  void EvictUpTo(const Pass& pass, Round round, int64_t cutoff, uint64_t bytes,
                 Tally* tally) ABSL_EXCLUSIVE_LOCKS_REQUIRED(evict_mu_);
  // Whether an object with no SSD copy may be dropped now (offload on):
  // false when an offload was queued for it instead, or it is kept.
  bool MayDropWithoutCopy(Shard& shard, const ObjectKey& key,
                          const ObjectMeta& m, Tally* tally)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(shard.mu());
  // Removal: takes the object's replicas of the pass's kind and lets them
  // go, erasing the object if none is left. Returns the iterator past it.
  ObjectMap::iterator Evict(const Pass& pass, Shard& shard,
                            ObjectMap::iterator it, Tally* tally)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(shard.mu());
  // Accounting: the pass's counters.
  void Publish(const Tally& tally) ABSL_EXCLUSIVE_LOCKS_REQUIRED(evict_mu_);
  // Every COMPLETE memory replica of `m` lies in an extra segment, which
  // nothing offloads from: eviction drops such an object with no copy, as a
  // store without an SSD tier would, rather than keeping it forever.
  bool OnlyInExtraSegments(const ObjectMeta& m) const;

  const Options options_;
  const Clock* clock_;
  ObjectStore& objects_;
  SegmentManager& segments_;
  const Hooks hooks_;
  // Publish's counters, by handle.
  Counter& evicted_bytes_total_;
  Counter& eviction_passes_;
  Counter& offload_queued_;
  Counter& dropped_ssd_full_;
  Counter& dropped_extra_;
  Counter& force_evicted_;
  Counter& kept_no_copy_;

  // One eviction pass at a time; guards no data of its own (the pass
  // helpers above require it).
  Mutex evict_mu_;
  std::atomic<uint64_t> evicted_objects_{0};
  std::atomic<uint64_t> evicted_bytes_{0};
  std::atomic<uint64_t> buffer_evict_request_{0};  // bytes a trigger lacked
};

}  // namespace kvpool

#endif  // KVPOOL_MASTER_EVICTION_POLICY_H_
