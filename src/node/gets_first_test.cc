#include "node/gets_first.h"

#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <thread>

namespace kvpool {
namespace {

// Until the promotion thread has counted its yield, i.e. it found a get
// reading and is (or was) waiting.
void WaitForYields(const GetsFirst& gate, uint64_t n) {
  while (gate.stats().yields < n) std::this_thread::yield();
}

TEST(GetsFirstTest, OffNeverWaitsNorCounts) {
  GetsFirst gate(0);
  GetsFirst::GetReads get(&gate);
  gate.AwaitGets();
  EXPECT_EQ(gate.stats().yields, 0u);
  EXPECT_EQ(gate.stats().gets_reading, 0);
}

TEST(GetsFirstTest, NoGetReadingMeansNoWait) {
  GetsFirst gate(60000);
  gate.AwaitGets();
  { GetsFirst::GetReads get(&gate); }
  gate.AwaitGets();
  EXPECT_EQ(gate.stats().yields, 0u);
}

TEST(GetsFirstTest, APromotionWaitsUntilTheLastGetsReadsEnd) {
  GetsFirst gate(60000);
  auto first = std::make_unique<GetsFirst::GetReads>(&gate);
  auto second = std::make_unique<GetsFirst::GetReads>(&gate);
  EXPECT_EQ(gate.stats().gets_reading, 2);
  std::atomic<bool> went{false};
  std::thread promotion([&] {
    gate.AwaitGets();
    went = true;
  });
  WaitForYields(gate, 1);
  first.reset();
  // One get still reads: the promotion must still be held. It cannot time
  // out (60 s), so `went` can only turn true by the last get ending.
  EXPECT_FALSE(went.load());
  second.reset();
  promotion.join();
  EXPECT_TRUE(went.load());
  const auto s = gate.stats();
  EXPECT_EQ(s.yields, 1u);
  EXPECT_EQ(s.timed_out, 0u);
  EXPECT_EQ(s.gets_reading, 0);
}

TEST(GetsFirstTest, AStreamOfGetsCannotHoldAPromotionPastTheBound) {
  GetsFirst gate(20);
  GetsFirst::GetReads get(&gate);  // never ends while the promotion waits
  const auto start = std::chrono::steady_clock::now();
  gate.AwaitGets();
  const auto waited = std::chrono::steady_clock::now() - start;
  EXPECT_GE(waited, std::chrono::milliseconds(20));
  const auto s = gate.stats();
  EXPECT_EQ(s.yields, 1u);
  EXPECT_EQ(s.timed_out, 1u);
  EXPECT_GE(s.waited_us, 20000u);
}

}  // namespace
}  // namespace kvpool
