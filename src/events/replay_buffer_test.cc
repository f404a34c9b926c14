#include "events/replay_buffer.h"

#include <gtest/gtest.h>

namespace kvpool::events {
namespace {

std::shared_ptr<const std::string> P(uint64_t seq) {
  return std::make_shared<const std::string>("b" + std::to_string(seq));
}

std::vector<uint64_t> Seqs(const std::vector<ReplayBuffer::Entry>& v) {
  std::vector<uint64_t> out;
  for (const auto& e : v) out.push_back(e.seq);
  return out;
}

TEST(ReplayBufferTest, KeepsTheLastCapacityBatches) {
  ReplayBuffer r(3);
  for (uint64_t s = 0; s < 5; ++s) r.Add(s, P(s));
  EXPECT_EQ(r.size(), 3u);
  EXPECT_EQ(r.oldest(), 2u);
  EXPECT_EQ(Seqs(r.From(0)), (std::vector<uint64_t>{2, 3, 4}));
  EXPECT_EQ(Seqs(r.From(3)), (std::vector<uint64_t>{3, 4}));
  EXPECT_TRUE(r.From(5).empty());
  EXPECT_EQ(*r.From(4)[0].payload, "b4");
}

TEST(ReplayBufferTest, ASkippedNumberIsNeverAnswered) {
  ReplayBuffer r(10);
  r.Add(0, P(0));
  r.Add(2, P(2));  // 1 was skipped for dropped events
  r.Add(3, P(3));
  EXPECT_EQ(Seqs(r.From(1)), (std::vector<uint64_t>{2, 3}));
}

TEST(ReplayBufferTest, ZeroCapacityKeepsNothing) {
  ReplayBuffer r(0);
  r.Add(0, P(0));
  EXPECT_EQ(r.size(), 0u);
  EXPECT_TRUE(r.From(0).empty());
}

}  // namespace
}  // namespace kvpool::events
