// A test hook for segment population (SegmentPopulator's per-chunk hook):
// holds population once it reaches a byte count, until the test opens it, so
// a test can act while a segment is part populated without sleeping.
#ifndef KVPOOL_TESTS_POPULATION_GATE_H_
#define KVPOOL_TESTS_POPULATION_GATE_H_

#include <cstdint>

#include "common/mutex.h"

namespace kvpool::testing {

class PopulationGate {
 public:
  explicit PopulationGate(uint64_t hold_at) : hold_at_(hold_at) {}
  // The hook: records how far population got, then waits while closed.
  void Arrive(uint64_t done) {
    MutexLock lock(&mu_);
    reached_ = done;
    cv_.SignalAll();
    while (closed_ && done >= hold_at_) cv_.Wait(&mu_);
  }
  // Waits until population stands at the gate.
  void AwaitHeld() {
    MutexLock lock(&mu_);
    while (reached_ < hold_at_) cv_.Wait(&mu_);
  }
  void Open() {
    MutexLock lock(&mu_);
    closed_ = false;
    cv_.SignalAll();
  }

 private:
  const uint64_t hold_at_;
  Mutex mu_;
  CondVar cv_;
  bool closed_ ABSL_GUARDED_BY(mu_) = true;
  uint64_t reached_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace kvpool::testing

#endif  // KVPOOL_TESTS_POPULATION_GATE_H_
