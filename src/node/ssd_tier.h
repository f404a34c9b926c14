// A holder's SSD tier: its FileStorage plus the work the master hands it.
//  - offload: copy a MEMORY replica from this node's segment to the SSD,
//    commit it to the local index, then report (roll back if the master
//    refuses or cannot be told);
//  - promotion: PromoteOneKeyFromLocalDisk, the one chain every promotion
//    path uses (AllocStart -> staging buffer -> SSD read -> write into the
//    staged replica -> NotifyPromotion), with an RAII guard that reports a
//    failure at any step;
//  - capacity: above the SSD high watermark, two-phase eviction (the master
//    drops the replica first, then the space is freed);
//  - re-registration of what the SSD holds after a (re)mount.
// Thread-safe. One offload worker; promotions run on the RFC's one
// sequential worker, or on the pipelined executor (SsdTierConfig::
// promotion_inflight_bytes > 0): several workers whose batches overlap, the
// bytes they hold in flight bounded by a budget.
#ifndef KVPOOL_NODE_SSD_TIER_H_
#define KVPOOL_NODE_SSD_TIER_H_

#include <atomic>
#include <chrono>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "common/clock.h"
#include "common/deadline_queue.h"
#include "common/metrics.h"
#include "common/mutex.h"
#include "kvpool.pb.h"
#include "node/gets_first.h"
#include "node/in_flight_reads.h"
#include "node/recent_get_reads.h"
#include "node/shared_reads.h"
#include "node/ssd_tier_timing.h"
#include "node/staging_pool.h"
#include "rpc/master_client.h"
#include "storage/file_storage.h"
#include "transport/data_plane_types.h"
#include "transport/local_holders.h"
#include "transport/segment_table.h"
#include "transport/tcp_data_client.h"

namespace kvpool {

struct SsdTierConfig {
  std::string ssd_offload_path;
  uint64_t ssd_capacity_bytes = 4ull << 30;
  uint64_t ssd_segment_file_size = 256ull << 20;
  int64_t ssd_gc_interval_ms = 1000;
  int64_t ssd_eviction_interval_ms = 500;
  std::string ssd_io_backend = "auto";  // auto, io_uring, pread
  unsigned ssd_verify_threads = 1;      // FileStorageConfig's
  size_t offload_batch = 64;
  // The router-prefetch RFC's promotion pull thread (off: promotions ride
  // the long-poll heartbeat). Every promotion_pull_interval_ms it takes at
  // most promotion_max_per_pull tasks for the one promotion worker.
  bool promotion_pull = false;
  int64_t promotion_pull_interval_ms = 100;
  size_t promotion_max_per_pull = 32;
  // Keys the promotion worker reads from the SSD per submission. 1 (the
  // default) is the sequential worker of the RFC; more lets one io_uring
  // submission carry several reads.
  size_t promotion_read_batch = 1;
  // 0 (the default): the RFC's single sequential promotion worker. > 0: the
  // pipelined executor: `promotion_workers` threads run the promotion chain
  // at once, each on a batch of up to promotion_read_batch keys, so one
  // batch's RPCs and copies overlap the others' SSD reads; the bytes of all
  // batches being read or copied never exceed this budget (a single task
  // larger than the budget runs alone). A batch takes its share after its
  // alloc round trip and gives it back before its notify round trip. Sharing
  // the disk with offload writes: while an offload batch is queued or being
  // written, the executor starts no second batch (it runs as the sequential
  // worker would).
  uint64_t promotion_inflight_bytes = 0;
  int promotion_workers = 8;
  // A task with a deadline is also dropped unread (reported expired, as
  // one past its deadline) when the batch taken from the queue now could
  // not have its bytes in place by then: from the recent batches' service
  // time and the bytes reading or waiting for the budget ahead of it
  // (ssd_tier_timing::ExpectedLandMs). Off: only a passed deadline drops.
  bool promotion_drop_unreachable = false;
  // Budget of SharedReads: a get's SSD read of a key whose promotion waits
  // in this holder's queue is kept (copied) for it, and the promotion then
  // skips its disk read. 0: off.
  uint64_t ssd_read_share_bytes = 0;
  // GetsFirst's bound: while a get reads this tier's disk, a promotion batch
  // waits up to this long before it submits its reads. 0: off.
  int64_t promotion_yield_to_gets_ms = 0;
  // A prefetch promotion (exist or router trigger) that would read the disk
  // for a block a get read from this disk within this many ms is dropped
  // unread and reported failed (RecentGetReads): it came after its get. A
  // get's bytes kept for it (SharedReads) or a get's read it can join are
  // still taken. 0: off, such promotions read the disk again.
  int64_t promotion_skip_after_get_ms = 0;
  // Bytes of huge-page staging memory for promotion reads (StagingPool):
  // > 0 reads each promoted value into a slot and copies it into its
  // replica; 0 (the default) reads straight into a replica in this node's
  // segment (4 KiB pages: two disk requests per 1 MiB value on a virtio
  // disk) and into a fresh buffer otherwise.
  uint64_t promotion_staging_bytes = 0;
};

// What the pull thread did (tests and benches check the RFC's cadence).
struct PullStats {
  uint64_t pulls = 0;
  uint64_t tasks = 0;
  uint64_t max_tasks_per_pull = 0;
  // Pulls made before the cadence because the executor's workers freed
  // half its queue while the master had more (the rest are on the cadence).
  // For the executor fed by the heartbeat, every pull is one (room pulls).
  uint64_t pulls_on_room = 0;
  bool master_lacks_pull = false;  // an older master: heartbeat delivery
};

// A LocalHolder so that a client in the same process reads and prefetches
// through it without a socket (transport/local_holders.h).
class SsdTier final : public LocalHolder {
 public:
  // `master`, `segments` and `tcp` must outlive the tier.
  // `clock` (must outlive it too) times the loops and promotion deadlines.
  SsdTier(SsdTierConfig config, std::string node_id, MasterClient* master,
          const SegmentTable* segments, TcpDataClient* tcp,
          const Clock* clock = SystemClock::Default());
  ~SsdTier();
  Status Start();
  // Refuses new work, finishes queued and running tasks, joins the workers.
  void Stop();

