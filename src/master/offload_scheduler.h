// Offload scheduling: which holder copies an object's DRAM replica to its
// SSD, the pin that keeps that replica while the copy runs (an entry in the
// shard's `offloads` table), the count of offloads in flight and its cap,
// the pause of a holder whose SSD is full, the expiry of unanswered tasks,
// and the wait of a put for the room that offload results and applied frees
// bring. MasterService locks the shard and calls it; the tasks travel in
// the holder's mailbox (NodeRegistry), handed out by its heartbeat.
#ifndef KVPOOL_MASTER_OFFLOAD_SCHEDULER_H_
#define KVPOOL_MASTER_OFFLOAD_SCHEDULER_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>

#include "common/clock.h"
#include "common/metrics.h"
#include "common/mutex.h"
#include "master/master_config.h"
#include "master/node_registry.h"
#include "master/object_store.h"
#include "master/segment_manager.h"

namespace kvpool {

class OffloadScheduler {
 public:
  using Shard = ObjectStore::Shard;

  struct Options {
    int64_t offloading_queue_limit = 50000;
    int64_t offload_task_ttl_sec = 600;
    static Options FromConfig(const MasterConfig& c);
  };

  OffloadScheduler(Options options, const Clock* clock,
                   SegmentManager& segments, NodeRegistry& nodes,
                   MetricsRegistry& metrics,
                   std::function<std::string(uint32_t)> tenant_name);

  // Queues an offload of the object's memory replica to an SSD-capable
  // holder; false when none or the queue is full. `holder_paused` is set
  // when a holder was skipped because its SSD refuses writes (full).
  bool Queue(Shard& shard, const ObjectKey& key, const ObjectMeta& m,
             bool* holder_paused = nullptr)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(shard.mu());
  // A holder's answer (ACK or NACK) for `key`: when it answers this
  // holder's task for this version, the pin is released at once and true
  // returned, with the time the task was queued in `*created_ms`.
  bool Answer(Shard& shard, const ObjectKeyView& key, uint32_t node,
              uint64_t version, int64_t* created_ms)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(shard.mu());
  // Drops `key`'s pin, if any (its object goes); true if there was one:
  // the holder may be copying that memory right now.
  bool Cancel(Shard& shard, const ObjectKeyView& key)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(shard.mu());
  // Drops the shard's tasks of a holder that died.
  void DropHolder(Shard& shard, uint32_t node)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(shard.mu());
  // After a batch of answers from `node`: a success lifts its SSD backoff,
  // write failures (its SSD is out of room) extend it; wakes waiting puts.
  void Answered(uint32_t node, uint64_t acks, uint64_t write_failures);
  // Drops the shard's tasks unanswered for offload_task_ttl_sec; returns
  // how many (count them with CountExpired after the pass).
  uint64_t Reap(Shard& shard, int64_t now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(shard.mu());
  void CountExpired(uint64_t n);

  // Puts waiting for room (WaitForRoom) may retry: offload results arrived
  // or nodes applied frees.
  void RoomFreed() { room_cv_.SignalAll(); }
  // Waits until RoomFreed or `until`, whichever comes first (may wake
  // early: the caller re-checks the allocator).
  void WaitForRoom(std::chrono::steady_clock::time_point until);

  int64_t in_flight() const { return in_flight_.load(); }

 private:
  const Options options_;
  const Clock* clock_;
  SegmentManager& segments_;
  NodeRegistry& nodes_;
  MetricsRegistry& metrics_;
  const std::function<std::string(uint32_t)> tenant_name_;
  std::atomic<int64_t> in_flight_{0};
  // Guards no data: WaitForRoom's waiter re-checks the allocator, which has
  // its own lock, and a missed signal costs at most its wait slice.
  Mutex room_mu_;
  CondVar room_cv_;
};

}  // namespace kvpool

#endif  // KVPOOL_MASTER_OFFLOAD_SCHEDULER_H_
