// EventQueue: the only part of KV events on the master's hot path. Callers
// (under a shard lock) push a TierEvent; the publisher thread takes
// everything queued at once. Bounded: when full, Push drops the event,
// counts it, and the next Drain reports how many were lost since the last
// one, so the publisher can mark the gap on the wire. Push never blocks on
// the publisher, only on other pushers for a vector append.
#ifndef KVPOOL_EVENTS_EVENT_QUEUE_H_
#define KVPOOL_EVENTS_EVENT_QUEUE_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "common/mutex.h"
#include "events/tier_event.h"

namespace kvpool::events {

class EventQueue {
 public:
  explicit EventQueue(size_t capacity);
  EventQueue(const EventQueue&) = delete;
  EventQueue& operator=(const EventQueue&) = delete;

  // Stamps ev.ts_us with the wall clock (the coarse one: millisecond
  // resolution, at most a tick late) and queues it; false (and counted)
  // when the queue holds `capacity` events already.
  bool Push(TierEvent&& ev);
  // The same, with the event built in place by fill(TierEvent&) under the
  // queue's lock (no temporary to move and destroy: the put path's way);
  // fill is not called when the event is dropped.
  template <typename Fill>
  bool Emplace(Fill&& fill) {
    const int64_t ts_us = CoarseNowUs();
    MutexLock lock(&mu_);
    if (events_.size() >= capacity_) {
      DropLocked();
      return false;
    }
    TierEvent& ev = events_.emplace_back();
    fill(ev);
    ev.ts_us = ts_us;
    return true;
  }

  // Moves every queued event into *out (which it clears first) and returns
  // how many were dropped since the previous Drain.
  uint64_t Drain(std::vector<TierEvent>* out);

  size_t capacity() const { return capacity_; }
  uint64_t dropped_total() const {
    return dropped_total_.load(std::memory_order_relaxed);
  }

 private:
  // The coarse wall clock, us (a vDSO read of the last tick, a few ns;
  // resolution 1-4 ms): the hot path pays for no finer timestamp.
  static int64_t CoarseNowUs();
  void DropLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const size_t capacity_;
  Mutex mu_;
  std::vector<TierEvent> events_ ABSL_GUARDED_BY(mu_);
  uint64_t dropped_since_drain_ ABSL_GUARDED_BY(mu_) = 0;
  std::atomic<uint64_t> dropped_total_{0};
};

}  // namespace kvpool::events

#endif  // KVPOOL_EVENTS_EVENT_QUEUE_H_
