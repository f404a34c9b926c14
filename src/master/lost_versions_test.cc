#include "master/lost_versions.h"

#include <gtest/gtest.h>

#include <cstdint>

namespace kvpool {
namespace {

// Spread over the parts as LostKeyHash's final multiplication spreads keys.
uint64_t KeyHash(uint64_t i) { return (i + 1) * 0x9E3779B97F4A7C15ull; }

TEST(LostVersionsTest, KeepsTheNewestLostVersionOfEachKey) {
  LostVersions lost;
  EXPECT_EQ(lost.Get(KeyHash(1)), 0u);
  lost.Record(KeyHash(1), 7);
  lost.Record(KeyHash(1), 5);  // an older loss does not lower it
  lost.Record(KeyHash(2), 9);
  EXPECT_EQ(lost.Get(KeyHash(1)), 7u);
  EXPECT_EQ(lost.Get(KeyHash(2)), 9u);
  EXPECT_EQ(lost.Get(KeyHash(3)), 0u);
  EXPECT_EQ(lost.size(), 2u);
}

TEST(LostVersionsTest, ForgetsTheOldestLossesPastItsBound) {
  LostVersions lost(/*capacity=*/4, /*parts=*/1);
  for (uint64_t i = 0; i < 6; ++i) lost.Record(KeyHash(i), 100 + i);
  EXPECT_EQ(lost.size(), 4u);
  EXPECT_EQ(lost.Get(KeyHash(0)), 0u);
  EXPECT_EQ(lost.Get(KeyHash(1)), 0u);
  for (uint64_t i = 2; i < 6; ++i) EXPECT_EQ(lost.Get(KeyHash(i)), 100 + i);
}

TEST(LostVersionsTest, NoRecordPassesOverMoreThanOnePartsTable) {
  // A node's death records a loss per object under the object's shard
  // lock; at the bound, a table's in-place cleanup passes over all of its
  // slots. With parts, no table holds more than its part's bound.
  constexpr size_t kCapacity = size_t{1} << 16;
  constexpr size_t kParts = 64;
  LostVersions parted(kCapacity, kParts);
  LostVersions whole(kCapacity, /*parts=*/1);
  constexpr uint64_t kLosses = 4 * kCapacity;
  for (uint64_t i = 0; i < kLosses; ++i) {
    parted.Record(KeyHash(i), i + 1);
    whole.Record(KeyHash(i), i + 1);
  }
  EXPECT_EQ(parted.parts(), kParts);
  // Room for the part's bound (1024) at a load of at most 7/8, no more.
  EXPECT_LE(parted.LargestTableSlots(), 4 * kCapacity / kParts);
  // The one table of the whole bound: what a Record could pass over before.
  EXPECT_GE(whole.LargestTableSlots(), kCapacity);
  EXPECT_LE(parted.size(), kCapacity);
  EXPECT_GE(parted.size(), kCapacity - kParts);
  // The newest losses are all still known, the oldest forgotten.
  for (uint64_t i = kLosses - 256; i < kLosses; ++i)
    EXPECT_EQ(parted.Get(KeyHash(i)), i + 1);
  EXPECT_EQ(parted.Get(KeyHash(0)), 0u);
}

TEST(LostVersionsTest, PartsRoundUpToAPowerOfTwo) {
  EXPECT_EQ(LostVersions(1024, 3).parts(), 4u);
  EXPECT_EQ(LostVersions(1024, 0).parts(), 1u);
  EXPECT_EQ(LostVersions().parts(), LostVersions::kDefaultParts);
}

}  // namespace
}  // namespace kvpool
