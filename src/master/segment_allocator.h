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
#include <memory>
#include <optional>
#include <vector>

namespace kvpool {

class SegmentAllocator {
 public:
  struct Allocation {
    uint64_t offset = 0;
    uint64_t size = 0;    // the rounded size actually reserved
    uint32_t handle = 0;  // pass to Free
  };

  // `alignment` must be a power of two; every offset is a multiple of it and
  // every size is rounded up to it (a non-power-of-two alignment is rounded
  // up to one, 0 becomes 1). capacity() is `capacity` rounded down to the
  // alignment, since a partial tail unit can never be handed out.
  explicit SegmentAllocator(uint64_t capacity, uint64_t alignment = 64);

  // nullopt when no free range of `size` exists (or size == 0 or > capacity).
  std::optional<Allocation> Allocate(uint64_t size);
  // Allocates exactly [offset, offset + size rounded up): nullopt unless the
  // offset is aligned and the whole range is free. For rebuilding a segment's
  // allocations from a directory; O(1) when called in increasing offset
  // order on a segment that is free past the last call, else a walk over the
  // segment's blocks.
  std::optional<Allocation> AllocateAt(uint64_t offset, uint64_t size);
  // Releases an allocation. Freeing an unknown or already-free handle is a
  // no-op that returns false (never corrupts the free lists).
  bool Free(uint32_t handle);

  // Bytes reserved by a live allocation; 0 for an unknown or freed handle.
  uint64_t SizeOf(uint32_t handle) const;
  uint64_t capacity() const { return capacity_; }
  uint64_t used() const { return used_; }
  uint64_t free_bytes() const { return capacity_ - used_; }
  // Size of the largest single range that Allocate could return right now.
  uint64_t LargestFree() const;
  size_t allocation_count() const { return live_; }

 private:
  // Handles are `generation << kIndexBits | index`. The generation (bumped on
  // every Free of a slot) makes a stale handle whose slot has since been
  // reused fail Free instead of releasing someone else's range; the index
  // width bounds the node pool at 2^26 slots (~33M live allocations, 2 GiB
  // of metadata) per segment, far beyond what the master needs; once every
  // slot is in use, an Allocate that would have to split a block fails.
  static constexpr uint32_t kIndexBits = 26;
  static constexpr uint32_t kIndexMask = (1u << kIndexBits) - 1;
  static constexpr uint32_t kGenerationMask = (1u << (32 - kIndexBits)) - 1;
  // Slot 0 is never a block, so 0 doubles as the "no node" link and as a
  // handle that is always invalid (e.g. a default-constructed Allocation).
  static constexpr uint32_t kNil = 0;

  // Second level: each power-of-two size range is split into 16 bins, so a
  // block found by the rounded-up search wastes at most 1/16 of the request.
  static constexpr uint32_t kSlLog2 = 4;
  static constexpr uint32_t kSlCount = 1u << kSlLog2;
  // First level: one class for all sizes below kSlCount units (exact bins),
  // then one per power of two up to 2^63 units.
  static constexpr uint32_t kFlCount = 64 - kSlLog2 + 1;

  enum class State : uint8_t { kUnused, kFree, kAllocated };

  // One physical range of the segment (free or allocated), or an unused slot.
  // The size is not stored: it is the distance to the next physical block
  // (or to the end). The state and generation sit in the links' spare bits
  // (an index takes kIndexBits): 24 bytes a node, and a node per object in
  // the master (bench master-envelope's bytes per object).
  struct Node {
    State state() const { return static_cast<State>(state_bits); }
    void set_state(State s) { state_bits = static_cast<uint8_t>(s); }

    uint64_t offset = 0;
    // Physical neighbours, in offset order.
    uint32_t prev_phys : kIndexBits = kNil;
    uint32_t generation : 32 - kIndexBits = 0;
    uint32_t next_phys : kIndexBits = kNil;
    uint8_t state_bits : 2 = 0;  // a State
    uint32_t prev_free = kNil;   // bin list (free blocks only); next_free also
    uint32_t next_free = kNil;   // links the unused-slot list
  };
  static_assert(sizeof(Node) == 24);

  uint64_t BlockSize(uint32_t index) const;
  // Bin of a block of `units` alignment units (units >= 1).
  static void BinOf(uint64_t units, uint32_t* fl, uint32_t* sl);
  // A free block of at least `units`, or kNil. O(1) except for the fallback
  // scan of the request's own bin (see the .cc).
  uint32_t FindFreeBlock(uint64_t units) const;
  void InsertFree(uint32_t index);
  void RemoveFree(uint32_t index);
  uint32_t NewNode();  // kNil when the pool is at its index limit
  // Marks the (already unbinned) block allocated and returns its handle.
  Allocation MarkAllocated(uint32_t index, uint64_t bytes);
  void ReleaseNode(uint32_t index);

  uint64_t capacity_;
  uint64_t alignment_;
  uint32_t align_shift_;  // log2(alignment_): bytes <-> units
  uint64_t used_ = 0;
  size_t live_ = 0;

  // Node slots in chunks of 1024 (32 KiB) that never move: growing the
  // pool appends a chunk. A vector's doubling copied every node at once
  // (400 MB, most of a second, at 12M allocations in one segment: a put
  // stalled that long) and kept up to half its capacity unused.
  class NodePool {
   public:
    Node& operator[](uint32_t i) {
      return chunks_[i >> kChunkBits][i & kChunkMask];
    }
    const Node& operator[](uint32_t i) const {
      return chunks_[i >> kChunkBits][i & kChunkMask];
    }
    size_t size() const { return size_; }
    void emplace_back() {
      if ((size_ & kChunkMask) == 0)
        chunks_.push_back(std::make_unique<Node[]>(kChunkMask + 1));
      ++size_;
    }

   private:
    static constexpr uint32_t kChunkBits = 10;
    static constexpr uint32_t kChunkMask = (1u << kChunkBits) - 1;
    std::vector<std::unique_ptr<Node[]>> chunks_;
    size_t size_ = 0;
  };
  NodePool nodes_;               // [0] is the kNil sentinel
  uint32_t unused_head_ = kNil;  // recycled slots, linked by next_free
  uint32_t at_hint_ = kNil;      // the free tail AllocateAt left last
  uint64_t fl_bitmap_ = 0;       // bit f: some bin of class f is non-empty
  uint32_t sl_bitmap_[kFlCount] = {};       // bit s: bin (f, s) is non-empty
  uint32_t bins_[kFlCount][kSlCount] = {};  // head of each bin, or kNil
};

}  // namespace kvpool

#endif  // KVPOOL_MASTER_SEGMENT_ALLOCATOR_H_
