#include "transport/segment_table.h"

#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <thread>

namespace kvpool {
namespace {

TEST(SegmentTableTest, ResolveChecksBoundsAndPinsOncePerSegment) {
  uint8_t a[64], b[64];
  SegmentTable t;
  t.Add(1, {a, sizeof(a)});
  t.Add(2, {b, sizeof(b)});
  SegmentTable::Pins pins;
  EXPECT_EQ(t.Resolve(1, 8, 8, &pins), a + 8);
  EXPECT_EQ(t.Resolve(1, 60, 8, &pins), nullptr);  // past the end
  EXPECT_EQ(t.Resolve(1, ~uint64_t{0}, 2, &pins), nullptr);
  EXPECT_EQ(t.Resolve(3, 0, 1, &pins), nullptr);  // unknown
  EXPECT_EQ(t.Resolve(1, 0, 64, &pins), a);
  EXPECT_EQ(t.Resolve(2, 0, 1, &pins), b);
  EXPECT_FALSE(pins.empty());
  pins.Release();
  EXPECT_TRUE(pins.empty());
  // Unpinned lookups are unchanged.
  EXPECT_EQ(t.Resolve(2, 63, 1), b + 63);
  t.Remove(2);
  EXPECT_EQ(t.Resolve(2, 0, 1), nullptr);
}

TEST(SegmentTableTest, RemoveAndWaitReturnsAtOnceWithoutPins) {
  uint8_t a[16];
  SegmentTable t;
  t.Add(1, {a, sizeof(a)});
  {
    SegmentTable::Pins pins;
    ASSERT_NE(t.Resolve(1, 0, 1, &pins), nullptr);
  }  // released by the destructor
  t.RemoveAndWait(1);
  EXPECT_FALSE(t.Find(1).has_value());
  t.RemoveAndWait(7);  // unknown: nothing to wait for
}

// A request that resolved the segment before it was removed holds its
// memory until the request ends: only then does RemoveAndWait return, and
// no new request resolves it meanwhile.
TEST(SegmentTableTest, RemoveAndWaitWaitsForEveryPin) {
  uint8_t a[16], b[16];
  SegmentTable t;
  t.Add(1, {a, sizeof(a)});
  t.Add(2, {b, sizeof(b)});
  SegmentTable::Pins first, second, other;
  ASSERT_NE(t.Resolve(1, 0, 4, &first), nullptr);
  ASSERT_NE(t.Resolve(1, 4, 4, &second), nullptr);
  ASSERT_NE(t.Resolve(2, 0, 4, &other), nullptr);
  auto removed = std::async(std::launch::async, [&] { t.RemoveAndWait(1); });
  // Out of the table at once (no new pin), but still in use.
  while (t.Find(1).has_value()) std::this_thread::yield();
  SegmentTable::Pins late;
  EXPECT_EQ(t.Resolve(1, 0, 1, &late), nullptr);
  EXPECT_TRUE(late.empty());
  EXPECT_EQ(removed.wait_for(std::chrono::milliseconds(50)),
            std::future_status::timeout);
  first.Release();
  EXPECT_EQ(removed.wait_for(std::chrono::milliseconds(50)),
            std::future_status::timeout);
  second.Release();
  removed.get();  // returns now; the other segment's pin never mattered
  EXPECT_TRUE(t.Find(2).has_value());
}

// Pins taken and released from many threads while the segment goes: the
// remover never misses the last release.
TEST(SegmentTableTest, RemoveAndWaitUnderConcurrentPins) {
  uint8_t a[16];
  for (int round = 0; round < 200; ++round) {
    SegmentTable t;
    t.Add(1, {a, sizeof(a)});
    std::atomic<bool> go{false};
    std::vector<std::thread> readers;
    for (int i = 0; i < 4; ++i) {
      readers.emplace_back([&] {
        while (!go.load()) std::this_thread::yield();
        for (int k = 0; k < 50; ++k) {
          SegmentTable::Pins pins;
          if (t.Resolve(1, 0, 16, &pins) == nullptr) break;
        }
      });
    }
    go = true;
    t.RemoveAndWait(1);
    for (auto& r : readers) r.join();
  }
}

}  // namespace
}  // namespace kvpool
