// PromotionScheduler: when an SSD-only value may be promoted to DRAM, and
// the bookkeeping of the promotion entry every path shares (promote on hit,
// prefetch on exist, the router's trigger). It owns the gates (the
// promote-on-hit frequency sketch, the main cache's watermark, the shared
// in-flight cap, one entry per key), the in-flight count and the
// promotion counters, the bytes queued router promotions reserve in their
// holder's prefetch buffer, and the ends of an entry: completion, failure,
// cancellation, expiry at its deadline and the reaper. The requests that
// name a key (validation, tenant lookup, the shard lock) stay with
// MasterService, which calls in with the shard's lock held; the mailboxes
// the tasks go to (their deadline order) are NodeRegistry's, reached
// through the Hooks.
//
// Invariant (tested): admitted == completed + failed + cancelled + expired
// + in_flight.
//
// Thread-safe: the counters are atomic and the buffer reservations have
// their own mutex, a leaf taken under a shard lock; everything that touches
// a shard's promotions is called with that shard's lock held.
#ifndef KVPOOL_MASTER_PROMOTION_SCHEDULER_H_
#define KVPOOL_MASTER_PROMOTION_SCHEDULER_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/clock.h"
#include "common/metrics.h"
#include "common/mutex.h"
#include "master/frequency_sketch.h"
#include "master/master_config.h"
#include "master/node_registry.h"
#include "master/object_store.h"
#include "master/segment_manager.h"
#include "master/tiering_metrics.h"

namespace kvpool {

// How long a range whose owner vanished is kept before reuse when a holder
// may still be copying it (an offload read or a promotion write).
inline constexpr int64_t kTaskGraceMs = 30000;

// Counters of the promotion entry, all paths together. Invariant (tested):
// admitted == completed + failed + cancelled + expired + in_flight.
struct PromotionCounters {
  uint64_t admitted = 0;
  uint64_t completed = 0;
  uint64_t failed = 0;
  uint64_t cancelled = 0;
  uint64_t expired = 0;
  uint64_t in_flight = 0;
};

class PromotionScheduler {
 public:
  using Shard = ObjectStore::Shard;
  using PromotionMap = ObjectStore::PromotionMap;

  // The knobs it reads, named as in MasterConfig.
  struct Options {
    int64_t promotion_admission_threshold = 2;
    int64_t promotion_queue_limit = 50000;
    int64_t promotion_task_ttl_sec = 600;
    double eviction_high_watermark_ratio = 0.90;
    bool prefetch_strict_buffer = true;
    static Options FromConfig(const MasterConfig& c);
  };

  // What the owner of the object table does for it.
  struct Hooks {
    // Hands `task` to the mailbox of the node with index `holder`; false
    // when that node is gone.
    std::function<bool(uint32_t holder, PromotionTaskMsg task)> push_promotion;
    // The name of tenant id `tenant`.
    std::function<std::string(uint32_t tenant)> tenant_name;
    // A prefetch buffer with usage `u`, `reserved` bytes of it promised,
    // could not take `size` more: have it drained (buffer_mu held).
    std::function<void(const SegmentUsage& u, uint64_t reserved, uint64_t size)>
        request_buffer_room;
  };

  PromotionScheduler(Options options, const Clock* clock,
                     SegmentManager& segments, MetricsRegistry& metrics,
                     TieringMetrics& tiering, Hooks hooks);
  PromotionScheduler(const PromotionScheduler&) = delete;
  PromotionScheduler& operator=(const PromotionScheduler&) = delete;

  // ---- gates and accounting ----
  // Takes one of promotion_queue_limit's slots, atomically; false if none.
  bool TryReserveSlot();
  // Gives back a slot taken for a task that was not admitted after all.
  void ReleaseSlot() { --in_flight_; }
  uint64_t NewTaskId() { return next_task_id_++; }
  // Router promotions that will land in a holder's prefetch buffer reserve
  // their bytes from enqueue until PromotionAllocStart (or the end of the
  // task), so a burst of triggers cannot overbook the buffer. False (and
  // room requested) when the buffer of `node_id`, index `holder`, is full.
  bool ReserveBuffer(uint32_t holder, const std::string& node_id, uint64_t size)
      ABSL_LOCKS_EXCLUDED(buffer_mu_);
  void ReleaseBufferReservation(PromotionState& st)
      ABSL_LOCKS_EXCLUDED(buffer_mu_);
  // Whether the main cache is at or over its high watermark.
  bool OverWatermark() const;

