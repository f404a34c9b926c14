// Mutexes that clang's -Wthread-safety can reason about.
//
// libstdc++'s std::mutex and std::lock_guard carry no capability
// attributes, so a member written "guarded by mu_" in a comment cannot be
// checked. These thin wrappers add the attributes (the ABSL_* macros of
// absl/base/thread_annotations.h) and nothing else: Mutex is a std::mutex,
// SharedMutex a std::shared_mutex, CondVar a std::condition_variable, so
// the generated code and the cost of a lock are unchanged.
//
// How to use them (see CONTRIBUTING.md, "Locks"):
//   Mutex mu_;
//   int count_ ABSL_GUARDED_BY(mu_);
//   void Bump() { MutexLock l(&mu_); ++count_; }
//   void BumpLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { ++count_; }
// Wait on a condition with an explicit loop in the function that holds the
// lock, so the analysis sees the guarded reads:
//   MutexLock l(&mu_);
//   while (!stopping_ && queue_.empty()) cv_.Wait(&mu_);
// The build checks them with clang (scripts/thread_safety.sh,
// KVPOOL_THREAD_SAFETY=ON); GCC ignores the attributes.
#ifndef KVPOOL_COMMON_MUTEX_H_
#define KVPOOL_COMMON_MUTEX_H_

#include <absl/base/thread_annotations.h>
#include <time.h>

#include <atomic>
#include <bit>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <shared_mutex>

namespace kvpool {

// The longest time a mutex that opted in (Mutex::TrackHolds) was held: the
// master's object shards, whose worst hold bounds how long any request on
// their keys can wait (bench master-envelope reads it). Off unless
// SetEnabled(true); then each lock and unlock of a tracked mutex reads the
// steady clock and the holder's thread CPU clock. Disabled, or on a mutex
// that did not opt in, a lock costs one pointer test more (and a relaxed
// load when tracked).
//
// Two measures of a hold: wall time, what a waiter waits, which includes
// any time the holder was preempted (on a shared machine, whole time
// slices); and the holder's thread CPU time, the work done under the lock
// (page faults and system calls included), which the scheduler does not
// stretch. A long wall hold with a short CPU hold is the machine, not the
// code.
class LockHoldTracker {
 public:
  static void SetEnabled(bool on) {
    enabled_.store(on, std::memory_order_relaxed);
  }
  static bool enabled() { return enabled_.load(std::memory_order_relaxed); }
  // The CPU-time measure too (while enabled): a system call per lock and
  // unlock (the thread CPU clock has no vDSO), so a phase whose rate is
  // measured (lookups) can leave it off.
  static void SetCpuEnabled(bool on) {
    cpu_enabled_.store(on, std::memory_order_relaxed);
  }

  // Called with the mutex just taken, and about to be released.
  void Acquired() {
    if (!enabled()) return;
    since_ns_ = NowNs();
    since_cpu_ns_ =
        cpu_enabled_.load(std::memory_order_relaxed) ? ThreadCpuNs() : -1;
  }
  void Released() {
    if (since_ns_ == 0) return;
    const int64_t held = NowNs() - since_ns_;
    since_ns_ = 0;
    Record(held, histogram_, &max_ns_);
    if (since_cpu_ns_ >= 0) {
      Record(ThreadCpuNs() - since_cpu_ns_, cpu_histogram_, &max_cpu_ns_);
    }
  }
  int64_t max_hold_ns() const {
    return max_ns_.load(std::memory_order_relaxed);
  }
  int64_t max_cpu_hold_ns() const {
    return max_cpu_ns_.load(std::memory_order_relaxed);
  }
  void Reset() {
    max_ns_.store(0, std::memory_order_relaxed);
    max_cpu_ns_.store(0, std::memory_order_relaxed);
  }
  // Holds of every tracked mutex by length: bucket b counts holds of
  // [2^(b-1), 2^b) ns, of wall time (HoldsInBucket) and of the holder's CPU
  // time (CpuHoldsInBucket). A preempted holder's wall hold includes the
  // time it was not running, so the max alone can be the scheduler's time
  // slice; the distribution shows whether that was one hold or the typical
  // one.
  static constexpr int kBuckets = 65;
  static uint64_t HoldsInBucket(int b) {
    return histogram_[b].load(std::memory_order_relaxed);
  }
  static uint64_t CpuHoldsInBucket(int b) {
    return cpu_histogram_[b].load(std::memory_order_relaxed);
  }
  static void ResetHistogram() {
    for (auto& b : histogram_) b.store(0, std::memory_order_relaxed);
    for (auto& b : cpu_histogram_) b.store(0, std::memory_order_relaxed);
  }

 private:
  static void Record(int64_t held, std::atomic<uint64_t>* histogram,
                     std::atomic<int64_t>* max) {
    if (held < 0) held = 0;
    histogram[std::bit_width(uint64_t(held))].fetch_add(
        1, std::memory_order_relaxed);
    int64_t cur = max->load(std::memory_order_relaxed);
    while (held > cur &&
           !max->compare_exchange_weak(cur, held, std::memory_order_relaxed)) {
    }
  }
  static int64_t NowNs() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }
  static int64_t ThreadCpuNs() {
    timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec;
  }
  static inline std::atomic<bool> enabled_{false};
  static inline std::atomic<bool> cpu_enabled_{true};
  static inline std::atomic<uint64_t> histogram_[kBuckets] = {};
  static inline std::atomic<uint64_t> cpu_histogram_[kBuckets] = {};
  // Written and read only by the holder of the tracked mutex.
  int64_t since_ns_ = 0;
  int64_t since_cpu_ns_ = -1;  // -1: not measured for this hold
  std::atomic<int64_t> max_ns_{0};
  std::atomic<int64_t> max_cpu_ns_{0};
};

