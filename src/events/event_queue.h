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

  // Moves every queued event into *out (which it clears first) and returns
  // how many were dropped since the previous Drain.
  uint64_t Drain(std::vector<TierEvent>* out);

  size_t capacity() const { return capacity_; }
  uint64_t dropped_total() const {
    return dropped_total_.load(std::memory_order_relaxed);
  }

 private:
  const size_t capacity_;
  Mutex mu_;
  std::vector<TierEvent> events_ ABSL_GUARDED_BY(mu_);
  uint64_t dropped_since_drain_ ABSL_GUARDED_BY(mu_) = 0;
  std::atomic<uint64_t> dropped_total_{0};
};

}  // namespace kvpool::events

#endif  // KVPOOL_EVENTS_EVENT_QUEUE_H_
