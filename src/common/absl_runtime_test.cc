#include "common/absl_runtime.h"

#include <absl/synchronization/mutex.h>
#include <gtest/gtest.h>

namespace kvpool {
namespace {

void LockBothInOrder(absl::Mutex* first, absl::Mutex* second) {
  absl::MutexLock a(first);
  absl::MutexLock b(second);
}

// With detection on (Debian's Abseil: its default), taking two mutexes in
// one order and then in the other is a potential deadlock, and the process
// aborts there. After ConfigureAbslRuntime nothing builds the lock graph.
TEST(AbslRuntimeTest, AnInvertedLockOrderNoLongerAborts) {
  ConfigureAbslRuntime();
  absl::Mutex x, y;
  LockBothInOrder(&x, &y);
  LockBothInOrder(&y, &x);
  SUCCEED();
}

void InvertWithDetectionOn() {
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kAbort);
  absl::Mutex x;
  absl::Mutex y;
  LockBothInOrder(&x, &y);
  LockBothInOrder(&y, &x);
}

// The sequence above is one detection catches: with it on, as Debian's
// Abseil has it by default, the process aborts (in a child: a death test).
TEST(AbslRuntimeDeathTest, TheSameSequenceAbortsWithDetectionOn) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(InvertWithDetectionOn(), "");
}

}  // namespace
}  // namespace kvpool
