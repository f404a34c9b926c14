// Must compile cleanly under scripts/thread_safety.sh: the same class as
// unguarded_write.cc with its locks taken, including a wait on a CondVar
// and a scope that drops its lock for slow work.
#include <chrono>

#include "common/mutex.h"

namespace kvpool {

class Counter {
 public:
  void Bump() {
    MutexLock l(&mu_);
    ++count_;
    cv_.SignalAll();
  }
  int WaitForOne() {
    MutexLock l(&mu_);
    while (count_ == 0) cv_.Wait(&mu_);
    l.Unlock();
    int slow = 1;  // work done without the lock
    l.Lock();
    return count_ + slow;
  }
  bool WaitBriefly() {
    MutexLock l(&mu_);
    return cv_.WaitFor(&mu_, std::chrono::milliseconds(1)) || count_ > 0;
  }
  int Snapshot() {
    ReaderLock l(&table_mu_);
    return table_size_;
  }
  void Grow() {
    WriterLock l(&table_mu_);
    ++table_size_;
  }

 private:
  Mutex mu_;
  CondVar cv_;
  int count_ ABSL_GUARDED_BY(mu_) = 0;
  SharedMutex table_mu_;
  int table_size_ ABSL_GUARDED_BY(table_mu_) = 0;
};

int Use() {
  Counter c;
  c.Bump();
  c.Grow();
  return c.WaitForOne() + c.Snapshot() + int(c.WaitBriefly());
}

}  // namespace kvpool
