// A holder's mailbox of promotion tasks: tasks with a deadline (router
// triggers that carry one) earliest deadline first, then tasks without one
// in arrival order. Not thread-safe (NodeRegistry locks it).
#ifndef KVPOOL_MASTER_PROMOTION_QUEUE_H_
#define KVPOOL_MASTER_PROMOTION_QUEUE_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <utility>

namespace kvpool {

template <typename Task>
class PromotionQueue {
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

#endif  // KVPOOL_MASTER_PROMOTION_QUEUE_H_