  // Registers every stored object with the master; copies it refuses are
  // dropped locally. Called after each (re)mount.
  void RegisterWithMaster();
  void EnqueueOffloads(
      const google::protobuf::RepeatedPtrField<rpc::OffloadTask>& tasks);
  void EnqueuePromotions(
      const google::protobuf::RepeatedPtrField<rpc::PromotionTask>& tasks);
  // After a remount at a master that does not know the promotions queued
  // here (a new leader, docs/ha.md; or a restarted master): registers their
  // keys with it as this holder's prefetch tasks (RegisterPrefetchTask) and
  // keeps each queued under its new task id, so the failover does not drop
  // them. A key it refuses (gone, in DRAM already) is dropped as its task
  // would have been. Call after RegisterWithMaster.
  void ResubmitPromotions();
  // Deletes the records of keys the master removed or replaced (durably: a
  // DEAD header), before any later offload can write the key again.
  void DropRecords(
      const google::protobuf::RepeatedPtrField<rpc::DiskDropTask>& drops);
  // The same for one key, only if its record is no newer than `version`
  // (0: whatever version).
  void DropRecord(const std::string& tenant, const std::string& key,
                  uint64_t version);
  // Serves SSD_READ of the data plane: fills each op's dest and result.
  void ServeReads(std::span<KeyReadOp> ops) override;

  // Prefetch-on-exist at the holder (the contract is LocalHolder's).
  std::vector<ErrorCode> PrefetchKeys(const std::string& tenant,
                                      const std::vector<std::string>& keys,
                                      PrefetchDone on_done,
                                      bool for_next_get = false) override;