class ABSL_LOCKABLE Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void Lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() {
    mu_.lock();
    if (hold_ != nullptr) hold_->Acquired();
  }
  void Unlock() ABSL_UNLOCK_FUNCTION() {
    if (hold_ != nullptr) hold_->Released();
    mu_.unlock();
  }
  bool TryLock() ABSL_EXCLUSIVE_TRYLOCK_FUNCTION(true) {
    if (!mu_.try_lock()) return false;
    if (hold_ != nullptr) hold_->Acquired();
    return true;
  }
  // Reports how long each hold lasted to `tracker` (which must outlive the
  // mutex). Call before the mutex is shared between threads.
  void TrackHolds(LockHoldTracker* tracker) { hold_ = tracker; }
  // Tells the analysis the caller holds the lock where it cannot see it
  // (a callback invoked under the lock); checks nothing at run time.
  void AssertHeld() const ABSL_ASSERT_EXCLUSIVE_LOCK() {}

  // BasicLockable, for std::scoped_lock over several mutexes; prefer
  // MutexLock, which the analysis understands.
  void lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() { Lock(); }
  void unlock() ABSL_UNLOCK_FUNCTION() { Unlock(); }

 private:
  friend class CondVar;
  std::mutex mu_;
  LockHoldTracker* hold_ = nullptr;
};

// Holds a Mutex for its scope. Unlock()/Lock() let a scope drop the lock
// around slow work (I/O, a callback) and take it back.
class ABSL_SCOPED_LOCKABLE MutexLock {
 public:
  explicit MutexLock(Mutex* mu) ABSL_EXCLUSIVE_LOCK_FUNCTION(mu) : mu_(mu) {
    mu_->Lock();
  }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;
  ~MutexLock() ABSL_UNLOCK_FUNCTION() {
    if (held_) mu_->Unlock();
  }
  void Unlock() ABSL_UNLOCK_FUNCTION() {
    mu_->Unlock();
    held_ = false;
  }
  void Lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() {
    mu_->Lock();
    held_ = true;
  }

 private:
  Mutex* const mu_;
  bool held_ = true;
};

// A reader/writer lock: many readers or one writer.
class ABSL_LOCKABLE SharedMutex {
 public:
  SharedMutex() = default;
  SharedMutex(const SharedMutex&) = delete;
  SharedMutex& operator=(const SharedMutex&) = delete;

  void Lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() { mu_.lock(); }
  void Unlock() ABSL_UNLOCK_FUNCTION() { mu_.unlock(); }
  void ReaderLock() ABSL_SHARED_LOCK_FUNCTION() { mu_.lock_shared(); }
  void ReaderUnlock() ABSL_UNLOCK_FUNCTION() { mu_.unlock_shared(); }

 private:
  std::shared_mutex mu_;
};

class ABSL_SCOPED_LOCKABLE WriterLock {
 public:
  explicit WriterLock(SharedMutex* mu) ABSL_EXCLUSIVE_LOCK_FUNCTION(mu)
      : mu_(mu) {
    mu_->Lock();
  }
  WriterLock(const WriterLock&) = delete;
  WriterLock& operator=(const WriterLock&) = delete;
  ~WriterLock() ABSL_UNLOCK_FUNCTION() { mu_->Unlock(); }

 private:
  SharedMutex* const mu_;
};

class ABSL_SCOPED_LOCKABLE ReaderLock {
 public:
  explicit ReaderLock(SharedMutex* mu) ABSL_SHARED_LOCK_FUNCTION(mu) : mu_(mu) {
    mu_->ReaderLock();
  }
  ReaderLock(const ReaderLock&) = delete;
  ReaderLock& operator=(const ReaderLock&) = delete;
  ~ReaderLock() ABSL_UNLOCK_FUNCTION() { mu_->ReaderUnlock(); }

 private:
  SharedMutex* const mu_;
};

// A condition variable bound to a Mutex the caller holds. Every wait may
// wake spuriously: wait in a loop that re-checks the condition.
class CondVar {
 public:
  CondVar() = default;
  CondVar(const CondVar&) = delete;
  CondVar& operator=(const CondVar&) = delete;

  void Wait(Mutex* mu) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    std::unique_lock<std::mutex> lock(mu->mu_, std::adopt_lock);
    Paused(mu);
    cv_.wait(lock);
    Resumed(mu);
    lock.release();
  }
  // False when the time ran out (the lock is held again either way).
  template <class Rep, class Period>
  bool WaitFor(Mutex* mu, std::chrono::duration<Rep, Period> timeout)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    std::unique_lock<std::mutex> lock(mu->mu_, std::adopt_lock);
    Paused(mu);
    bool woken = cv_.wait_for(lock, timeout) == std::cv_status::no_timeout;
    Resumed(mu);
    lock.release();
    return woken;
  }
  template <class ClockT, class Duration>
  bool WaitUntil(Mutex* mu, std::chrono::time_point<ClockT, Duration> deadline)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    std::unique_lock<std::mutex> lock(mu->mu_, std::adopt_lock);
    Paused(mu);
    bool woken = cv_.wait_until(lock, deadline) == std::cv_status::no_timeout;
    Resumed(mu);
    lock.release();
    return woken;
  }
  void Signal() { cv_.notify_one(); }
  void SignalAll() { cv_.notify_all(); }

 private:
  // A wait releases the mutex: that time is not a hold.
  static void Paused(Mutex* mu) {
    if (mu->hold_ != nullptr) mu->hold_->Released();
  }
  static void Resumed(Mutex* mu) {
    if (mu->hold_ != nullptr) mu->hold_->Acquired();
  }
  std::condition_variable cv_;
};

}  // namespace kvpool

#endif  // KVPOOL_COMMON_MUTEX_H_
