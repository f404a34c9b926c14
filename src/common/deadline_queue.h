// A queue of tasks with optional deadlines: those with one earliest
// deadline first, then those without one in arrival order. The master's
// per-holder promotion mailbox and the holder's own promotion queue. Not
// thread-safe (the owner locks it).
#ifndef KVPOOL_COMMON_DEADLINE_QUEUE_H_
#define KVPOOL_COMMON_DEADLINE_QUEUE_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <utility>

namespace kvpool {

template <typename Task>
class DeadlineQueue {
 public:
  // `deadline_ms` <= 0: no deadline (FIFO among those, after every task
  // that has one). Equal deadlines keep their arrival order.
  void Push(Task task, int64_t deadline_ms) {
    if (deadline_ms > 0) {
      by_deadline_.emplace(deadline_ms, std::move(task));
    } else {
      fifo_.push_back(std::move(task));
    }
  }
  bool empty() const { return by_deadline_.empty() && fifo_.empty(); }
  size_t size() const { return by_deadline_.size() + fifo_.size(); }
  // The task Pop would return. Requires !empty().
  Task& Front() {
    return by_deadline_.empty() ? fifo_.front() : by_deadline_.begin()->second;
  }
  // Requires !empty().
  Task Pop() {
    if (!by_deadline_.empty()) {
      auto it = by_deadline_.begin();
      Task t = std::move(it->second);
      by_deadline_.erase(it);
      return t;
    }
    Task t = std::move(fifo_.front());
    fifo_.pop_front();
    return t;
  }

 private:
  std::multimap<int64_t, Task> by_deadline_;
  std::deque<Task> fifo_;
};

}  // namespace kvpool

#endif  // KVPOOL_COMMON_DEADLINE_QUEUE_H_