  // The shared promotion chain. Returns what the master was told.
  Status PromoteOneKeyFromLocalDisk(const rpc::PromotionTask& task);
  // The same chain for several keys at once: one BatchPromotionAllocStart
  // and one BatchPromotionNotify (one call per key for an older master),
  // the SSD reads in one submission, and every key's outcome reported on
  // every way out. Statuses in task order.
  // `before_data` (optional) runs after the alloc round trip, before the
  // first byte is read, when any key was staged; `data_done` (optional)
  // runs once every key's bytes are in place or failed, before the
  // outcomes are reported. The pipelined executor takes and frees the
  // batch's share of its in-flight budget there, so neither master round
  // trip holds budget the disk could use. `bytes_arrived` (optional) is
  // called with each value's size as its bytes come from the disk, while
  // the batch's other reads may still be in flight (in_io_loop: inside the
  // I/O backend's completion loop, where it must not block on a lock),
  // then once with 0 bytes outside it after the reads: the executor gives
  // each value's share of the budget back there.
  using BytesArrivedFn = std::function<void(uint64_t bytes, bool in_io_loop)>;
  std::vector<Status> PromoteKeysFromLocalDisk(
      std::span<const rpc::PromotionTask> tasks,
      const std::function<void()>& data_done = {},
      const std::function<void()>& before_data = {},
      const BytesArrivedFn& bytes_arrived = {});
  // Called when a promotion has written a value whose bytes it verified
  // against the SSD record into this node's own segment, with where and
  // what: the node's DRAM directory then takes the record's checksum
  // instead of hashing the replica again. Set before Start().
  using PromotionWrittenHook = std::function<void(
      uint64_t segment_id, uint64_t offset, uint64_t size, uint64_t version,
      const std::string& tenant, const std::string& key, uint64_t checksum)>;
  void SetPromotionWrittenHook(PromotionWrittenHook hook) {
    written_hook_ = std::move(hook);
  }
  PullStats pull_stats() const;
  // Promotion bytes in flight now, and the most there ever were.
  uint64_t promotion_inflight_bytes() const;
  uint64_t promotion_inflight_peak() const { return promo_peak_.load(); }
  // Promotions that waited for gets' disk reads (promotion_yield_to_gets_ms).
  GetsFirst::Stats gets_first_stats() const { return gets_first_.stats(); }
  // Gets' SSD reads kept for queued promotions (ssd_read_share_bytes).
  SharedReads::Stats shared_read_stats() const { return shared_reads_.stats(); }
  // Promotions that took the bytes of a get's read in flight (get_reads_).
  InFlightReads::Stats promotion_join_stats() const {
    return get_reads_.stats();
  }
  InFlightReads::Stats joined_read_stats() const {
    return in_flight_reads_.stats();
  }
  // False once an older master refused the batch promotion RPCs.
  bool batch_rpcs() const { return batch_rpcs_.load(); }
  // Test hook: a holder that stops pulling (its tasks wait for the reaper).
  void PausePullForTest(bool paused) { pull_paused_ = paused; }
  // Test hook: promotion workers take no task while paused (tasks wait in
  // this holder's queue, so their deadlines can pass here).
  void PausePromotionsForTest(bool paused);
  // Promotion tasks received and not yet started, and their keys in the
  // order the workers will take them.
  size_t queued_promotions() const;
  // How many more promotion tasks the heartbeat should bring: with the
  // pipelined executor on the heartbeat, enough to keep two batches per
  // worker queued (at most 256); 0 otherwise (the sequential worker keeps
  // the master's one task per beat, and a pulling holder pulls).
  size_t PromotionRoom() const;
  // The same for the pull thread: how many it asks for beyond
  // promotion_max_per_pull (0 without the executor).
  size_t ExecutorRoom() const ABSL_LOCKS_EXCLUDED(mu_);
  // What a beat states as HeartbeatRequest.max_promotion_tasks: unset for
  // the sequential worker and a pulling holder (the master's knob applies);
  // for the executor fed by the heartbeat, its room when that is at least
  // half its queue, else 0, and then the room pull takes tasks once the
  // workers have freed half the queue (docs/ssd_tier.md, "Delivery").
  std::optional<uint32_t> HeartbeatPromotionRoom() ABSL_LOCKS_EXCLUDED(mu_);
  std::vector<std::string> queued_promotion_keys() const;
  // Offloads one batch now (the worker's body; public for tests).
  void RunOffloadBatch(std::vector<rpc::OffloadTask> batch);
  // One SSD watermark check (the eviction loop's body; public for tests).
  void EvictIfNeeded();

  FileStorage* storage() { return storage_.get(); }
  MetricsRegistry& metrics() { return metrics_; }
  std::string StatusJson() const;

