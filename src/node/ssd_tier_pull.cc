// How promotion tasks reach a holder's queue besides the heartbeat: the
// RFC's pull thread (promotion_pull) and, for the pipelined executor fed by
// the heartbeat, the room pull that refills its queue while a beat that
// stated a full queue is held by the master. Both ask for what the queue
// has room for, so it stays bounded.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>

#include "node/ssd_tier.h"
#include "node/ssd_tier_internal.h"

namespace kvpool {

using ssd_tier_internal::Stub;

size_t SsdTier::PromotionRoom() const {
  return config_.promotion_pull ? 0 : ExecutorRoom();
}

size_t SsdTier::ExecutorQueueTarget() const {
  if (config_.promotion_inflight_bytes == 0) return 0;
  return std::min<size_t>(
      256, 2 * size_t(std::max(1, config_.promotion_workers)) *
               std::max<size_t>(1, config_.promotion_read_batch));
}

size_t SsdTier::RoomWorthAPull() const {
  // Half the target, so that a pull brings a batch's worth of tasks, not
  // one task per freed slot.
  return std::max<size_t>(1, ExecutorQueueTarget() / 2);
}

bool SsdTier::RoomPulls() const {
  return !config_.promotion_pull && ExecutorQueueTarget() > 0;
}

size_t SsdTier::ExecutorRoomLocked() const {
  const size_t want = ExecutorQueueTarget();
  return promotions_.size() < want ? want - promotions_.size() : 0;
}

size_t SsdTier::ExecutorRoom() const {
  MutexLock lock(&mu_);
  return ExecutorRoomLocked();
}

std::optional<uint32_t> SsdTier::HeartbeatPromotionRoom() {
  if (!RoomPulls()) return std::nullopt;  // the knob's count (the RFC's)
  bool master_lacks_pull = false;
  {
    MutexLock lock(&pull_mu_);
    master_lacks_pull = pull_stats_.master_lacks_pull &&
                        clock_->NowMs() < room_pull_retry_at_ms_;
  }
  size_t room = 0;
  {
    MutexLock lock(&mu_);
    // What a room pull in flight asked for is not room any more.
    room = ExecutorRoomLocked();
    room = room > room_pull_ask_ ? room - room_pull_ask_ : 0;
    // An older master hands its queued tasks only with the beat: ask for
    // what there is room for, however little.
    if (master_lacks_pull || room >= RoomWorthAPull())
      return static_cast<uint32_t>(room);
    // Too little room: the beat takes no promotions (a beat answered at once
    // with one task, then the next, spins), and the room pull takes them
    // once the workers have freed half the queue.
    room_pull_armed_ = true;
  }
  cv_.SignalAll();
  return 0;
}

SsdTier::PullResult SsdTier::PullOnce(size_t ask, uint64_t* got) {
  *got = 0;
  rpc::PullPromotionTasksRequest req;
  req.set_node_id(node_id_);
  req.set_max_tasks(static_cast<uint32_t>(ask));
  req.set_known_epoch(master_->known_epoch());
  rpc::PullPromotionTasksResponse resp;
  Status s = master_->Call(&Stub::PullPromotionTasks, req, &resp);
  if (s.ok() && !master_->AcceptEpoch(resp.epoch())) {
    // A replaced leader's tasks (docs/ha.md): never run.
    metrics_.GetCounter("kvpool_node_stale_epoch_replies_total").Inc();
    return PullResult::kFailed;
  }
  if (s.code() == ErrorCode::UNAVAILABLE_IN_CURRENT_STATUS) {
    // An older master (UNIMPLEMENTED): it hands promotions over with the
    // heartbeat only.
    MutexLock lock(&pull_mu_);
    if (!pull_stats_.master_lacks_pull) {
      spdlog::warn(
          "node {}: master has no PullPromotionTasks; promotions stay on "
          "the heartbeat (asking again every {} ms)",
          node_id_, 10 * config_.promotion_pull_interval_ms);
    }
    pull_stats_.master_lacks_pull = true;
    room_pull_retry_at_ms_ =
        clock_->NowMs() + 10 * config_.promotion_pull_interval_ms;
    return PullResult::kMasterLacksPull;
  }
  {
    MutexLock lock(&pull_mu_);
    if (pull_stats_.master_lacks_pull && s.ok()) {
      spdlog::info("node {}: master serves PullPromotionTasks again", node_id_);
      pull_stats_.master_lacks_pull = false;
    }
  }
  if (!s.ok() || resp.error_code() != 0) return PullResult::kFailed;
  const uint64_t n = static_cast<uint64_t>(resp.tasks_size());
  {
    MutexLock lock(&pull_mu_);
    ++pull_stats_.pulls;
    pull_stats_.tasks += n;
    pull_stats_.max_tasks_per_pull =
        std::max(pull_stats_.max_tasks_per_pull, n);
  }
  metrics_.GetCounter("kvpool_node_promotion_pulls_total").Inc();
  if (n > 0) {
    metrics_.GetCounter("kvpool_node_promotion_pulled_tasks_total").Inc(n);
    EnqueuePromotions(resp.tasks());
  }
  *got = n;
  return PullResult::kOk;
}

void SsdTier::CountPullOnRoom() {
  MutexLock lock(&pull_mu_);
  ++pull_stats_.pulls_on_room;
  metrics_.GetCounter("kvpool_node_promotion_pulls_on_room_total").Inc();
}

bool SsdTier::WaitForRoomOrStop(int64_t deadline_ms, bool* on_room) {
  *on_room = false;
  return WaitUntilOrStop(deadline_ms, [&] {
    mu_.AssertHeld();  // WaitUntilOrStop calls it with mu_ held
    return *on_room = ExecutorRoomLocked() >= RoomWorthAPull();
  });
}

void SsdTier::PullLoop() {
  const int64_t interval = config_.promotion_pull_interval_ms;
  int64_t next = clock_->NowMs();
  // The last pull brought all it asked for: the master may have more.
  bool master_has_more = false;
  for (;;) {
    bool on_room = false;
    {
      MutexLock lock(&mu_);
      // A fixed cadence, whatever the pull took: the RFC's 100 ms loop.
      next += interval;
      if (master_has_more && ExecutorQueueTarget() > 0) {
        // The executor pulls again as soon as its workers have taken half
        // its queue, rather than a cadence later: a full queue waiting out
        // the cadence caps it at one queue per interval (1,280 tasks/s at
        // 8 workers x 8 and 100 ms), below a fast disk. The cadence starts
        // again from this pull.
        if (WaitForRoomOrStop(next, &on_room)) return;
        if (on_room) next = clock_->NowMs();
      } else if (WaitUntilOrStop(next)) {
        return;
      }
    }
    if (on_room) CountPullOnRoom();
    // Only a pull that succeeds in full sets it again: a paused, refused or
    // failed pull waits for the cadence, never spins.
    master_has_more = false;
    if (pull_paused_) continue;
    // The executor takes what it has room for, when that is more.
    const size_t ask = std::max(config_.promotion_max_per_pull, ExecutorRoom());
    uint64_t n = 0;
    const PullResult r = PullOnce(ask, &n);
    // An older master ignored our mount flag and keeps handing promotions
    // over with the heartbeat. Ask again now and then, not never: after a
    // roll-forward the new master honours the flag of our next mount, and
    // then only the pull brings promotions.
    if (r == PullResult::kMasterLacksPull) next += 9 * interval;
    // The master had as many as the executor asked for: pull again once
    // there is room (above), so the queue stays bounded; the sequential
    // worker keeps the RFC's fixed cadence.
    master_has_more = r == PullResult::kOk && n > 0 && n >= ask;
  }
}

void SsdTier::RoomPullLoop() {
  for (;;) {
    size_t ask = 0;
    {
      MutexLock lock(&mu_);
      // Armed by a beat that stated too little room (HeartbeatPromotionRoom)
      // or by a pull that got all it asked for: both mean the master may
      // hold tasks this queue will have room for.
      while (!stopping_ &&
             !(room_pull_armed_ && ExecutorRoomLocked() >= RoomWorthAPull()))
        cv_.Wait(&mu_);
      if (stopping_) return;
      room_pull_armed_ = false;
      ask = ExecutorRoomLocked();
      room_pull_ask_ = ask;
    }
    uint64_t n = 0;
    const PullResult r = pull_paused_ ? PullResult::kFailed : PullOnce(ask, &n);
    if (r == PullResult::kOk) CountPullOnRoom();
    {
      MutexLock lock(&mu_);
      room_pull_ask_ = 0;
      // Less than asked: the master keeps the rest of the room open for the
      // held beat (NodeRegistry::TakeTasks), which hands over new tasks as
      // they come. As many as asked: it may have more; pull again on room.
      if (r == PullResult::kOk && n >= ask) room_pull_armed_ = true;
    }
  }
}

PullStats SsdTier::pull_stats() const {
  MutexLock lock(&pull_mu_);
  return pull_stats_;
}

}  // namespace kvpool
