#include "master/segment_allocator.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <map>
#include <random>
#include <vector>

#include <gtest/gtest.h>

namespace kvpool {
namespace {

constexpr uint64_t kKiB = uint64_t{1} << 10;
constexpr uint64_t kMiB = uint64_t{1} << 20;
constexpr uint64_t kGiB = uint64_t{1} << 30;
constexpr uint64_t kTiB = uint64_t{1} << 40;

uint64_t RoundUp(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

TEST(SegmentAllocatorTest, BasicAllocFree) {
  SegmentAllocator alloc(1 * kMiB);
  EXPECT_EQ(alloc.capacity(), 1 * kMiB);
  EXPECT_EQ(alloc.used(), 0u);
  EXPECT_EQ(alloc.free_bytes(), 1 * kMiB);
  EXPECT_EQ(alloc.LargestFree(), 1 * kMiB);
  EXPECT_EQ(alloc.allocation_count(), 0u);

  auto a = alloc.Allocate(1000);
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(a->offset, 0u);
  EXPECT_EQ(a->size, 1024u);  // rounded up to 64
  auto b = alloc.Allocate(64);
  ASSERT_TRUE(b.has_value());
  EXPECT_EQ(b->offset, 1024u);  // carved from the remainder, right after `a`
  EXPECT_NE(a->handle, b->handle);
  EXPECT_EQ(alloc.used(), 1088u);
  EXPECT_EQ(alloc.free_bytes(), 1 * kMiB - 1088);
  EXPECT_EQ(alloc.allocation_count(), 2u);

  EXPECT_TRUE(alloc.Free(a->handle));
  EXPECT_EQ(alloc.used(), 64u);
  EXPECT_EQ(alloc.allocation_count(), 1u);
  EXPECT_TRUE(alloc.Free(b->handle));
  EXPECT_EQ(alloc.used(), 0u);
  EXPECT_EQ(alloc.allocation_count(), 0u);
  EXPECT_EQ(alloc.LargestFree(), 1 * kMiB);
}

TEST(SegmentAllocatorTest, OffsetsAndSizesFollowAlignment) {
  for (uint64_t alignment : {uint64_t{1}, uint64_t{64}, 4 * kKiB, 2 * kMiB}) {
    SCOPED_TRACE(alignment);
    SegmentAllocator alloc(1 * kGiB, alignment);
    std::mt19937 rng(7);
    std::uniform_int_distribution<uint64_t> size(1, 3 * alignment + 100);
    for (int i = 0; i < 20; ++i) {
      const uint64_t want = size(rng);
      auto a = alloc.Allocate(want);
      ASSERT_TRUE(a.has_value());
      EXPECT_EQ(a->offset % alignment, 0u);
      EXPECT_EQ(a->size, RoundUp(want, alignment));
    }
  }
}

TEST(SegmentAllocatorTest, NormalizesAlignmentAndCapacity) {
  // 100 is not a power of two: treated as 128.
  SegmentAllocator odd(10000, 100);
  EXPECT_EQ(odd.capacity(), 9984u);  // 78 * 128: the 16-byte tail is unusable
  auto a = odd.Allocate(1);
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(a->size, 128u);
  auto b = odd.Allocate(1);
  ASSERT_TRUE(b.has_value());
  EXPECT_EQ(b->offset, 128u);

  SegmentAllocator zero(1000, 0);  // alignment 0 means 1
  auto c = zero.Allocate(1000);
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->size, 1000u);

  SegmentAllocator tiny(63);  // smaller than one alignment unit
  EXPECT_EQ(tiny.capacity(), 0u);
  EXPECT_EQ(tiny.LargestFree(), 0u);
  EXPECT_FALSE(tiny.Allocate(1).has_value());
}

TEST(SegmentAllocatorTest, ExhaustExactlyThenFail) {
  constexpr uint64_t kUnits = 1000;
  SegmentAllocator alloc(kUnits * 64);
  for (uint64_t i = 0; i < kUnits; ++i) {
    ASSERT_TRUE(alloc.Allocate(64).has_value()) << i;
  }
  EXPECT_EQ(alloc.used(), alloc.capacity());
  EXPECT_EQ(alloc.free_bytes(), 0u);
  EXPECT_EQ(alloc.LargestFree(), 0u);
  EXPECT_FALSE(alloc.Allocate(1).has_value());
  EXPECT_EQ(alloc.allocation_count(), kUnits);
}

TEST(SegmentAllocatorTest, ExhaustWithMixedSizesThenFail) {
  SegmentAllocator alloc(16 * kMiB);
  std::mt19937 rng(3);
  std::uniform_int_distribution<uint64_t> size(1, 256 * kKiB);
  uint64_t sum = 0;
  for (;;) {
    auto a = alloc.Allocate(size(rng));
    if (!a) break;
    sum += a->size;
  }
  // Whatever is left is only scraps smaller than the requests; take them.
  while (alloc.LargestFree() > 0) {
    auto a = alloc.Allocate(alloc.LargestFree());
    ASSERT_TRUE(a.has_value());
    sum += a->size;
  }
  EXPECT_EQ(sum, alloc.capacity());
  EXPECT_EQ(alloc.free_bytes(), 0u);
  EXPECT_FALSE(alloc.Allocate(64).has_value());
}

TEST(SegmentAllocatorTest, FreeAndCoalesceAllowsFullCapacityAgain) {
  // 1000 units is not on a bin boundary, so a whole-segment request can only
  // be served by the own-bin fallback, not the rounded-up search.
  SegmentAllocator alloc(1000 * 64);
  std::vector<uint32_t> handles;
  while (auto a = alloc.Allocate(64 * 3)) handles.push_back(a->handle);
  ASSERT_FALSE(handles.empty());
  EXPECT_FALSE(alloc.Allocate(alloc.capacity()).has_value());

  std::mt19937 rng(11);
  std::shuffle(handles.begin(), handles.end(), rng);
  for (uint32_t h : handles) ASSERT_TRUE(alloc.Free(h));
  EXPECT_EQ(alloc.used(), 0u);
  EXPECT_EQ(alloc.LargestFree(), alloc.capacity());

  auto all = alloc.Allocate(alloc.capacity());
  ASSERT_TRUE(all.has_value());
  EXPECT_EQ(all->offset, 0u);
  EXPECT_EQ(all->size, alloc.capacity());
  EXPECT_FALSE(alloc.Allocate(1).has_value());
}

TEST(SegmentAllocatorTest, CoalescesWithBothNeighbours) {
  SegmentAllocator alloc(4 * 64);
  auto a = alloc.Allocate(64);
  auto b = alloc.Allocate(64);
  auto c = alloc.Allocate(64);
  auto d = alloc.Allocate(64);
  ASSERT_TRUE(a && b && c && d);
  ASSERT_TRUE(alloc.Free(a->handle));
  ASSERT_TRUE(alloc.Free(c->handle));
  EXPECT_EQ(alloc.LargestFree(), 64u);  // two separate holes
  EXPECT_FALSE(alloc.Allocate(128).has_value());
  ASSERT_TRUE(alloc.Free(b->handle));  // joins a, b and c
  EXPECT_EQ(alloc.LargestFree(), 192u);
  auto abc = alloc.Allocate(192);
  ASSERT_TRUE(abc.has_value());
  EXPECT_EQ(abc->offset, 0u);
}

TEST(SegmentAllocatorTest, DoubleFreeReturnsFalse) {
  SegmentAllocator alloc(1 * kMiB);
  auto a = alloc.Allocate(100);
  auto b = alloc.Allocate(100);
  ASSERT_TRUE(a && b);
  EXPECT_TRUE(alloc.Free(a->handle));
  const uint64_t used = alloc.used();
  const uint64_t largest = alloc.LargestFree();
  EXPECT_FALSE(alloc.Free(a->handle));
  EXPECT_EQ(alloc.used(), used);
  EXPECT_EQ(alloc.LargestFree(), largest);
  EXPECT_EQ(alloc.allocation_count(), 1u);

  // Also once the freed block has been merged away into its neighbour.
  EXPECT_TRUE(alloc.Free(b->handle));
  EXPECT_FALSE(alloc.Free(b->handle));
  EXPECT_FALSE(alloc.Free(a->handle));
  EXPECT_EQ(alloc.used(), 0u);
  EXPECT_EQ(alloc.LargestFree(), alloc.capacity());
}

TEST(SegmentAllocatorTest, InvalidHandlesReturnFalse) {
  SegmentAllocator alloc(1 * kMiB);
  EXPECT_FALSE(alloc.Free(0));  // a default Allocation's handle
  auto a = alloc.Allocate(64);
  ASSERT_TRUE(a.has_value());
  EXPECT_NE(a->handle, 0u);
  EXPECT_FALSE(alloc.Free(12345));
  EXPECT_FALSE(alloc.Free(std::numeric_limits<uint32_t>::max()));
  // The remainder block's slot exists but is free, not allocated.
  EXPECT_FALSE(alloc.Free(a->handle + 1));
  EXPECT_EQ(alloc.allocation_count(), 1u);
  EXPECT_EQ(alloc.used(), 64u);
  EXPECT_TRUE(alloc.Free(a->handle));
}

TEST(SegmentAllocatorTest, StaleHandleDoesNotFreeSlotsNewOwner) {
  SegmentAllocator alloc(1 * kMiB);
  auto a = alloc.Allocate(64);
  ASSERT_TRUE(a.has_value());
  ASSERT_TRUE(alloc.Free(a->handle));
  // The same node slot is handed out again (same offset, same block)...
  auto b = alloc.Allocate(64);
  ASSERT_TRUE(b.has_value());
  EXPECT_EQ(b->offset, a->offset);
  // ...but under a new generation, so the old handle stays dead.
  EXPECT_NE(b->handle, a->handle);
  EXPECT_FALSE(alloc.Free(a->handle));
  EXPECT_EQ(alloc.allocation_count(), 1u);
  EXPECT_TRUE(alloc.Free(b->handle));
}

TEST(SegmentAllocatorTest, ZeroAndOverCapacitySizes) {
  SegmentAllocator alloc(1 * kMiB);
  EXPECT_FALSE(alloc.Allocate(0).has_value());
  EXPECT_FALSE(alloc.Allocate(1 * kMiB + 1).has_value());
  EXPECT_FALSE(
      alloc.Allocate(std::numeric_limits<uint64_t>::max()).has_value());
  EXPECT_EQ(alloc.used(), 0u);
  EXPECT_EQ(alloc.allocation_count(), 0u);
  auto all = alloc.Allocate(1 * kMiB);
  ASSERT_TRUE(all.has_value());
  EXPECT_EQ(all->size, 1 * kMiB);
}

TEST(SegmentAllocatorTest, MultiTebibyteCapacity) {
  const uint64_t capacity = 6 * kTiB + 7 * kGiB;  // not a bin boundary
  SegmentAllocator alloc(capacity);
  EXPECT_EQ(alloc.LargestFree(), capacity);
  std::vector<SegmentAllocator::Allocation> chunks;
  for (int i = 0; i < 5; ++i) {
    auto a = alloc.Allocate(1 * kTiB);
    ASSERT_TRUE(a.has_value());
    EXPECT_EQ(a->offset, i * kTiB);
    chunks.push_back(*a);
  }
  auto rest = alloc.Allocate(alloc.LargestFree());
  ASSERT_TRUE(rest.has_value());
  EXPECT_EQ(rest->offset + rest->size, capacity);
  EXPECT_EQ(alloc.used(), capacity);
  for (const auto& c : chunks) EXPECT_TRUE(alloc.Free(c.handle));
  EXPECT_TRUE(alloc.Free(rest->handle));
  EXPECT_EQ(alloc.LargestFree(), capacity);
}

TEST(SegmentAllocatorTest, CapacityNearTwoToThe64) {
  // Alignment 1 and a capacity whose rounded-up search size would overflow.
  const uint64_t capacity = std::numeric_limits<uint64_t>::max();
  SegmentAllocator alloc(capacity, 1);
  EXPECT_EQ(alloc.capacity(), capacity);
  auto small = alloc.Allocate(1);
  ASSERT_TRUE(small.has_value());
  auto rest = alloc.Allocate(capacity - 1);
  ASSERT_TRUE(rest.has_value());
  EXPECT_EQ(rest->offset, 1u);
  EXPECT_EQ(alloc.free_bytes(), 0u);
  EXPECT_TRUE(alloc.Free(small->handle));
  EXPECT_TRUE(alloc.Free(rest->handle));
  auto all = alloc.Allocate(capacity);
  ASSERT_TRUE(all.has_value());
  EXPECT_EQ(all->size, capacity);
}

// Reference model: the live allocations keyed by offset. Since the allocator
// coalesces completely, its largest free block must equal the largest gap
// between consecutive live allocations (or the ends of the segment).
class Model {
 public:
  struct Live {
    uint64_t size;
    uint32_t handle;
  };

