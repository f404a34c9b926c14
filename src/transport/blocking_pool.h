// A few threads that run blocking jobs (the data server's SSD read handler)
// in FIFO order, so that disk I/O never occupies an I/O thread. The data
// server queues at most one job per connection (a connection's requests are
// sequential), and a queued job holds only its parsed descriptors: its data
// buffer is allocated when a thread picks it up. Thread-safe.
#ifndef KVPOOL_TRANSPORT_BLOCKING_POOL_H_
#define KVPOOL_TRANSPORT_BLOCKING_POOL_H_

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace kvpool {

class BlockingPool {
 public:
  // Starts max(threads, 1) threads.
  explicit BlockingPool(int threads);
  ~BlockingPool();  // Stop()
  BlockingPool(const BlockingPool&) = delete;
  BlockingPool& operator=(const BlockingPool&) = delete;

  // Queues `job`; after Stop the job (and what it owns) is dropped instead.
  void Submit(std::function<void()> job);
  // Lets running jobs finish, drops queued ones, joins the threads.
  void Stop();

 private:
  void Loop();

  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::deque<std::function<void()>> jobs_;
  std::vector<std::thread> threads_;
};

}  // namespace kvpool

#endif  // KVPOOL_TRANSPORT_BLOCKING_POOL_H_