 private:
  // Reads ops[which] of a get from the SSD (`all` = the ops as ReadItems),
  // offering a queued promotion's keys to SharedReads; their bytes.
  uint64_t ReadForGets(std::span<KeyReadOp> ops,
                       const std::vector<ReadItem>& all,
                       const std::vector<size_t>& which);
  void OffloadLoop();
  void PromotionLoop();
  void EvictionLoop();
  void PrefetchLoop();
  void PullLoop();
  void RoomPullLoop();
  enum class PullResult { kOk, kFailed, kMasterLacksPull };
  // One PullPromotionTasks of up to `ask` tasks, queued here; *got of them.
  PullResult PullOnce(size_t ask, uint64_t* got);
  void CountPullOnRoom();
  // The executor runs on the heartbeat, with room pulls.
  bool RoomPulls() const;
  // Room that is worth a pull: half the queue's target.
  size_t RoomWorthAPull() const;
  // Waits on cv_ (mu_ held by `lock`) until clock_ reaches deadline_ms,
  // `wake` (called with mu_ held, before each wait) returns true, or
  // Stop(); true when stopping.
  bool WaitUntilOrStop(int64_t deadline_ms,
                       const std::function<bool()>& wake = {})
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // ExecutorRoom() with mu_ held, and the queue length it aims for.
  size_t ExecutorRoomLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  size_t ExecutorQueueTarget() const;
  // The pull thread's wait when the master had more than it took: until
  // clock_ reaches deadline_ms, or RoomWorthAPull(); true when stopping,
  // and *on_room when it was the room that woke it.
  bool WaitForRoomOrStop(int64_t deadline_ms, bool* on_room)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A batch of `bytes` may start reading: it fits the in-flight budget, or
  // nothing else is in flight.
  bool PromotionBytesFit(uint64_t budget, uint64_t bytes)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Waits until PromotionBytesFit, then counts `bytes` in flight. Returns
  // the clock_ ms it waited.
  int64_t AcquirePromotionBytes(uint64_t budget, uint64_t bytes)
      ABSL_LOCKS_EXCLUDED(mu_);
  struct PrefetchRequest {
    std::string tenant;
    std::vector<std::string> keys;
    PrefetchDone done;
    bool for_next_get = false;  // a get's kick (LocalHolder::PrefetchKeys)
  };
  struct PromotionJob {
    rpc::PromotionTask task;
    PrefetchDone done;
    // clock_ ms: the task's deadline_in_ms from receipt (none: never
    // expires here).
    std::optional<int64_t> deadline_ms;
    // A get's kick: for the next get, never skipped after its own get's
    // read (SkipAfterGet).
    bool for_next_get = false;
  };
  // promotion_drop_unreachable: moves the tasks of `jobs` named by `run`
  // whose deadline comes before a batch taken at now_ms could land (no
  // estimate before the first batch read: none) to `dropped`.
  void DropUnreachable(const std::vector<PromotionJob>& jobs, int64_t now_ms,
                       uint64_t budget, std::vector<size_t>* run,
                       std::vector<rpc::PromotionTask>* dropped)
      ABSL_LOCKS_EXCLUDED(mu_);
  // The promotion chain's steps (ssd_tier_promote.cc): one batch's state
  // and the RAII reporter of its outcomes to the master.
  class PromotionBatch;
  class PromotionReporter;
  // Tells the master these tasks were dropped unread past their deadline.
  void ReportExpired(std::span<const rpc::PromotionTask> tasks);
  // Tells the master these tasks failed (dropped unread, not by a deadline).
  void ReportFailed(std::span<const rpc::PromotionTask> tasks);
  // promotion_skip_after_get_ms: moves the prefetch tasks of `jobs` named by
  // `run` whose get has read the block from the disk already (and left no
  // bytes to take) to `skipped` (indices into `jobs`). A get's kick is for
  // the next get and is never moved.
  void SkipAfterGet(const std::vector<PromotionJob>& jobs,
                    std::vector<size_t>* run, std::vector<size_t>* skipped);
  void RegisterPrefetches(PrefetchRequest req);
  // The master's name for the empty tenant ("default"), as offload stored.
  static const std::string& TenantName(const std::string& tenant);
  // Deletes this version of the key's SSD copy. A copy already gone (or
  // replaced by a newer one) is fine; one that could not be marked dead on
  // disk is logged and counted: the master's version floor refuses it if a
  // restart brings it back.
  void DropCopy(const std::string& tenant, const std::string& key,
                uint64_t version);