  void Add(const SegmentAllocator::Allocation& a) {
    auto [it, inserted] = live_.emplace(a.offset, Live{a.size, a.handle});
    ASSERT_TRUE(inserted) << "offset handed out twice: " << a.offset;
    if (it != live_.begin()) {
      auto prev = std::prev(it);
      ASSERT_LE(prev->first + prev->second.size, a.offset) << "overlap";
    }
    if (auto next = std::next(it); next != live_.end()) {
      ASSERT_LE(a.offset + a.size, next->first) << "overlap";
    }
    used_ += a.size;
  }

  void Remove(uint64_t offset) {
    auto it = live_.find(offset);
    used_ -= it->second.size;
    live_.erase(it);
  }

  uint64_t LargestGap(uint64_t capacity) const {
    uint64_t largest = 0;
    uint64_t cursor = 0;
    for (const auto& [offset, l] : live_) {
      largest = std::max(largest, offset - cursor);
      cursor = offset + l.size;
    }
    return std::max(largest, capacity - cursor);
  }

  const std::map<uint64_t, Live>& live() const { return live_; }
  uint64_t used() const { return used_; }

 private:
  std::map<uint64_t, Live> live_;
  uint64_t used_ = 0;
};

void CheckAgainstModel(const SegmentAllocator& alloc, const Model& model) {
  ASSERT_EQ(alloc.used(), model.used());
  ASSERT_EQ(alloc.allocation_count(), model.live().size());
  ASSERT_EQ(alloc.free_bytes(), alloc.capacity() - model.used());
  ASSERT_EQ(alloc.LargestFree(), model.LargestGap(alloc.capacity()));
}

TEST(SegmentAllocatorTest, RandomizedStressAgainstModel) {
  for (uint32_t seed : {1u, 2u, 3u, 42u}) {
    SCOPED_TRACE(seed);
    std::mt19937 rng(seed);
    const uint64_t capacity = 64 * kMiB + 64 * 37;  // off any bin boundary
    SegmentAllocator alloc(capacity);
    Model model;
    std::vector<uint64_t> offsets;  // live offsets, for picking one at random

    std::uniform_int_distribution<int> kind(0, 99);
    std::uniform_int_distribution<uint64_t> small(1, 4 * kKiB);
    std::uniform_int_distribution<uint64_t> medium(4 * kKiB, 512 * kKiB);
    std::uniform_int_distribution<uint64_t> large(512 * kKiB, 8 * kMiB);
    for (int step = 0; step < 20000; ++step) {
      // Bias towards allocating while little is live so the segment fills
      // up and both the full and the fragmented regimes are exercised.
      const bool allocate =
          offsets.empty() || kind(rng) < (offsets.size() < 300 ? 60 : 40);
      if (allocate) {
        const int k = kind(rng);
        const uint64_t want = k < 60   ? small(rng)
                              : k < 95 ? medium(rng)
                                       : large(rng);
        const uint64_t largest = alloc.LargestFree();
        auto a = alloc.Allocate(want);
        // Exactly the requests that fit in the largest free block succeed.
        ASSERT_EQ(a.has_value(), RoundUp(want, 64) <= largest) << want;
        if (a) {
          ASSERT_EQ(a->size, RoundUp(want, 64));
          ASSERT_EQ(a->offset % 64, 0u);
          ASSERT_LE(a->offset + a->size, capacity);
          model.Add(*a);
          offsets.push_back(a->offset);
        }
      } else {
        std::uniform_int_distribution<size_t> pick(0, offsets.size() - 1);
        const size_t i = pick(rng);
        const uint64_t offset = offsets[i];
        const uint32_t handle = model.live().at(offset).handle;
        ASSERT_TRUE(alloc.Free(handle));
        ASSERT_FALSE(alloc.Free(handle));  // double free is a no-op
        model.Remove(offset);
        offsets[i] = offsets.back();
        offsets.pop_back();
      }
      if (step % 16 == 0) CheckAgainstModel(alloc, model);
      if (HasFatalFailure()) return;
    }
    CheckAgainstModel(alloc, model);

    for (const auto& [offset, l] : model.live()) {
      ASSERT_TRUE(alloc.Free(l.handle));
    }
    EXPECT_EQ(alloc.used(), 0u);
    EXPECT_EQ(alloc.allocation_count(), 0u);
    EXPECT_EQ(alloc.LargestFree(), capacity);
  }
}

TEST(SegmentAllocatorTest, AllocateAtRebuildsAKnownLayout) {
  SegmentAllocator alloc(1 * kMiB);
  // A directory replayed in offset order, with gaps between the ranges.
  std::vector<SegmentAllocator::Allocation> got;
  for (uint64_t off : {uint64_t{0}, 4 * kKiB, 64 * kKiB, 512 * kKiB}) {
    auto a = alloc.AllocateAt(off, 3000);
    ASSERT_TRUE(a.has_value()) << off;
    EXPECT_EQ(a->offset, off);
    EXPECT_EQ(a->size, RoundUp(3000, 64));
    got.push_back(*a);
  }
  EXPECT_EQ(alloc.used(), 4 * RoundUp(3000, 64));
  // Taken, overlapping, unaligned, or past the end: refused, nothing changes.
  EXPECT_FALSE(alloc.AllocateAt(0, 64).has_value());
  EXPECT_FALSE(alloc.AllocateAt(4 * kKiB - 64, 128).has_value());
  EXPECT_FALSE(alloc.AllocateAt(100 * kKiB + 1, 64).has_value());
  EXPECT_FALSE(alloc.AllocateAt(1 * kMiB - 64, 128).has_value());
  EXPECT_FALSE(alloc.AllocateAt(0, 0).has_value());
  EXPECT_EQ(alloc.allocation_count(), 4u);
  // Out of order (a walk) into a gap, then the gaps serve Allocate.
  auto back = alloc.AllocateAt(8 * kKiB, 64);
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->offset, 8 * kKiB);
  auto any = alloc.Allocate(256 * kKiB);
  ASSERT_TRUE(any.has_value());
  EXPECT_TRUE(any->offset >= 512 * kKiB + RoundUp(3000, 64) ||
              any->offset + any->size <= 512 * kKiB);
  for (const auto& a : got) EXPECT_TRUE(alloc.Free(a.handle));
  EXPECT_TRUE(alloc.Free(back->handle));
  EXPECT_TRUE(alloc.Free(any->handle));
  // Everything coalesces back into one block.
  EXPECT_EQ(alloc.used(), 0u);
  EXPECT_EQ(alloc.LargestFree(), 1 * kMiB);
}

TEST(SegmentAllocatorTest, AllocateAtAgreesWithAModelUnderRandomUse) {
  constexpr uint64_t kCap = 4 * kMiB;
  SegmentAllocator alloc(kCap, 4 * kKiB);
  std::map<uint64_t, std::pair<uint64_t, uint32_t>> live;  // off -> size, h
  std::mt19937_64 rng(11);
  auto overlaps = [&](uint64_t off, uint64_t size) {
    auto it = live.upper_bound(off);
    if (it != live.end() && it->first < off + size) return true;
    if (it != live.begin()) {
      --it;
      if (it->first + it->second.first > off) return true;
    }
    return false;
  };
  for (int step = 0; step < 20000; ++step) {
    const uint64_t size = (rng() % 16 + 1) * 4 * kKiB;
    const int op = static_cast<int>(rng() % 3);
    if (op == 0 && !live.empty()) {
      auto it = live.begin();
      std::advance(it, rng() % live.size());
      ASSERT_TRUE(alloc.Free(it->second.second));
      live.erase(it);
    } else if (op == 1) {
      const uint64_t off = (rng() % (kCap / (4 * kKiB))) * 4 * kKiB;
      const bool fits = off + size <= kCap && !overlaps(off, size);
      auto a = alloc.AllocateAt(off, size);
      ASSERT_EQ(a.has_value(), fits) << off << " " << size;
      if (a) live[off] = {size, a->handle};
    } else if (auto a = alloc.Allocate(size)) {
      ASSERT_FALSE(overlaps(a->offset, a->size));
      live[a->offset] = {a->size, a->handle};
    }
  }
  uint64_t used = 0;
  for (const auto& [off, v] : live) used += v.first;
  EXPECT_EQ(alloc.used(), used);
}

TEST(SegmentAllocatorTest, FreedHolesAreReusable) {
  SegmentAllocator alloc(32 * kMiB);
  std::mt19937 rng(5);
  // Mixed sizes: small, medium and some off-bin-boundary ones.
  const uint64_t kSizes[] = {64,         192,           1 * kKiB,
                             4 * kKiB,   5 * kKiB + 64, 100 * kKiB,
                             129 * kKiB, 1 * kMiB,      1 * kMiB + 4 * kKiB};
  std::uniform_int_distribution<size_t> pick(0, std::size(kSizes) - 1);
  std::vector<SegmentAllocator::Allocation> allocs;
  while (auto a = alloc.Allocate(kSizes[pick(rng)])) allocs.push_back(*a);
  // Fill the tail too, so the freed holes are the only free space.
  while (alloc.LargestFree() > 0) {
    allocs.push_back(*alloc.Allocate(alloc.LargestFree()));
  }
  ASSERT_EQ(alloc.free_bytes(), 0u);
  ASSERT_GT(allocs.size(), 100u);

  // Free every other allocation: each hole is isolated between live ones.
  std::vector<uint64_t> freed_sizes;
  uint64_t freed_bytes = 0;
  for (size_t i = 0; i < allocs.size(); i += 2) {
    ASSERT_TRUE(alloc.Free(allocs[i].handle));
    freed_sizes.push_back(allocs[i].size);
    freed_bytes += allocs[i].size;
  }
  EXPECT_EQ(alloc.free_bytes(), freed_bytes);
  EXPECT_EQ(alloc.LargestFree(),
            *std::max_element(freed_sizes.begin(), freed_sizes.end()));

  // Largest first, every freed size fits again and the holes are filled
  // exactly: a request can only be given a hole at least its size, and the
  // largest remaining hole is always exactly the largest remaining request.
  std::sort(freed_sizes.rbegin(), freed_sizes.rend());
  for (uint64_t size : freed_sizes) {
    auto a = alloc.Allocate(size);
    ASSERT_TRUE(a.has_value()) << size;
    EXPECT_EQ(a->size, size);
  }
  EXPECT_EQ(alloc.free_bytes(), 0u);
  EXPECT_EQ(alloc.LargestFree(), 0u);
}

}  // namespace
}  // namespace kvpool
