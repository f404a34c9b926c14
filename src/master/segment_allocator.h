// Offset allocator for one DRAM segment: hands out [offset, offset+size)
// ranges of a segment the master never touches (the bytes live on a node).
//
// Two-level segregated fit over size classes with bitmaps, so Allocate and
// Free are O(1); neighbours are coalesced on Free, which keeps fragmentation
// low. Metadata lives outside the segment (a node pool indexed by handle).
// Not thread-safe: the caller serialises access (one lock per segment).
#ifndef KVPOOL_MASTER_SEGMENT_ALLOCATOR_H_
#define KVPOOL_MASTER_SEGMENT_ALLOCATOR_H_

#include <cstdint>
#include <optional>
#include <vector>

namespace kvpool {

class SegmentAllocator {
 public:
  struct Allocation {
    uint64_t offset = 0;
    uint64_t size = 0;     // the rounded size actually reserved
    uint32_t handle = 0;   // pass to Free
  };

  // `alignment` must be a power of two; every offset is a multiple of it and
  // every size is rounded up to it.
  explicit SegmentAllocator(uint64_t capacity, uint64_t alignment = 64);

  // nullopt when no free range of `size` exists (or size == 0 or > capacity).
  std::optional<Allocation> Allocate(uint64_t size);
  // Releases an allocation. Freeing an unknown or already-free handle is a
  // no-op that returns false (never corrupts the free lists).
  bool Free(uint32_t handle);

  uint64_t capacity() const { return capacity_; }
  uint64_t used() const { return used_; }
  uint64_t free_bytes() const { return capacity_ - used_; }
  // Size of the largest single range that Allocate could return right now.
  uint64_t LargestFree() const;
  size_t allocation_count() const { return live_; }

 private:
  // ... implementation-defined: node pool, bins, bitmaps ...
  uint64_t capacity_;
  uint64_t alignment_;
  uint64_t used_ = 0;
  size_t live_ = 0;
};

}  // namespace kvpool

#endif  // KVPOOL_MASTER_SEGMENT_ALLOCATOR_H_
