// Two-level segregated fit (TLSF) over offsets.
//
// Free blocks are kept in bins indexed by (first level, second level): the
// first level is the power of two of the size (in alignment units), the
// second splits that power-of-two range into kSlCount equal steps. A bitmap
// per level says which bins are non-empty, so the smallest non-empty bin at
// or above a given one is found with two count-trailing-zeros.
//
// Invariants (checked by the randomized test through the public interface):
//  * the blocks, in next_phys order, tile [0, capacity_) with no gaps;
//  * no two free blocks are physically adjacent (Free always coalesces), so
//    the largest free block is the largest gap between live allocations;
//  * a block is in exactly one bin iff its state is kFree.
#include "master/segment_allocator.h"

#include <bit>
#include <limits>

namespace kvpool {
namespace {

uint64_t NormalizeAlignment(uint64_t alignment) {
  if (alignment == 0) return 1;
  if (std::has_single_bit(alignment)) return alignment;
  // bit_ceil is undefined when the result does not fit.
  constexpr uint64_t kTopBit = uint64_t{1} << 63;
  return alignment > kTopBit ? kTopBit : std::bit_ceil(alignment);
}

}  // namespace

SegmentAllocator::SegmentAllocator(uint64_t capacity, uint64_t alignment)
    : capacity_(0), alignment_(NormalizeAlignment(alignment)) {
  align_shift_ = static_cast<uint32_t>(std::countr_zero(alignment_));
  capacity_ = capacity & ~(alignment_ - 1);
  nodes_.emplace_back();  // the kNil sentinel, never a block
  if (capacity_ > 0) {
    const uint32_t whole = NewNode();
    nodes_[whole].offset = 0;
    InsertFree(whole);
  }
}

uint64_t SegmentAllocator::BlockSize(uint32_t index) const {
  const Node& n = nodes_[index];
  const uint64_t end =
      n.next_phys == kNil ? capacity_ : nodes_[n.next_phys].offset;
  return end - n.offset;
}

void SegmentAllocator::BinOf(uint64_t units, uint32_t* fl, uint32_t* sl) {
  if (units < kSlCount) {
    // Below kSlCount units a power-of-two range has fewer than kSlCount
    // sizes, so these all share class 0 with one bin per exact size.
    *fl = 0;
    *sl = static_cast<uint32_t>(units);
    return;
  }
  const uint32_t msb = static_cast<uint32_t>(std::bit_width(units)) - 1;
  *fl = msb - kSlLog2 + 1;
  // The kSlLog2 bits below the leading one select the step within the range.
  *sl = static_cast<uint32_t>(units >> (msb - kSlLog2)) - kSlCount;
}

uint32_t SegmentAllocator::FindFreeBlock(uint64_t units) const {
  // Good fit, O(1): round the request up to the next bin boundary, so that
  // every block of the bin we land in (or any later one) is large enough and
  // the head can be taken without looking at its size.
  const uint32_t msb = static_cast<uint32_t>(std::bit_width(units)) - 1;
  const uint64_t round_up =
      msb > kSlLog2 ? (uint64_t{1} << (msb - kSlLog2)) - 1 : 0;
  // Only reachable with alignment 1 and a capacity near 2^64: the rounded
  // size would overflow, and no larger bin can exist anyway.
  if (units <= std::numeric_limits<uint64_t>::max() - round_up) {
    uint32_t fl;
    uint32_t sl;
    BinOf(units + round_up, &fl, &sl);
    uint32_t sl_map = sl_bitmap_[fl] & (~0u << sl);
    if (sl_map == 0) {
      // fl + 1 <= kFlCount < 64, so the shift is defined.
      const uint64_t fl_map = fl_bitmap_ & (~uint64_t{0} << (fl + 1));
      if (fl_map != 0) {
        fl = static_cast<uint32_t>(std::countr_zero(fl_map));
        sl_map = sl_bitmap_[fl];
      }
    }
    if (sl_map != 0) {
      return bins_[fl][std::countr_zero(sl_map)];
    }
  }
  // Fallback: the rounding skipped the request's own bin, which may still
  // hold a block that fits (e.g. a request for the whole free segment). We
  // only get here when every bin above the request's own is empty, i.e. the
  // segment is nearly full or the request is about as large as the largest
  // free block, and we scan just this one bin. That keeps the promise that
  // Allocate(n) succeeds whenever LargestFree() >= n, at a cost the common
  // path never pays.
  uint32_t fl;
  uint32_t sl;
  BinOf(units, &fl, &sl);
  const uint64_t bytes = units << align_shift_;
  for (uint32_t i = bins_[fl][sl]; i != kNil; i = nodes_[i].next_free) {
    if (BlockSize(i) >= bytes) return i;
  }
  return kNil;
}

// The bin is derived from the block's current size, so InsertFree/RemoveFree
// must be called while next_phys still describes the size the block was (or
// is to be) binned under.
void SegmentAllocator::InsertFree(uint32_t index) {
  uint32_t fl;
  uint32_t sl;
  BinOf(BlockSize(index) >> align_shift_, &fl, &sl);
  Node& n = nodes_[index];
  n.set_state(State::kFree);
  n.prev_free = kNil;
  n.next_free = bins_[fl][sl];
  if (n.next_free != kNil) nodes_[n.next_free].prev_free = index;
  bins_[fl][sl] = index;
  sl_bitmap_[fl] |= 1u << sl;
  fl_bitmap_ |= uint64_t{1} << fl;
}

void SegmentAllocator::RemoveFree(uint32_t index) {
  uint32_t fl;
  uint32_t sl;
  BinOf(BlockSize(index) >> align_shift_, &fl, &sl);
  Node& n = nodes_[index];
  if (n.prev_free != kNil) {
    nodes_[n.prev_free].next_free = n.next_free;
  } else {
    bins_[fl][sl] = n.next_free;
  }
  if (n.next_free != kNil) nodes_[n.next_free].prev_free = n.prev_free;
  n.prev_free = kNil;
  n.next_free = kNil;
  if (bins_[fl][sl] == kNil) {
    sl_bitmap_[fl] &= ~(1u << sl);
    if (sl_bitmap_[fl] == 0) fl_bitmap_ &= ~(uint64_t{1} << fl);
  }
}

uint32_t SegmentAllocator::NewNode() {
  if (unused_head_ != kNil) {
    const uint32_t index = unused_head_;
    unused_head_ = nodes_[index].next_free;
    nodes_[index].next_free = kNil;
    // The generation is kept: it must keep counting across reuse so that
    // handles from the slot's earlier lives stay invalid.
    return index;
  }
  if (nodes_.size() > kIndexMask) return kNil;
  nodes_.emplace_back();
  return static_cast<uint32_t>(nodes_.size() - 1);
}

void SegmentAllocator::ReleaseNode(uint32_t index) {
  Node& n = nodes_[index];
  n.set_state(State::kUnused);
  n.prev_phys = kNil;
  n.next_phys = kNil;
  n.prev_free = kNil;
  n.next_free = unused_head_;
  unused_head_ = index;
}

SegmentAllocator::Allocation SegmentAllocator::MarkAllocated(uint32_t index,
                                                             uint64_t bytes) {
  Node& n = nodes_[index];
  n.set_state(State::kAllocated);
  used_ += bytes;
  ++live_;
  return Allocation{
      .offset = n.offset,
      .size = bytes,
      .handle = (uint32_t{n.generation} << kIndexBits) | index,
  };
}

std::optional<SegmentAllocator::Allocation> SegmentAllocator::Allocate(
    uint64_t size) {
  // size <= capacity_ (a multiple of the alignment) also guarantees that the
  // round-up below cannot overflow.
  if (size == 0 || size > capacity_) return std::nullopt;
  const uint64_t bytes = (size + alignment_ - 1) & ~(alignment_ - 1);

  const uint32_t index = FindFreeBlock(bytes >> align_shift_);
  if (index == kNil) return std::nullopt;

  // Get the node for the remainder before changing anything, so running out
  // of node slots leaves the allocator untouched.
  uint32_t rest = kNil;
  if (BlockSize(index) > bytes) {
    rest = NewNode();
    if (rest == kNil) return std::nullopt;
  }

  RemoveFree(index);
  if (rest != kNil) {
    // Split: [offset, offset + bytes) stays in `index`, the tail becomes a
    // new free block. Its right neighbour is allocated (or the end), since
    // `index` was free and free blocks are never adjacent: nothing to merge.
    Node& r = nodes_[rest];
    r.offset = nodes_[index].offset + bytes;
    r.prev_phys = index;
    r.next_phys = nodes_[index].next_phys;
    if (r.next_phys != kNil) nodes_[r.next_phys].prev_phys = rest;
    nodes_[index].next_phys = rest;
    InsertFree(rest);
  }

  return MarkAllocated(index, bytes);
}

std::optional<SegmentAllocator::Allocation> SegmentAllocator::AllocateAt(
    uint64_t offset, uint64_t size) {
  if (size == 0 || size > capacity_ || (offset & (alignment_ - 1)) != 0 ||
      offset > capacity_ - ((size + alignment_ - 1) & ~(alignment_ - 1))) {
    return std::nullopt;
  }
  const uint64_t bytes = (size + alignment_ - 1) & ~(alignment_ - 1);
  auto contains = [&](uint32_t i) {
    return i != kNil && i < nodes_.size() &&
           nodes_[i].state() != State::kUnused && nodes_[i].offset <= offset &&
           offset < nodes_[i].offset + BlockSize(i);
  };
  uint32_t index = contains(at_hint_) ? at_hint_ : kNil;
  if (index == kNil) {
    // Slot 1 is the block at offset 0 for the allocator's whole life: a
    // merge always keeps the lower block and a split the lower part.
    for (uint32_t i = capacity_ > 0 ? 1 : kNil; i != kNil;
         i = nodes_[i].next_phys) {
      if (contains(i)) {
        index = i;
        break;
      }
    }
  }
  if (index == kNil || nodes_[index].state() != State::kFree)
    return std::nullopt;
  const uint64_t start = nodes_[index].offset;
  const uint64_t end = start + BlockSize(index);
  if (offset + bytes > end) return std::nullopt;

  // Both node slots first, so running out of them changes nothing.
  uint32_t mid = kNil;
  uint32_t tail = kNil;
  if (offset > start && (mid = NewNode()) == kNil) return std::nullopt;
  if (offset + bytes < end && (tail = NewNode()) == kNil) {
    if (mid != kNil) ReleaseNode(mid);
    return std::nullopt;
  }
  RemoveFree(index);
  uint32_t taken = index;
  if (mid != kNil) {
    // [start, offset) stays free in `index`; `mid` is the allocation.
    Node& m = nodes_[mid];
    m.offset = offset;
    m.prev_phys = index;
    m.next_phys = nodes_[index].next_phys;
    if (m.next_phys != kNil) nodes_[m.next_phys].prev_phys = mid;
    nodes_[index].next_phys = mid;
    taken = mid;
  }
  if (tail != kNil) {
    Node& t = nodes_[tail];
    t.offset = offset + bytes;
    t.prev_phys = taken;
    t.next_phys = nodes_[taken].next_phys;
    if (t.next_phys != kNil) nodes_[t.next_phys].prev_phys = tail;
    nodes_[taken].next_phys = tail;
  }
  // Bins are chosen by size, so the free parts go in once their sizes hold.
  if (mid != kNil) InsertFree(index);
  if (tail != kNil) InsertFree(tail);
  at_hint_ = tail;
  return MarkAllocated(taken, bytes);
}

uint64_t SegmentAllocator::SizeOf(uint32_t handle) const {
  const uint32_t index = handle & kIndexMask;
  if (index == kNil || index >= nodes_.size()) return 0;
  const Node& n = nodes_[index];
  if (n.state() != State::kAllocated || n.generation != (handle >> kIndexBits))
    return 0;
  return BlockSize(index);
}

bool SegmentAllocator::Free(uint32_t handle) {
  const uint32_t index = handle & kIndexMask;
  if (index == kNil || index >= nodes_.size()) return false;
  Node& n = nodes_[index];
  if (n.state() != State::kAllocated ||
      n.generation != (handle >> kIndexBits)) {
    return false;
  }

  used_ -= BlockSize(index);
  --live_;
  n.generation = static_cast<uint8_t>((n.generation + 1) & kGenerationMask);

  // Coalesce with both neighbours. Each neighbour leaves its bin before its
  // size changes (the bin is computed from the size), and the absorbed node
  // goes back to the slot pool: the size is implied by the next offset, so
  // unlinking a node is all a merge takes.
  uint32_t block = index;
  const uint32_t prev = n.prev_phys;
  if (prev != kNil && nodes_[prev].state() == State::kFree) {
    RemoveFree(prev);
    const uint32_t next = nodes_[block].next_phys;
    nodes_[prev].next_phys = next;
    if (next != kNil) nodes_[next].prev_phys = prev;
    ReleaseNode(block);
    block = prev;
  }
  const uint32_t next = nodes_[block].next_phys;
  if (next != kNil && nodes_[next].state() == State::kFree) {
    RemoveFree(next);
    const uint32_t after = nodes_[next].next_phys;
    nodes_[block].next_phys = after;
    if (after != kNil) nodes_[after].prev_phys = block;
    ReleaseNode(next);
  }
  InsertFree(block);
  return true;
}

uint64_t SegmentAllocator::LargestFree() const {
  if (fl_bitmap_ == 0) return 0;
  // The largest block is in the highest non-empty bin; bins above class 1
  // span a range of sizes, so that one bin is scanned for its maximum.
  const int fl = 63 - std::countl_zero(fl_bitmap_);
  const int sl = 31 - std::countl_zero(sl_bitmap_[fl]);
  uint64_t largest = 0;
  for (uint32_t i = bins_[fl][sl]; i != kNil; i = nodes_[i].next_free) {
    const uint64_t size = BlockSize(i);
    if (size > largest) largest = size;
  }
  return largest;
}

}  // namespace kvpool
