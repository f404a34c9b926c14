#include "storage/verify_pool.h"
#include "common/thread_name.h"

#include <utility>

namespace kvpool::storage {

VerifyPool::VerifyPool(unsigned threads) {
  threads_.reserve(threads);
  for (unsigned i = 0; i < threads; ++i) {
    threads_.emplace_back([this] {
      SetThreadName("kvp-ssd-verify");
      Loop();
    });
  }
}

VerifyPool::~VerifyPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  work_cv_.notify_all();
  for (std::thread& t : threads_) t.join();
  // Without threads nothing ran the queue; the groups' Wait() does, and a
  // group outlives no pool, so the queue is empty here.
}

void VerifyPool::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    work_cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, and nothing left
    Job job = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();
    Execute(std::move(job));
    lock.lock();
  }
}

void VerifyPool::Execute(Job job) {
  job.fn();
  {
    std::lock_guard<std::mutex> lock(mu_);
    --job.group->unfinished_;
  }
  done_cv_.notify_all();
}

void VerifyPool::Group::Run(std::function<void()> job) {
  {
    std::lock_guard<std::mutex> lock(pool_->mu_);
    ++unfinished_;
    pool_->queue_.push_back(Job{this, std::move(job)});
  }
  pool_->work_cv_.notify_one();
}

void VerifyPool::Group::Wait() {
  std::unique_lock<std::mutex> lock(pool_->mu_);
  while (unfinished_ > 0) {
    // Help with this group's own queued jobs first; then wait for the ones a
    // pool thread is running.
    auto it = pool_->queue_.begin();
    while (it != pool_->queue_.end() && it->group != this) ++it;
    if (it == pool_->queue_.end()) {
      pool_->done_cv_.wait(lock);
      continue;
    }
    Job job = std::move(*it);
    pool_->queue_.erase(it);
    lock.unlock();
    pool_->Execute(std::move(job));
    lock.lock();
  }
}

}  // namespace kvpool::storage
