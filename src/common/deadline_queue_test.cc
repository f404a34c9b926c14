#include "common/deadline_queue.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace kvpool {
namespace {

TEST(DeadlineQueueTest, EarliestDeadlineFirstThenArrivalOrder) {
  DeadlineQueue<std::string> q;
  q.Push("fifo-1", 0);
  q.Push("d30", 30);
  q.Push("d10", 10);
  q.Push("fifo-2", -5);  // negative: no deadline either
  q.Push("d20-a", 20);
  q.Push("d20-b", 20);  // equal deadlines keep arrival order
  EXPECT_EQ(q.size(), 6u);
  EXPECT_EQ(q.Front(), "d10");
  std::vector<std::string> got;
  while (!q.empty()) got.push_back(q.Pop());
  EXPECT_EQ(got, (std::vector<std::string>{"d10", "d20-a", "d20-b", "d30",
                                           "fifo-1", "fifo-2"}));
}

TEST(DeadlineQueueTest, WithoutDeadlinesItIsAFifo) {
  DeadlineQueue<int> q;
  for (int i = 0; i < 5; ++i) q.Push(i, 0);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(q.Pop(), i);
  EXPECT_TRUE(q.empty());
}

}  // namespace
}  // namespace kvpool
