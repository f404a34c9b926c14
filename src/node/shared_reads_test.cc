#include "node/shared_reads.h"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

namespace kvpool {
namespace {

std::vector<uint8_t> Bytes(size_t n, uint8_t fill) {
  return std::vector<uint8_t>(n, fill);
}

TEST(SharedReads, KeepsOnlyWhatAQueuedPromotionWants) {
  SharedReads s(1 << 20);
  auto v = Bytes(4096, 7);
  EXPECT_FALSE(s.Wanted("t", "k"));
  EXPECT_FALSE(s.Offer("t", "k", 1, v));  // nobody waits for it
  s.Want("t", "k");
  EXPECT_TRUE(s.Wanted("t", "k"));
  EXPECT_FALSE(s.Wanted("u", "k"));  // tenants are apart
  EXPECT_TRUE(s.Offer("t", "k", 9, v));
  EXPECT_FALSE(s.Wanted("t", "k"));       // kept once
  EXPECT_FALSE(s.Offer("t", "k", 9, v));  // a second get keeps nothing more
  EXPECT_EQ(s.stats().held_bytes, 4096u);
  SharedReads::Bytes got = s.Take("t", "k");
  ASSERT_NE(got.data, nullptr);
  EXPECT_EQ(got.version, 9u);
  EXPECT_EQ(got.size, 4096u);
  EXPECT_EQ(got.data->data()[4095], 7);
  EXPECT_EQ(s.stats().held_bytes, 0u);
  EXPECT_EQ(s.Take("t", "k").data, nullptr);  // taken once
  s.Unwant("t", "k");
  EXPECT_FALSE(s.Wanted("t", "k"));
}

TEST(SharedReads, TheBudgetBoundsWhatIsHeld) {
  SharedReads s(3 * 4096);
  for (const char* k : {"a", "b", "c", "d"}) s.Want("t", k);
  EXPECT_TRUE(s.Offer("t", "a", 1, Bytes(8192, 1)));
  EXPECT_TRUE(s.Offer("t", "b", 1, Bytes(4096, 2)));
  EXPECT_FALSE(s.Offer("t", "c", 1, Bytes(4096, 3)));  // would exceed
  EXPECT_EQ(s.stats().refused, 1u);
  EXPECT_EQ(s.stats().held_bytes, 3u * 4096);
  // Taking one frees its share of the budget.
  EXPECT_NE(s.Take("t", "a").data, nullptr);
  EXPECT_TRUE(s.Offer("t", "c", 1, Bytes(4096, 3)));
}

TEST(SharedReads, TheLastUnwantDropsWhatNobodyTook) {
  SharedReads s(1 << 20);
  s.Want("t", "k");
  s.Want("t", "k");  // two promotions of the key queued one after the other
  ASSERT_TRUE(s.Offer("t", "k", 1, Bytes(4096, 1)));
  s.Unwant("t", "k");
  EXPECT_EQ(s.stats().held_bytes, 4096u);  // the other may still take it
  s.Unwant("t", "k");
  EXPECT_EQ(s.stats().held_bytes, 0u);
  EXPECT_EQ(s.stats().dropped, 1u);
  EXPECT_EQ(s.Take("t", "k").data, nullptr);
  s.Unwant("t", "k");  // an extra Unwant is harmless
  EXPECT_EQ(s.stats().held_bytes, 0u);
}

TEST(SharedReads, ZeroBudgetIsOff) {
  SharedReads s(0);
  EXPECT_FALSE(s.enabled());
  s.Want("t", "k");
  EXPECT_FALSE(s.Wanted("t", "k"));
  EXPECT_FALSE(s.Offer("t", "k", 1, Bytes(16, 1)));
  EXPECT_EQ(s.Take("t", "k").data, nullptr);
}

TEST(SharedReads, ConcurrentOffersKeepOneCopyWithinTheBudget) {
  SharedReads s(64 * 4096);
  for (int k = 0; k < 32; ++k) s.Want("t", std::to_string(k));
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&s, t] {
      for (int k = 0; k < 32; ++k)
        (void)s.Offer("t", std::to_string(k), 1,
                      Bytes(4096, static_cast<uint8_t>(t)));
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(s.stats().offered, 32u);
  EXPECT_EQ(s.stats().held_bytes, 32u * 4096);
  for (int k = 0; k < 32; ++k) s.Unwant("t", std::to_string(k));
  EXPECT_EQ(s.stats().held_bytes, 0u);
}

}  // namespace
}  // namespace kvpool
