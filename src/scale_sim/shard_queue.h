// One master shard's service threads as a first-come-first-served queue
// with `threads` servers: a call that arrives while every thread is busy
// waits for the first one to free. Calls must be submitted in the order of
// their arrival times, which is what makes the queue exact without an event
// heap: the next free thread is the earliest-finishing one. Not
// thread-safe (one simulation run owns it).
#ifndef KVPOOL_SCALE_SIM_SHARD_QUEUE_H_
#define KVPOOL_SCALE_SIM_SHARD_QUEUE_H_

#include <queue>
#include <vector>

namespace kvpool::scale_sim {

class ShardQueue {
 public:
  explicit ShardQueue(int threads);

  struct Served {
    double arrival_us = 0;
    double start_us = 0;
    double done_us = 0;
    double wait_us() const { return start_us - arrival_us; }
  };
  // Serves a call that arrives at `arrival_us` (not before the previous
  // call's arrival) and needs `service_us` of one thread.
  Served Submit(double arrival_us, double service_us);

  // Service time given to calls so far (thread-microseconds).
  double busy_us() const { return busy_us_; }
  int threads() const { return threads_; }

 private:
  int threads_;
  // The times the threads become free, earliest on top.
  std::priority_queue<double, std::vector<double>, std::greater<double>>
      free_at_;
  double last_arrival_us_ = 0;
  double busy_us_ = 0;
};

}  // namespace kvpool::scale_sim

#endif  // KVPOOL_SCALE_SIM_SHARD_QUEUE_H_
