// SpinLock: a lock for critical sections of a few dozen instructions that
// many threads enter often (the KV events queue's append, once per put).
// An uncontended lock and unlock are one atomic exchange and one store,
// where a std::mutex costs two calls into libc. A waiter spins briefly,
// then yields its core, so a holder that was preempted (two cores, many
// threads) gets it back instead of being starved by spinners. Not for
// sections that block, allocate often or run long: use Mutex there.
#ifndef KVPOOL_COMMON_SPIN_LOCK_H_
#define KVPOOL_COMMON_SPIN_LOCK_H_

#include <absl/base/thread_annotations.h>

#include <atomic>
#include <thread>

namespace kvpool {

class ABSL_LOCKABLE SpinLock {
 public:
  SpinLock() = default;
  SpinLock(const SpinLock&) = delete;
  SpinLock& operator=(const SpinLock&) = delete;

  void Lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() {
    if (!locked_.exchange(true, std::memory_order_acquire)) return;
    LockSlow();
  }
  void Unlock() ABSL_UNLOCK_FUNCTION() {
    locked_.store(false, std::memory_order_release);
  }

 private:
  void LockSlow() {
    for (int spins = 0;; ++spins) {
      // Read-only while taken: the line stays shared until it is released.
      while (locked_.load(std::memory_order_relaxed)) {
        if (++spins > 64) {
          std::this_thread::yield();
          spins = 0;
        }
      }
      if (!locked_.exchange(true, std::memory_order_acquire)) return;
    }
  }

  std::atomic<bool> locked_{false};
};

class ABSL_SCOPED_LOCKABLE SpinLockHolder {
 public:
  explicit SpinLockHolder(SpinLock* mu) ABSL_EXCLUSIVE_LOCK_FUNCTION(mu)
      : mu_(mu) {
    mu_->Lock();
  }
  SpinLockHolder(const SpinLockHolder&) = delete;
  SpinLockHolder& operator=(const SpinLockHolder&) = delete;
  ~SpinLockHolder() ABSL_UNLOCK_FUNCTION() { mu_->Unlock(); }

 private:
  SpinLock* const mu_;
};

}  // namespace kvpool

#endif  // KVPOOL_COMMON_SPIN_LOCK_H_