  const SsdTierConfig config_;
  const std::string node_id_;
  const Clock* const clock_;
  PromotionWrittenHook written_hook_;
  MasterClient* master_;
  const SegmentTable* segments_;
  TcpDataClient* tcp_;
  std::unique_ptr<FileStorage> storage_;
  MetricsRegistry metrics_;
  // kvpool_node_ssd_{write,read}_duration_seconds: one offload batch's
  // write, one batch of reads served to clients.
  Histogram& ssd_write_duration_{metrics_.GetHistogram(
      "kvpool_node_ssd_write_duration_seconds", "", LatencyBucketsSeconds(),
      "time to write one offload batch to the SSD")};
  Histogram& ssd_read_duration_{metrics_.GetHistogram(
      "kvpool_node_ssd_read_duration_seconds", "", LatencyBucketsSeconds(),
      "time to serve one batch of SSD reads to clients")};
  // kvpool_node_promotion_phase_microseconds_total{phase}: where the
  // promotion workers' time goes (ssd_tier_internal::AddPhaseTime).
  CounterVec promotion_phase_us_{
      &metrics_, "kvpool_node_promotion_phase_microseconds_total", "phase",
      "time promotion workers spent in each step of the chain"};
  SharedReads shared_reads_{config_.ssd_read_share_bytes};
  // With read sharing on, a get of a key a promotion is reading joins that
  // read (node/in_flight_reads.h). The wait is bounded by what a read issued
  // now could take at worst; a read already in flight ends no later than one
  // issued behind it, so the bound only matters for a stuck disk.
  static constexpr std::chrono::milliseconds kJoinReadWait{1000};
  InFlightReads in_flight_reads_{config_.ssd_read_share_bytes > 0,
                                 kJoinReadWait};
  // The same the other way round: a get's read of a key a queued promotion
  // wants, which that promotion joins when it comes to read the key while
  // the get's read is still on the disk (PromotionBatch::PlanReads).
  InFlightReads get_reads_{config_.ssd_read_share_bytes > 0, kJoinReadWait};
  StagingPool staging_{config_.promotion_staging_bytes, 1ull << 20};
  // Gets' disk reads before promotions' (promotion_yield_to_gets_ms).
  GetsFirst gets_first_{config_.promotion_yield_to_gets_ms};
  // Keys gets read from the disk lately (promotion_skip_after_get_ms).
  static constexpr size_t kRecentGetReads = 1 << 16;
  RecentGetReads recent_get_reads_{config_.promotion_skip_after_get_ms,
                                   kRecentGetReads, clock_};

  mutable Mutex mu_;
  CondVar cv_;  // any change of what mu_ guards that a worker waits for
  // Only promo_inflight_ falling, or an offload batch ending: what a batch
  // waiting for the budget (AcquirePromotionBytes) waits for. Apart from
  // cv_, so that each value given back wakes only those batches, not every
  // idle worker, the pull threads and the offload thread (a wake-up storm:
  // 43 % of the promotion threads' profile samples; docs/ssd_tier.md).
  CondVar budget_cv_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool prefetch_exited_ ABSL_GUARDED_BY(mu_) = false;
  std::deque<rpc::OffloadTask> offloads_ ABSL_GUARDED_BY(mu_);
  // Earliest deadline first, then FIFO (prefetch-on-exist, on-hit).
  DeadlineQueue<PromotionJob> promotions_ ABSL_GUARDED_BY(mu_);
  std::deque<PrefetchRequest> prefetches_ ABSL_GUARDED_BY(mu_);
  uint64_t promo_inflight_ ABSL_GUARDED_BY(mu_) = 0;
  // Bytes of batches waiting in AcquirePromotionBytes.
  uint64_t promo_held_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  // Recent batches' service time (promotion_drop_unreachable).
  ssd_tier_timing::PromotionServiceTime promo_service_ ABSL_GUARDED_BY(mu_);
  // A batch is being written.
  bool offload_active_ ABSL_GUARDED_BY(mu_) = false;
  bool promotions_paused_ ABSL_GUARDED_BY(mu_) = false;  // test hook
  // RoomPullLoop: pull once there is room; the ask of the pull in flight.
  bool room_pull_armed_ ABSL_GUARDED_BY(mu_) = false;
  size_t room_pull_ask_ ABSL_GUARDED_BY(mu_) = 0;
  std::atomic<uint64_t> promo_peak_{0};
  std::thread offload_thread_, eviction_thread_, prefetch_thread_, pull_thread_;
  std::vector<std::thread> promotion_threads_;
  std::atomic<bool> pull_paused_{false};
  // The master has the batch promotion RPCs (cleared on UNIMPLEMENTED).
  std::atomic<bool> batch_rpcs_{true};
  mutable Mutex pull_mu_;
  PullStats pull_stats_ ABSL_GUARDED_BY(pull_mu_);
  // After an older master refused a pull: beats state their whole room
  // until then (clock_ ms).
  int64_t room_pull_retry_at_ms_ ABSL_GUARDED_BY(pull_mu_) = 0;
};

}  // namespace kvpool

#endif  // KVPOOL_NODE_SSD_TIER_H_
