// The holders the master knows: identity, liveness, and each node's task
// mailbox (offload and promotion tasks). A node's heartbeat is a long poll:
// TakeTasks blocks until the node has work or its wait ends, so work is
// handed over the moment it exists instead of on the next timer tick.
//
// Node indices are never reused: a replica that names a node by index can
// never be mistaken for a later node. Thread-safe; never calls out while
// holding its lock (callers may hold an object shard lock).
#ifndef KVPOOL_MASTER_NODE_REGISTRY_H_
#define KVPOOL_MASTER_NODE_REGISTRY_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/clock.h"
#include "common/deadline_queue.h"
#include "common/mutex.h"
#include "master/liveness_clock.h"
#include "master/object_store.h"
#include "master/segment_manager.h"

namespace kvpool {

struct NodeInfo {
  uint32_t index = 0;
  std::string node_id;
  std::string data_endpoint;
  std::string host_id;
  bool ssd_enabled = false;
  // Runs a promotion pull thread: promotions wait for PullPromotionTasks
  // instead of riding the heartbeat.
  bool pulls_promotions = false;
  // Keeps a directory of its COMPLETE DRAM replicas (fed by DramEvents) and
  // re-registers it after a remount.
  bool keeps_dram_directory = false;
  // The key shared with this node for data-plane capabilities.
  std::shared_ptr<const cap::Key> cap_key;
};

struct OffloadTaskMsg {
  std::string tenant;
  std::string key;
  uint32_t segment = 0;
  uint64_t offset = 0;
  uint64_t size = 0;
  uint64_t version = 0;
};

struct PromotionTaskMsg {
  std::string tenant;
  std::string key;
  uint64_t size = 0;
  uint64_t task_id = 0;
  TriggerSource source = TriggerSource::kOnHit;
  bool from_prefetch = false;
  // The first trigger's deadline on the master's clock (ms; 0 = none): the
  // mailbox order. Whether it has expired is judged from the promotion's
  // entry, which later triggers may extend.
  int64_t deadline_ms = 0;
  // Filled when handed to the holder: ms left until the entry's deadline
  // (0 = none), so the holder needs no clock agreement with the master.
  int64_t deadline_in_ms = 0;
};

struct DiskDropMsg {
  std::string tenant;
  std::string key;
};

// A change to a node's DRAM directory (see rpc::DramEvent).
struct DramEventMsg {
  uint64_t seq = 0;  // set by the registry
  bool placed = false;
  uint32_t segment = 0;
  uint64_t offset = 0;
  uint64_t size = 0;
  std::string tenant;
  std::string key;
  uint64_t version = 0;
  bool disk_drop = false;  // see rpc::DramEvent
};

// A range whose release waits for the node to apply the event freeing it.
struct DueFree {
  Placement placement;
  int64_t not_before_ms = 0;
};

struct NodeTasks {
  std::vector<OffloadTaskMsg> offloads;
  std::vector<PromotionTaskMsg> promotions;
  // Every queued drop goes with each hand-over, ahead of its offloads: a
  // drop of an old value must reach the node before a later copy of the
  // key's new value could.
  std::vector<DiskDropMsg> disk_drops;
  // Every directory event the node has not acknowledged, in order (those
  // sent before are sent again if the node's ack says they were lost).
  std::vector<DramEventMsg> dram_events;
};

class NodeRegistry {
 public:
  // Silence is measured on a LivenessClock that advances at most
  // `max_step_ms` per housekeeping tick, so a master that was paused gives
  // every node a fresh grace period instead of declaring them all dead.
  explicit NodeRegistry(const Clock* clock, int64_t max_step_ms = 1000)
      : liveness_(clock, max_step_ms) {}

  // Registers a node (or refreshes its details) and marks it alive.
  uint32_t Register(const std::string& node_id,
                    const std::string& data_endpoint,
                    const std::string& host_id, bool ssd_enabled,
                    bool pulls_promotions = false,
                    bool keeps_dram_directory = false,
                    std::shared_ptr<const cap::Key> cap_key = nullptr);
  // Marks the node alive (and reachable again); false if unknown.
  bool Touch(const std::string& node_id);
  // A client could not reach the node's data plane: placement avoids it
  // until its next heartbeat (a crashed node never sends one, so it stays
  // avoided until it is declared dead). Unknown nodes are ignored.
  void ReportUnreachable(const std::string& node_id);
  // Node ids reported unreachable since their last heartbeat.
  std::vector<std::string> Unreachable() const;
  // The node's SSD had no room for an offload: no new offload goes to it
  // for a backoff that doubles from 1 s to 30 s while that goes on; a
  // success ends it.
  void OffloadFailed(uint32_t index, int64_t now_ms);
  void OffloadSucceeded(uint32_t index);
  bool OffloadPaused(uint32_t index, int64_t now_ms) const;
  std::optional<uint32_t> IndexOf(const std::string& node_id) const;
  // Forgets the node at once (as ExpireSilent would); nullptr if unknown.
  std::shared_ptr<const NodeInfo> Remove(const std::string& node_id);
  std::shared_ptr<const NodeInfo> Info(uint32_t index) const;
  // Ticks the liveness clock, then removes nodes silent for longer than
  // `ttl_ms` of it; returns them. Their queued tasks are discarded (the
  // caller releases the pins).
  std::vector<std::shared_ptr<const NodeInfo>> ExpireSilent(int64_t ttl_ms);

