#include "common/spin_lock.h"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

namespace kvpool {
namespace {

// More threads than this machine's cores, so holders are preempted while
// others wait: the count is exact only if no two increments ever overlap.
TEST(SpinLockTest, ExcludesUnderContention) {
  SpinLock mu;
  uint64_t count = 0;
  constexpr int kThreads = 6, kRounds = 200000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < kRounds; ++i) {
        SpinLockHolder lock(&mu);
        // A read and a later write: a lost update if another thread ran
        // between them.
        const uint64_t seen = count;
        count = seen + 1;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(count, uint64_t{kThreads} * kRounds);
}

}  // namespace
}  // namespace kvpool
