// VerifyPool: threads that check the checksums of values a batch read has
// brought in, so that hashing a batch of large values uses more than the one
// core that reaps the completions. On a fast disk a batch of 32 values of
// 4 MiB arrives faster than one core hashes it (XXH3 on cold memory runs at
// a few GB/s), and the reaper would otherwise hash most of it after the last
// completion.
//
// Work is grouped per caller: a Group collects the jobs of one batch, and
// Wait() runs queued jobs on the calling thread too, so a batch never waits
// for a pool thread that is busy elsewhere, and a pool of zero threads simply
// runs everything on the caller.
#ifndef KVPOOL_STORAGE_VERIFY_POOL_H_
#define KVPOOL_STORAGE_VERIFY_POOL_H_

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace kvpool::storage {

class VerifyPool {
 public:
  explicit VerifyPool(unsigned threads);
  ~VerifyPool();  // finishes queued jobs, then joins
  VerifyPool(const VerifyPool&) = delete;
  VerifyPool& operator=(const VerifyPool&) = delete;

  class Group {
   public:
    explicit Group(VerifyPool* pool) : pool_(pool) {}
    ~Group() { Wait(); }
    Group(const Group&) = delete;
    Group& operator=(const Group&) = delete;
    // Queues `job`; it runs on a pool thread, or in Wait().
    void Run(std::function<void()> job);
    // Returns when every job given to Run has finished.
    void Wait();

   private:
    friend class VerifyPool;
    VerifyPool* pool_;
    size_t unfinished_ = 0;  // guarded by pool_->mu_
  };

  unsigned threads() const { return unsigned(threads_.size()); }

 private:
  struct Job {
    Group* group;
    std::function<void()> fn;
  };
  void Loop();
  // Runs `job` without mu_ held, then marks it finished.
  void Execute(Job job);

  std::mutex mu_;
  std::condition_variable work_cv_;  // a job was queued, or stopping
  std::condition_variable done_cv_;  // a job finished
  std::deque<Job> queue_;
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace kvpool::storage

#endif  // KVPOOL_STORAGE_VERIFY_POOL_H_