  // Directory events of a node that keeps_dram_directory (ignored for
  // others and unknown nodes). A freed range is handed back by AckDram only
  // once the node has applied the event, so a range the node's directory
  // names is never reused while the directory still names it. False (the
  // caller frees the range itself) when the node keeps no directory.
  void PushDramPlaced(uint32_t index, DramEventMsg ev);
  bool PushDramFreed(uint32_t index, const Placement& p, int64_t not_before_ms);
  // The node applied every event up to `acked_seq`: `release` is called
  // for each range their frees held (under the registry's lock: it may take
  // segment locks, never this registry's); returns how many.
  size_t AckDram(const std::string& node_id, uint64_t acked_seq,
                 const std::function<void(const DueFree&)>& release);
  // Events queued and not yet acknowledged, over all nodes.
  size_t dram_events_queued() const;
  // A drop of the node's SSD copy of a key, in its event sequence; false
  // (nothing queued) when the node keeps no directory.
  bool PushDiskDropEvent(uint32_t index, const std::string& tenant,
                         const std::string& key, uint64_t version);
  // The last event sequence number issued to the node (0: none, or the
  // node keeps no directory or is unknown).
  uint64_t LastDramSeq(uint32_t index) const;
  // Waits until each (node, seq) is acknowledged or its node is gone, or
  // `timeout_ms` passes; false on timeout.
  bool WaitDramAcked(const std::vector<std::pair<uint32_t, uint64_t>>& want,
                     int64_t timeout_ms);
  // False (nothing queued) when the node is gone.
  bool PushOffload(uint32_t index, OffloadTaskMsg task);
  void PushDiskDrop(uint32_t index, DiskDropMsg drop);
  // Earliest deadline first among tasks with one, then FIFO. False (the
  // task dropped) when the node is gone.
  bool PushPromotion(uint32_t index, PromotionTaskMsg task);
  // Waits up to `wait_ms` for tasks of `node_id`, then takes at most
  // `max_offload` offload and `max_promotion` promotion tasks (none for a
  // node that pulls its promotions).
  // `room_stated`: the beat said how much room its promotion queue has
  // (max_promotion, 0 when full). Then the room a later TakePromotions left
  // open also counts while the beat is held: promotions queued meanwhile are
  // handed over up to it, rather than when the poll ends.
  // A held poll belongs to the registration it found: once that node is
  // removed it returns empty, even if a new process has registered the name
  // again (a dead process's poll takes nothing of its successor's).
  void TakeTasks(const std::string& node_id, int64_t wait_ms,
                 size_t max_offload, size_t max_promotion, NodeTasks* out,
                 bool room_stated = false);
  // A pull's take: at most `max` queued promotions, no waiting. The part of
  // `max` it could not fill stays open for the node's held beat, if that
  // stated its room (above). False if the node is unknown.
  bool TakePromotions(const std::string& node_id, size_t max,
                      std::vector<PromotionTaskMsg>* out);
  size_t offload_queued() const;
  // TakeTasks calls waiting for work now (tests order a pull after a beat).
  size_t held_polls() const;
  // Housekeeping ticks that found the master had not run for longer than
  // the liveness step (a pause it survived without dropping nodes).
  uint64_t pauses_survived() const { return liveness_.pauses(); }
  // Wakes every waiting poll (shutdown).
  void WakeAll();

 private:
  struct Entry {
    std::shared_ptr<const NodeInfo> info;
    int64_t last_seen_ms = 0;        // on liveness_
    bool unreachable = false;        // reported by a client since the last beat
    int64_t offload_backoff_ms = 0;  // 0: offloads flow
    int64_t offload_retry_at_ms = 0;
    std::deque<OffloadTaskMsg> offloads;
    std::deque<DiskDropMsg> drops;
    DeadlineQueue<PromotionTaskMsg> promotions;
    // Room in the node's promotion queue that its last pull could not fill
    // (TakeTasks' room_stated); reset by each beat, which states its own.
    size_t open_room = 0;
    // Directory events with seq > dram_acked, oldest first; those up to
    // dram_sent have been handed over.
    std::deque<DramEventMsg> dram_events;
    uint64_t dram_next_seq = 1;
    uint64_t dram_acked = 0;
    uint64_t dram_sent = 0;
    struct HeldFree {
      uint64_t seq;
      DueFree free;
    };
    std::deque<HeldFree> dram_frees;
  };
  static constexpr size_t kMaxDramEventsPerTake = 4096;
  // Numbers and queues `ev` for a node that keeps a directory (false if it
  // keeps none or is unknown); with `held`, that range is handed back by
  // AckDram once the event is acknowledged.
  bool AppendDramEvent(uint32_t index, DramEventMsg ev, const Placement* held,
                       int64_t not_before_ms) ABSL_LOCKS_EXCLUDED(mu_);
  // Every (node, seq) of `want` is acknowledged or its node is gone.
  bool DramAckedLocked(const std::vector<std::pair<uint32_t, uint64_t>>& want)
      const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  LivenessClock liveness_;  // its own lock, taken under mu_
  size_t held_polls_ ABSL_GUARDED_BY(mu_) = 0;
  mutable Mutex mu_;
  CondVar cv_;
  std::unordered_map<std::string, uint32_t> by_id_ ABSL_GUARDED_BY(mu_);
  std::unordered_map<uint32_t, Entry> nodes_ ABSL_GUARDED_BY(mu_);
  uint32_t next_index_ ABSL_GUARDED_BY(mu_) = 1;
  size_t offload_queued_ ABSL_GUARDED_BY(mu_) = 0;
  size_t dram_events_queued_ ABSL_GUARDED_BY(mu_) = 0;
  // Entries with `unreachable` set.
  size_t unreachable_ ABSL_GUARDED_BY(mu_) = 0;
  bool waking_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace kvpool

#endif  // KVPOOL_MASTER_NODE_REGISTRY_H_
