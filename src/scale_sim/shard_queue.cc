#include "scale_sim/shard_queue.h"

#include <algorithm>
#include <cassert>
#include <functional>

namespace kvpool::scale_sim {

ShardQueue::ShardQueue(int threads) : threads_(std::max(1, threads)) {
  for (int i = 0; i < threads_; ++i) free_at_.push(0.0);
}

ShardQueue::Served ShardQueue::Submit(double arrival_us, double service_us) {
  // An out-of-order arrival would be served ahead of calls that came
  // earlier; the simulator sorts, so this is a bug, not an input error.
  assert(arrival_us >= last_arrival_us_);
  last_arrival_us_ = arrival_us;
  Served s;
  s.arrival_us = arrival_us;
  s.start_us = std::max(arrival_us, free_at_.top());
  s.done_us = s.start_us + service_us;
  free_at_.pop();
  free_at_.push(s.done_us);
  busy_us_ += service_us;
  return s;
}

}  // namespace kvpool::scale_sim
