#include "transport/blocking_pool.h"

#include <algorithm>
#include <utility>

#include "common/thread_name.h"

namespace kvpool {

BlockingPool::BlockingPool(int threads) {
  for (int i = 0; i < std::max(threads, 1); ++i) {
    threads_.emplace_back([this] {
      SetThreadName("kvp-data-blk");
      Loop();
    });
  }
}

BlockingPool::~BlockingPool() { Stop(); }

void BlockingPool::Submit(std::function<void()> job) {
  {
    std::lock_guard lock(mu_);
    if (stopping_) return;  // the job (and what it owns) is dropped
    jobs_.push_back(std::move(job));
  }
  cv_.notify_one();
}

void BlockingPool::Stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  for (auto& t : threads_) t.join();
  threads_.clear();
  std::deque<std::function<void()>> dropped;
  {
    std::lock_guard lock(mu_);
    dropped.swap(jobs_);
  }
}

void BlockingPool::Loop() {
  for (;;) {
    std::function<void()> job;
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [&] { return stopping_ || !jobs_.empty(); });
      if (stopping_) return;
      job = std::move(jobs_.front());
      jobs_.pop_front();
    }
    job();
  }
}

}  // namespace kvpool