  // ---- admission (shard lock held) ----
  // Promote on hit: a get of the SSD-only `m`. Runs the gates in order
  // (frequency, watermark, dedup, cap) and, past them, queues a task to the
  // holder of its first SSD copy. Returns the gate that refused it (also
  // counted), "holder_gone" if its holder went meanwhile (not counted), or
  // nullptr when admitted.
  const char* MaybePromoteOnHit(Shard& shard, const ObjectKey& key,
                                ObjectMeta& m)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(shard.mu());
  // Records `st` as `key`'s entry (its slot already taken).
  void Admit(Shard& shard, const ObjectKey& key, const PromotionState& st)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(shard.mu());
  // Hands `task` to the mailbox of `st.holder` (earliest deadline first,
  // then FIFO) and admits `st`; when the holder is gone, releases what `st`
  // took (slot, buffer reservation) and returns false.
  bool Queue(Shard& shard, const ObjectKey& key, PromotionState& st,
             PromotionTaskMsg task) ABSL_EXCLUSIVE_LOCKS_REQUIRED(shard.mu());
  // A router trigger for the SSD-only `key` of `size` bytes, past the
  // main watermark and with no entry yet: takes a slot, and with a
  // prefetch buffer on the holder (index `holder`, `holder_node_id`) and
  // prefetch_strict_buffer, reserves the bytes there (a full buffer is
  // counted); then queues a task with the deadline `deadline_in_ms` from
  // `now` (none if <= 0).
  enum class RouterAdmission { kQueued, kCap, kBufferFull, kHolderGone };
  RouterAdmission AdmitRouter(Shard& shard, const ObjectKey& key, uint64_t size,
                              uint32_t holder,
                              const std::string& holder_node_id, int64_t now,
                              int64_t deadline_in_ms)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(shard.mu());
  // Prefetch on exist: admits a promotion of `key` that its holder (index
  // `holder`) runs itself, no mailbox. Returns the task id, or 0 when the
  // shared cap refuses it.
  uint64_t AdmitExist(Shard& shard, const ObjectKey& key, uint32_t holder,
                      int64_t now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(shard.mu());
  // An exist trigger found this promotion queued: a router promotion not
  // yet staged becomes the exist path's (no deadline, main DRAM).
  void TakeOverForExist(PromotionState& st);
  // The exist trigger of the holder `holder` found this promotion: a router
  // promotion still in the master's mailbox (not handed out, not staged) on
  // that holder becomes the exist path's and the holder runs it at once, as
  // its own; its mailbox copy is dropped at hand-out. False (nothing
  // changed) otherwise. Without it the holder would wait for the mailbox,
  // and its gets' SSD reads would not be kept for the promotion.
  bool ClaimForExist(PromotionState& st, uint32_t holder);
  // A router trigger found this promotion queued: the task is worth
  // running until the last asker's deadline (`deadline_in_ms` from `now`);
  // one who gave none (<= 0) keeps it whatever the time.
  static void ExtendDeadline(PromotionState& st, int64_t now,
                             int64_t deadline_in_ms);

  // PromotionAllocStart: the DRAM the promotion `st` of `size` bytes is
  // written to, by holder `holder_id`, recorded as staged; its buffer
  // reservation is released (now used, or failed). Router promotions land
  // in the holder's prefetch buffer when it has one (only there with
  // prefetch_strict_buffer); every other path in the main cache. Nothing
  // is evicted for it: a full pool is the DRAM-pressure signal. nullopt
  // when there is no room (counted).
  std::optional<Placement> Stage(PromotionState& st, uint64_t size,
                                 const std::string& holder_id);

  // ---- the ends of an entry (shard lock held) ----
  // Removes the entry `it` its holder reported on, releasing its slot and
  // reservation; the caller counts it with Finished. Returns the entry.
  PromotionState Take(Shard& shard, PromotionMap::iterator it)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(shard.mu());
  void Finished(bool landed) { ++(landed ? completed_ : failed_); }
  // Drops `key`'s entry, if any (its object or holder went): releases its
  // buffer reservation and staged range; counted cancelled.
  void Cancel(Shard& shard, const ObjectKeyView& key)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(shard.mu());
  // Releases an entry whose deadline passed: buffer reservation, staged
  // range, the trigger's lease; counts fate "expired" (`where`: "master",
  // "master_after_get" or "holder").
  void Expire(Shard& shard, const ObjectKeyView& key, const char* where)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(shard.mu());
  // The hand-out of task `t` (of `key`) at `now`: kExpired (its entry
  // released) if its deadline passed or every get the router announced
  // read the SSD already; kDuplicate if its holder has it already (an
  // exist trigger claimed it); else kDeliver, with its time left filled in
  // and the entry marked as with its holder.
  enum class HandOutResult { kDeliver, kExpired, kDuplicate };
  HandOutResult HandOut(Shard& shard, const ObjectKeyView& key, int64_t now,
                        PromotionTaskMsg& t)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(shard.mu());
  // The reaper: drops the entries of `shard` older than
  // promotion_task_ttl_sec, counted expired.
  void Reap(Shard& shard, int64_t now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(shard.mu());

  PromotionCounters counters() const;
  uint64_t in_flight() const { return in_flight_.load(); }

 private:
  // Lets go of an entry's staged range after the grace: the holder may
  // still be writing it.
  void FreeStaged(const PromotionState& st, int64_t now);

  const Options options_;
  const Clock* clock_;
  SegmentManager& segments_;
  MetricsRegistry& metrics_;
  TieringMetrics& tiering_;
  const Hooks hooks_;
  FrequencySketch sketch_;  // the promote-on-hit frequency gate

  std::atomic<uint64_t> next_task_id_{1};
  // The promotion entry's shared counters (promotion_in_flight_ in the
  // seeds).
  std::atomic<uint64_t> in_flight_{0};
  std::atomic<uint64_t> admitted_{0}, completed_{0}, failed_{0}, cancelled_{0},
      expired_{0};

  Mutex buffer_mu_;
  // By holder index.
  std::unordered_map<uint32_t, uint64_t> buffer_reserved_
      ABSL_GUARDED_BY(buffer_mu_);
};

}  // namespace kvpool

#endif  // KVPOOL_MASTER_PROMOTION_SCHEDULER_H_
