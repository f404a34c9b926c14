#include <gtest/gtest.h>
#include <time.h>

#include <chrono>
#include <thread>

#include "common/mutex.h"

namespace kvpool {
namespace {

int64_t ThreadCpuNs() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec;
}

class LockHoldTrackerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    mu_.TrackHolds(&tracker_);
    LockHoldTracker::ResetHistogram();
    LockHoldTracker::SetEnabled(true);
  }
  void TearDown() override { LockHoldTracker::SetEnabled(false); }

  LockHoldTracker tracker_;
  Mutex mu_;
};

// A holder that waits off its core (as a preempted one does) holds for a
// long wall time and almost no CPU time: the two measures tell the machine
// from the code.
TEST_F(LockHoldTrackerTest, AHoldOffTheCoreIsLongInWallTimeOnly) {
  {
    MutexLock lock(&mu_);
    std::this_thread::sleep_for(std::chrono::milliseconds(40));
  }
  EXPECT_GE(tracker_.max_hold_ns(), 40'000'000);
  EXPECT_LT(tracker_.max_cpu_hold_ns(), 20'000'000);
}

// Work under the lock counts in both.
TEST_F(LockHoldTrackerTest, WorkUnderTheLockCountsInCpuTime) {
  {
    MutexLock lock(&mu_);
    const int64_t t0 = ThreadCpuNs();
    volatile uint64_t sink = 0;
    while (ThreadCpuNs() - t0 < 30'000'000) sink = sink + 1;
  }
  EXPECT_GE(tracker_.max_cpu_hold_ns(), 30'000'000);
  EXPECT_GE(tracker_.max_hold_ns(), tracker_.max_cpu_hold_ns());
  // One hold in each histogram, in the bucket of 2^24..2^25 ns or above.
  uint64_t wall = 0, cpu = 0;
  for (int b = 25; b < LockHoldTracker::kBuckets; ++b) {
    wall += LockHoldTracker::HoldsInBucket(b);
    cpu += LockHoldTracker::CpuHoldsInBucket(b);
  }
  EXPECT_EQ(wall, 1u);
  EXPECT_EQ(cpu, 1u);
  tracker_.Reset();
  EXPECT_EQ(tracker_.max_cpu_hold_ns(), 0);
  EXPECT_EQ(tracker_.max_hold_ns(), 0);
}

// With the CPU measure off (a phase whose rate is measured), holds are
// recorded in wall time only.
TEST_F(LockHoldTrackerTest, TheCpuMeasureCanBeLeftOff) {
  LockHoldTracker::SetCpuEnabled(false);
  {
    MutexLock lock(&mu_);
    const int64_t t0 = ThreadCpuNs();
    volatile uint64_t sink = 0;
    while (ThreadCpuNs() - t0 < 5'000'000) sink = sink + 1;
  }
  LockHoldTracker::SetCpuEnabled(true);
  EXPECT_GE(tracker_.max_hold_ns(), 5'000'000);
  EXPECT_EQ(tracker_.max_cpu_hold_ns(), 0);
  uint64_t cpu = 0;
  for (int b = 0; b < LockHoldTracker::kBuckets; ++b)
    cpu += LockHoldTracker::CpuHoldsInBucket(b);
  EXPECT_EQ(cpu, 0u);
}

}  // namespace
}  // namespace kvpool
