// An object's replicas, in 32 bytes: room for two inline (a MEMORY and a
// LOCAL_DISK copy, the common case) without absl::InlinedVector's separate
// size word, which made the list 40 bytes.
#ifndef KVPOOL_MASTER_REPLICA_LIST_H_
#define KVPOOL_MASTER_REPLICA_LIST_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <utility>

namespace kvpool {

enum class ReplicaKind : uint8_t { kMemory = 0, kLocalDisk = 1 };
enum class ReplicaStatus : uint8_t { kProcessing = 0, kComplete = 1 };

// 16 bytes: the offset takes 48 bits (a segment is at most 256 TiB,
// SegmentManager::kMaxCapacity) and the kind and status the rest of its
// word, so two replicas fit a 32-byte ReplicaList.
struct Replica {
  Replica() = default;
  Replica(uint64_t offset_in, uint32_t segment_in, uint32_t handle_in,
          ReplicaKind kind_in, ReplicaStatus status_in)
      : offset(offset_in),
        kind(kind_in),
        status(status_in),
        segment(segment_in),
        handle(handle_in) {}

  uint64_t offset : 48 = 0;  // kMemory: offset in the segment
  ReplicaKind kind : 8 = ReplicaKind::kMemory;
  ReplicaStatus status : 8 = ReplicaStatus::kProcessing;
  uint32_t segment = 0;  // kMemory: segment id; kLocalDisk: holder node index
  uint32_t handle = 0;   // kMemory: allocator handle
};
static_assert(sizeof(Replica) == 16);

// A vector of Replica with two inline slots and no size field: a slot in use
// holds a real ReplicaKind (0 or 1); an unused inline slot carries kUnused
// in its kind byte, so the count of an inline list is read off its slots.
// From three replicas on, the list moves to the heap: slot 0's kind is then
// kOnHeap, its offset field the size and its segment field the capacity,
// and slot 1's bytes the heap block's address. It moves back inline when
// erasing leaves two or fewer (and on clear()), so an object does not keep
// a heap block for replicas it no longer has.
//
// Iterators are pointers; like std::vector's, any insert, erase or reserve
// invalidates them. Not thread-safe (it lives in an ObjectMeta, under its
// shard's lock).
class ReplicaList {
 public:
  using value_type = Replica;
  using iterator = Replica*;
  using const_iterator = const Replica*;
  static constexpr size_t kInline = 2;

  ReplicaList() { MarkUnused(0); }
  ReplicaList(const ReplicaList& o) : ReplicaList() {
    Assign(o.begin(), o.end());
  }
  ReplicaList(ReplicaList&& o) noexcept {
    std::memcpy(static_cast<void*>(slots_), o.slots_, sizeof(slots_));
    o.MarkUnused(0);
  }
  ReplicaList& operator=(const ReplicaList& o) {
    if (this != &o) Assign(o.begin(), o.end());
    return *this;
  }
  ReplicaList& operator=(ReplicaList&& o) noexcept {
    if (this != &o) {
      FreeHeap();
      std::memcpy(static_cast<void*>(slots_), o.slots_, sizeof(slots_));
      o.MarkUnused(0);
    }
    return *this;
  }
  ~ReplicaList() { FreeHeap(); }

  size_t size() const {
    if (OnHeap()) return slots_[0].offset;
    if (slots_[0].kind == kUnused) return 0;
    return slots_[1].kind == kUnused ? 1 : 2;
  }
  bool empty() const { return size() == 0; }
  size_t capacity() const { return OnHeap() ? slots_[0].segment : kInline; }
  Replica* data() { return OnHeap() ? HeapPtr() : slots_; }
  const Replica* data() const { return OnHeap() ? HeapPtr() : slots_; }
  iterator begin() { return data(); }
  iterator end() { return data() + size(); }
  const_iterator begin() const { return data(); }
  const_iterator end() const { return data() + size(); }
  Replica& operator[](size_t i) { return data()[i]; }
  const Replica& operator[](size_t i) const { return data()[i]; }
  Replica& front() { return data()[0]; }
  const Replica& front() const { return data()[0]; }
  Replica& back() { return data()[size() - 1]; }
  const Replica& back() const { return data()[size() - 1]; }

  void reserve(size_t n) {
    if (n > capacity()) Grow(n);
  }
  void push_back(const Replica& r) { insert(end(), r); }
  template <typename... Args>
  Replica& emplace_back(Args&&... args) {
    return *insert(end(), Replica(std::forward<Args>(args)...));
  }
  iterator insert(const_iterator pos, const Replica& r) {
    const size_t at = static_cast<size_t>(pos - begin());
    const Replica copy = r;  // `r` may be an element that moves below
    const size_t n = size();
    if (n + 1 > capacity()) Grow(std::max<size_t>(2 * capacity(), 4));
    Replica* d = data();
    std::move_backward(d + at, d + n, d + n + 1);
    d[at] = copy;
    SetSize(n + 1);
    return d + at;
  }
  iterator erase(const_iterator pos) { return erase(pos, pos + 1); }
  iterator erase(const_iterator first, const_iterator last) {
    const size_t from = static_cast<size_t>(first - begin());
    const size_t to = static_cast<size_t>(last - begin());
    const size_t n = size();
    Replica* d = data();
    std::move(d + to, d + n, d + from);
    const size_t left = n - (to - from);
    if (OnHeap() && left <= kInline) {
      Replica* heap = HeapPtr();
      std::copy(heap, heap + left, slots_);
      delete[] heap;
      MarkUnused(left);
    } else {
      SetSize(left);
    }
    return data() + from;
  }
  void clear() {
    FreeHeap();
    MarkUnused(0);
  }

 private:
  // Kind bytes no Replica has (ReplicaKind is 0 or 1).
  static constexpr ReplicaKind kUnused = static_cast<ReplicaKind>(0xFF);
  static constexpr ReplicaKind kOnHeap = static_cast<ReplicaKind>(0xFE);

  bool OnHeap() const { return slots_[0].kind == kOnHeap; }
  Replica* HeapPtr() const {
    Replica* p;
    std::memcpy(&p, &slots_[1], sizeof(p));
    return p;
  }
  // Inline: the slots from `first` on are unused.
  void MarkUnused(size_t first) {
    for (size_t i = first; i < kInline; ++i) {
      slots_[i] = Replica();
      slots_[i].kind = kUnused;
    }
  }
  void SetSize(size_t n) {
    if (OnHeap()) {
      slots_[0].offset = n;
    } else {
      MarkUnused(n);
    }
  }
  // Moves the elements to a heap block of `cap` (> kInline) replicas.
  void Grow(size_t cap) {
    const size_t n = size();
    Replica* block = new Replica[cap];
    std::copy(begin(), end(), block);
    FreeHeap();
    slots_[0] = Replica();
    slots_[0].kind = kOnHeap;
    slots_[0].offset = n;
    slots_[0].segment = static_cast<uint32_t>(cap);
    slots_[1] = Replica();
    std::memcpy(static_cast<void*>(&slots_[1]), &block, sizeof(block));
  }
  void FreeHeap() {
    if (OnHeap()) {
      delete[] HeapPtr();
      slots_[0].kind = kUnused;
    }
  }
  template <typename It>
  void Assign(It first, It last) {
    const size_t n = static_cast<size_t>(last - first);
    clear();
    if (n > kInline) Grow(n);
    std::copy(first, last, data());
    SetSize(n);
  }

  Replica slots_[kInline];
};
static_assert(sizeof(ReplicaList) == 32);

}  // namespace kvpool

#endif  // KVPOOL_MASTER_REPLICA_LIST_H_
