#include "common/per_thread_cache.h"

#include <gtest/gtest.h>

#include <string>
#include <thread>

namespace kvpool {
namespace {

struct TestTag {};
using Cache = PerThreadCache<TestTag, std::string, 4>;

TEST(PerThreadCacheTest, HitsOnlyForTheSameOwnerGenerationAndId) {
  const uint64_t a = NewCacheOwnerSerial(), b = NewCacheOwnerSerial();
  EXPECT_NE(a, 0u);
  EXPECT_NE(a, b);
  EXPECT_EQ(Cache::Find(a, 0, 1), nullptr);  // empty
  Cache::Fill(a, 7, 1, "one");
  ASSERT_NE(Cache::Find(a, 7, 1), nullptr);
  EXPECT_EQ(*Cache::Find(a, 7, 1), "one");
  EXPECT_EQ(Cache::Find(a, 8, 1), nullptr);  // the owner's values changed
  EXPECT_EQ(Cache::Find(b, 7, 1), nullptr);  // another owner
  EXPECT_EQ(Cache::Find(a, 7, 5), nullptr);  // same slot, other id
  Cache::Fill(a, 7, 5, "five");              // takes the slot
  EXPECT_EQ(Cache::Find(a, 7, 1), nullptr);
  EXPECT_EQ(*Cache::Find(a, 7, 5), "five");
}

TEST(PerThreadCacheTest, EachThreadHasItsOwnSlots) {
  const uint64_t a = NewCacheOwnerSerial();
  Cache::Fill(a, 0, 2, "main");
  bool other_saw = true;
  std::thread t([&] { other_saw = Cache::Find(a, 0, 2) != nullptr; });
  t.join();
  EXPECT_FALSE(other_saw);
  EXPECT_NE(Cache::Find(a, 0, 2), nullptr);
}

}  // namespace
}  // namespace kvpool
