// The clock by which the master judges nodes silent: it advances only while
// the master itself runs. Each tick adds the time since the previous one,
// but at most `max_step_ms`: a longer gap means this process was not
// running (SIGSTOP, a VM stall, a debugger), and no node could have been
// heard meanwhile, so that time must not count against them. Thread-safe.
#ifndef KVPOOL_MASTER_LIVENESS_CLOCK_H_
#define KVPOOL_MASTER_LIVENESS_CLOCK_H_

#include <algorithm>
#include <cstdint>

#include "common/clock.h"
#include "common/mutex.h"

namespace kvpool {

class LivenessClock {
 public:
  LivenessClock(const Clock* clock, int64_t max_step_ms)
      : clock_(clock), max_step_ms_(max_step_ms), base_real_(clock->NowMs()) {}

  // The liveness time now (ms; only differences mean anything). Between
  // ticks it follows the real clock up to max_step_ms past the last tick.
  int64_t Now() const ABSL_LOCKS_EXCLUDED(mu_) {
    MutexLock lock(&mu_);
    return base_live_ + Step();
  }
  // Folds the time since the last tick in (capped); returns Now(). Called
  // by the master's housekeeping, which runs far more often than the cap.
  int64_t Tick() ABSL_LOCKS_EXCLUDED(mu_) {
    MutexLock lock(&mu_);
    const int64_t step = Step();
    // Only gaps of a second or more count as pauses (a loaded machine may
    // miss a tick or two; the cap still applies to those).
    if (clock_->NowMs() - base_real_ > std::max<int64_t>(max_step_ms_, 1000))
      ++pauses_;
    base_live_ += step;
    base_real_ = clock_->NowMs();
    return base_live_;
  }
  // Ticks that found a gap of over a second (pauses survived).
  uint64_t pauses() const ABSL_LOCKS_EXCLUDED(mu_) {
    MutexLock lock(&mu_);
    return pauses_;
  }

 private:
  int64_t Step() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return std::clamp<int64_t>(clock_->NowMs() - base_real_, 0, max_step_ms_);
  }

  const Clock* clock_;
  const int64_t max_step_ms_;
  mutable Mutex mu_;
  int64_t base_real_ ABSL_GUARDED_BY(mu_);
  int64_t base_live_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t pauses_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace kvpool

#endif  // KVPOOL_MASTER_LIVENESS_CLOCK_H_
