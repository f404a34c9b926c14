#include "node/staging_pool.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <set>

namespace kvpool {
namespace {

constexpr uint64_t kSlot = 1 << 20;

TEST(StagingPool, HandsOutDisjointAlignedSlotsUntilFull) {
  StagingPool pool(4 * kSlot, kSlot);
  EXPECT_EQ(pool.capacity(), 4 * kSlot);
  std::set<uint8_t*> got;
  for (int i = 0; i < 4; ++i) {
    uint8_t* p = pool.TryAcquire(kSlot);
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 4096, 0u);  // O_DIRECT
    got.insert(p);
  }
  EXPECT_EQ(got.size(), 4u);
  EXPECT_EQ(pool.TryAcquire(1), nullptr);  // full: the caller reads elsewhere
  EXPECT_EQ(pool.in_use(), 4 * kSlot);
  pool.Release(*got.begin());
  EXPECT_NE(pool.TryAcquire(100), nullptr);
}

TEST(StagingPool, LargerValuesTakeContiguousRuns) {
  StagingPool pool(4 * kSlot, kSlot);
  uint8_t* a = pool.TryAcquire(kSlot);
  uint8_t* b = pool.TryAcquire(2 * kSlot + 1);  // needs three slots
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b, a + kSlot);
  EXPECT_EQ(pool.in_use(), 4 * kSlot);
  pool.Release(a);
  EXPECT_EQ(pool.TryAcquire(2 * kSlot), nullptr);  // one free slot, not two
  pool.Release(b);
  EXPECT_NE(pool.TryAcquire(4 * kSlot), nullptr);  // all four again
  EXPECT_EQ(pool.TryAcquire(5 * kSlot), nullptr);  // never more than it has
}

TEST(StagingPool, EmptyPoolIsOff) {
  StagingPool pool(0, kSlot);
  EXPECT_EQ(pool.capacity(), 0u);
  EXPECT_EQ(pool.TryAcquire(1), nullptr);
  pool.Release(nullptr);  // harmless
}

}  // namespace
}  // namespace kvpool
