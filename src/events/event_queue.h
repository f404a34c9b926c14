// EventQueue: the only part of KV events on the master's hot path. Callers
// (under a shard lock) append an event; the publisher thread takes
// everything queued at once. Bounded: when full, an append drops the event,
// counts it, and the next Drain reports how many were lost since the last
// one, so the publisher can mark the gap on the wire. An append never
// blocks on the publisher, only on other appenders for a copy of a few
// dozen bytes (a spin lock: common/spin_lock.h).
//
// Why a byte log and not a vector of TierEvent: an append copies the
// event's fixed fields and its three strings into one growing buffer (no
// string objects to build per event, nothing to destroy under the lock);
// the drain turns the bytes back into TierEvents on the publisher's thread.
// After warm-up the two buffers (appending, draining) trade places and
// neither side allocates.
#ifndef KVPOOL_EVENTS_EVENT_QUEUE_H_
#define KVPOOL_EVENTS_EVENT_QUEUE_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "common/mutex.h"
#include "common/spin_lock.h"
#include "events/tier_event.h"

namespace kvpool::events {

// A TierEvent's fixed fields: what an append takes besides the strings.
struct TierEventHead {
  TierEventKind kind = TierEventKind::kStored;
  uint8_t media = 0;
  Trigger trigger = Trigger::kNone;
  bool ssd_copy = false;
  uint64_t size = 0;
};

class EventQueue {
 public:
  explicit EventQueue(size_t capacity);
  EventQueue(const EventQueue&) = delete;
  EventQueue& operator=(const EventQueue&) = delete;

  // Queues one event, copying the strings; false (and counted) when the
  // queue holds `capacity` events already.
  bool Append(const TierEventHead& head, std::string_view tenant,
              std::string_view key, std::string_view node);
  // The same for a whole event (its ts_us is ignored).
  bool Push(const TierEvent& ev);

  // Moves every queued event into *out (which it clears first), oldest
  // first, and returns how many were dropped since the previous Drain.
  // Every drained event's ts_us is the wall clock at the drain: the
  // publisher drains about every millisecond, so that is within about a
  // millisecond of the change, and the hot path reads no clock. Safe from
  // several threads (one drains at a time).
  uint64_t Drain(std::vector<TierEvent>* out);

  size_t capacity() const { return capacity_; }
  uint64_t dropped_total() const {
    return dropped_total_.load(std::memory_order_relaxed);
  }

 private:
  // Bytes appended and not yet drained: records of a fixed header and the
  // tenant, key and node bytes.
  struct Log {
    std::unique_ptr<char[]> data;
    size_t used = 0;
    size_t capacity = 0;
    size_t events = 0;
    // Room for `bytes` more; returns where they go.
    char* Reserve(size_t bytes) {
      if (capacity - used < bytes) Grow(bytes);
      return data.get() + used;
    }
    void Grow(size_t bytes);
  };
  static void Decode(const Log& log, int64_t ts_us,
                     std::vector<TierEvent>* out);

  const size_t capacity_;
  Mutex drain_mu_;
  Log draining_ ABSL_GUARDED_BY(drain_mu_);
  // A spin lock: held for a copy of a few dozen bytes per append and a
  // swap per drain (and rarely a growth of the log).
  SpinLock mu_ ABSL_ACQUIRED_AFTER(drain_mu_);
  Log log_ ABSL_GUARDED_BY(mu_);
  uint64_t dropped_since_drain_ ABSL_GUARDED_BY(mu_) = 0;
  std::atomic<uint64_t> dropped_total_{0};
};

}  // namespace kvpool::events

#endif  // KVPOOL_EVENTS_EVENT_QUEUE_H_
