// The router's estimate of when an engine will read a request's blocks, as
// pure arithmetic so it can be tested without a cluster or a clock.
#ifndef KVPOOL_ROUTER_READ_DEADLINE_H_
#define KVPOOL_ROUTER_READ_DEADLINE_H_

#include <cstdint>

namespace kvpool {

// An engine's service rate: the mean time between its completions, counted
// only while requests were waiting (an idle engine's gaps say nothing about
// how fast it drains a queue). Exponentially weighted, so it follows load
// changes within a few dozen completions.
class ServiceInterval {
 public:
  // A completion at `now_ms`; `had_queue`: requests were waiting behind the
  // running ones when it completed.
  void OnComplete(int64_t now_ms, bool had_queue);
  // 0 until a completion with a queue has followed another completion.
  double mean_ms() const { return mean_ms_; }

 private:
  static constexpr double kWeight = 0.1;
  int64_t last_ms_ = -1;
  double mean_ms_ = 0;
};

// ms from now until the engine reads the blocks of a request routed to it
// now, with `in_flight` requests already routed to it (this one not
// counted) of which it runs `max_running` at once (0 = unknown: none waits).
// The request is admitted after the requests queued ahead of it and one
// more completion: floor + slack x that many mean intervals. Returns 0 (no
// deadline) when a queue exists but no interval has been measured.
int64_t EstimateReadDeadlineMs(uint64_t in_flight, int max_running,
                               double mean_interval_ms, int64_t floor_ms,
                               double slack);

// The same from the engine's own count of requests waiting for admission
// (Router::ReportQueue): none waiting, the floor; else the request is
// admitted after those `waiting` and one more completion. 0 (no deadline)
// when no interval has been measured.
int64_t EstimateReadDeadlineFromQueueMs(uint64_t waiting,
                                        double mean_interval_ms,
                                        int64_t floor_ms, double slack);

}  // namespace kvpool

#endif  // KVPOOL_ROUTER_READ_DEADLINE_H_
