#include "events/event_queue.h"

#include <time.h>

#include <utility>

namespace kvpool::events {

EventQueue::EventQueue(size_t capacity) : capacity_(capacity) {}

int64_t EventQueue::CoarseNowUs() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME_COARSE, &ts);
  return int64_t{ts.tv_sec} * 1000000 + ts.tv_nsec / 1000;
}

void EventQueue::DropLocked() {
  ++dropped_since_drain_;
  dropped_total_.fetch_add(1, std::memory_order_relaxed);
}

bool EventQueue::Push(TierEvent&& ev) {
  return Emplace([&ev](TierEvent& slot) { slot = std::move(ev); });
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
