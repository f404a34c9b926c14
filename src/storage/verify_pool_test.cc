#include "storage/verify_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <set>
#include <thread>
#include <vector>

namespace kvpool::storage {
namespace {

TEST(VerifyPoolTest, WaitReturnsAfterEveryJobOfTheGroup) {
  for (unsigned threads : {0u, 1u, 4u}) {
    VerifyPool pool(threads);
    EXPECT_EQ(pool.threads(), threads);
    std::vector<int> out(200, 0);
    {
      VerifyPool::Group g(&pool);
      for (int i = 0; i < 200; ++i) g.Run([&out, i] { out[i] = i + 1; });
      g.Wait();
      for (int i = 0; i < 200; ++i) ASSERT_EQ(out[i], i + 1) << threads;
    }
  }
}

TEST(VerifyPoolTest, ZeroThreadsRunsOnTheWaiter) {
  VerifyPool pool(0);
  VerifyPool::Group g(&pool);
  std::thread::id ran_on;
  g.Run([&] { ran_on = std::this_thread::get_id(); });
  g.Wait();
  EXPECT_EQ(ran_on, std::this_thread::get_id());
}

TEST(VerifyPoolTest, PoolThreadsTakeWorkWhileTheCallerIsBusy) {
  VerifyPool pool(1);
  VerifyPool::Group g(&pool);
  std::atomic<bool> ran{false};
  std::thread::id ran_on;
  g.Run([&] {
    ran_on = std::this_thread::get_id();
    ran = true;
  });
  // The caller does not wait yet: only the pool thread can run the job.
  while (!ran.load()) std::this_thread::yield();
  g.Wait();
  EXPECT_NE(ran_on, std::this_thread::get_id());
}

TEST(VerifyPoolTest, GroupsOfConcurrentCallersAreIndependent) {
  VerifyPool pool(2);
  std::atomic<int> total{0};
  std::vector<std::thread> callers;
  for (int c = 0; c < 4; ++c) {
    callers.emplace_back([&] {
      for (int round = 0; round < 50; ++round) {
        std::atomic<int> mine{0};
        VerifyPool::Group g(&pool);
        for (int i = 0; i < 8; ++i) g.Run([&] { ++mine; });
        g.Wait();
        ASSERT_EQ(mine.load(), 8);
        total += mine.load();
      }
    });
  }
  for (auto& t : callers) t.join();
  EXPECT_EQ(total.load(), 4 * 50 * 8);
}

}  // namespace
}  // namespace kvpool::storage
