#include "events/event_queue.h"

#include <chrono>
#include <utility>

namespace kvpool::events {

EventQueue::EventQueue(size_t capacity) : capacity_(capacity) {}

bool EventQueue::Push(TierEvent ev) {
  // Outside the lock: a vDSO read, and the pushers do not queue behind it.
  ev.ts_us = std::chrono::duration_cast<std::chrono::microseconds>(
                 std::chrono::system_clock::now().time_since_epoch())
                 .count();
  MutexLock lock(&mu_);
  if (events_.size() >= capacity_) {
    ++dropped_since_drain_;
    dropped_total_.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  events_.push_back(std::move(ev));
  return true;
}

uint64_t EventQueue::Drain(std::vector<TierEvent>* out) {
  out->clear();
  MutexLock lock(&mu_);
  // Swap, not copy: the pushers get the drained vector's capacity back, so
  // after warm-up neither side allocates for the vector.
  events_.swap(*out);
  const uint64_t dropped = dropped_since_drain_;
  dropped_since_drain_ = 0;
  return dropped;
}

}  // namespace kvpool::events
