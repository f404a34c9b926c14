#include "master/replica_list.h"

#include <gtest/gtest.h>

#include <utility>
#include <vector>

namespace kvpool {
namespace {

Replica Mem(uint32_t i) {
  return Replica{uint64_t{1000} * i, i, i + 100, ReplicaKind::kMemory,
                 ReplicaStatus::kComplete};
}
Replica Disk(uint32_t node) {
  return Replica{0, node, 0, ReplicaKind::kLocalDisk,
                 ReplicaStatus::kProcessing};
}

// The segments of `l`, in order: what the list holds, element by element.
std::vector<uint32_t> Segments(const ReplicaList& l) {
  std::vector<uint32_t> out;
  for (const Replica& r : l) out.push_back(r.segment);
  return out;
}

TEST(ReplicaListTest, EmptyOneTwoInlineThenHeapAndBack) {
  ReplicaList l;
  EXPECT_TRUE(l.empty());
  EXPECT_EQ(l.size(), 0u);
  EXPECT_EQ(l.begin(), l.end());
  l.push_back(Mem(1));
  EXPECT_EQ(l.size(), 1u);
  EXPECT_EQ(l.capacity(), 2u);
  l.push_back(Disk(2));
  EXPECT_EQ(l.size(), 2u);
  EXPECT_EQ(l.capacity(), 2u);
  EXPECT_EQ(l[1].kind, ReplicaKind::kLocalDisk);
  EXPECT_EQ(l[1].status, ReplicaStatus::kProcessing);
  l.push_back(Mem(3));  // the third moves it to the heap
  EXPECT_EQ(l.size(), 3u);
  EXPECT_GE(l.capacity(), 3u);
  EXPECT_EQ(Segments(l), (std::vector<uint32_t>{1, 2, 3}));
  for (uint32_t i = 4; i <= 9; ++i) l.push_back(Mem(i));
  EXPECT_EQ(l.size(), 9u);
  EXPECT_EQ(l[8].offset, 9000u);
  EXPECT_EQ(l[8].handle, 109u);
  // Erasing down to two brings it back inline, contents kept.
  l.erase(l.begin() + 1, l.end() - 1);
  EXPECT_EQ(Segments(l), (std::vector<uint32_t>{1, 9}));
  EXPECT_EQ(l.capacity(), 2u);
  l.erase(l.begin());
  EXPECT_EQ(Segments(l), (std::vector<uint32_t>{9}));
  l.erase(l.begin());
  EXPECT_TRUE(l.empty());
}

TEST(ReplicaListTest, InsertAtFrontAndMiddle) {
  ReplicaList l;
  l.insert(l.begin(), Mem(2));  // into an empty list
  l.insert(l.begin(), Mem(1));  // both inline
  EXPECT_EQ(Segments(l), (std::vector<uint32_t>{1, 2}));
  l.insert(l.begin() + 1, Disk(7));  // grows while inserting in the middle
  EXPECT_EQ(Segments(l), (std::vector<uint32_t>{1, 7, 2}));
  // An element of the list itself, inserted before its own position.
  l.insert(l.begin(), l[2]);
  EXPECT_EQ(Segments(l), (std::vector<uint32_t>{2, 1, 7, 2}));
  Replica& e = l.emplace_back(uint64_t{5}, 6u, 7u, ReplicaKind::kMemory,
                              ReplicaStatus::kComplete);
  EXPECT_EQ(e.segment, 6u);
  EXPECT_EQ(l.back().segment, 6u);
  EXPECT_EQ(l.front().segment, 2u);
}

TEST(ReplicaListTest, ElementsChangeInPlace) {
  ReplicaList l;
  l.push_back(Disk(1));
  for (Replica& r : l) r.status = ReplicaStatus::kComplete;
  EXPECT_EQ(l[0].status, ReplicaStatus::kComplete);
  EXPECT_EQ(l.size(), 1u);  // a write to a slot leaves the count alone
  l.push_back(Disk(2));
  l.push_back(Disk(3));
  l.data()[2].segment = 30;
  EXPECT_EQ(Segments(l), (std::vector<uint32_t>{1, 2, 30}));
}

TEST(ReplicaListTest, CopyAndMoveInlineAndHeap) {
  for (size_t n : {0, 1, 2, 3, 5}) {
    ReplicaList a;
    for (size_t i = 0; i < n; ++i) a.push_back(Mem(static_cast<uint32_t>(i)));
    ReplicaList b = a;  // deep copy
    EXPECT_EQ(Segments(b), Segments(a)) << n;
    if (n > 0) {
      b[0].segment = 77;
      EXPECT_NE(a[0].segment, 77u) << n;
    }
    ReplicaList c = std::move(b);
    EXPECT_EQ(c.size(), n);
    EXPECT_TRUE(b.empty());  // NOLINT: a moved-from list is empty
    ReplicaList d;
    d.push_back(Disk(1));
    d.push_back(Disk(2));
    d.push_back(Disk(3));
    d = a;  // a heap list takes an inline one's contents, and the reverse
    EXPECT_EQ(Segments(d), Segments(a)) << n;
    d = std::move(c);
    EXPECT_EQ(d.size(), n);
    d = d;  // NOLINT: self-assignment changes nothing
    EXPECT_EQ(d.size(), n);
  }
}

TEST(ReplicaListTest, ClearReserveAndPartitionAsTakeReplicasDoes) {
  ReplicaList l;
  l.reserve(1);
  EXPECT_EQ(l.capacity(), 2u);
  l.reserve(4);  // reserving past two goes to the heap, empty
  EXPECT_EQ(l.capacity(), 4u);
  EXPECT_TRUE(l.empty());
  for (uint32_t i = 0; i < 4; ++i) l.push_back(i % 2 ? Disk(i) : Mem(i));
  auto keep = std::stable_partition(l.begin(), l.end(), [](const Replica& r) {
    return r.kind == ReplicaKind::kMemory;
  });
  l.erase(keep, l.end());
  EXPECT_EQ(Segments(l), (std::vector<uint32_t>{0, 2}));
  l.clear();
  EXPECT_TRUE(l.empty());
  EXPECT_EQ(l.capacity(), 2u);
  l.push_back(Mem(1));
  EXPECT_EQ(l.size(), 1u);
}

}  // namespace
}  // namespace kvpool
