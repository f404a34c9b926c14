// The lowest version a re-registered copy of a key may carry: every removal
// and replacement of a key raises its slot to a version above the value it
// ended, so a node that comes back (after being declared dead, or to a new
// master) cannot bring back a value that was removed or superseded since.
// Keys share slots by hash: a collision can only raise a key's floor, which
// refuses a good copy (a clean miss later), never admits a stale one. Fixed
// memory (8 bytes a slot) however many keys come and go. Thread-safe.
#ifndef KVPOOL_MASTER_VERSION_FLOOR_H_
#define KVPOOL_MASTER_VERSION_FLOOR_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

namespace kvpool {

class VersionFloor {
 public:
  explicit VersionFloor(size_t slots = size_t{1} << 20)
      : mask_(RoundDownPow2(slots) - 1),
        slots_(new std::atomic<uint64_t>[mask_ + 1]) {
    for (size_t i = 0; i <= mask_; ++i) slots_[i].store(0);
  }
  void Raise(size_t key_hash, uint64_t version) {
    auto& s = slots_[Mix(key_hash) & mask_];
    uint64_t cur = s.load(std::memory_order_relaxed);
    while (version > cur &&
           !s.compare_exchange_weak(cur, version, std::memory_order_relaxed)) {
    }
  }
  // A copy of version `v` of the key may be re-registered iff v >= Get().
  uint64_t Get(size_t key_hash) const {
    return slots_[Mix(key_hash) & mask_].load(std::memory_order_relaxed);
  }
  size_t slots() const { return mask_ + 1; }

 private:
  static size_t RoundDownPow2(size_t n) {
    size_t p = 1;
    while (p * 2 <= n) p *= 2;
    return p;
  }
  // The object table's shards use the low bits of a hash built the same
  // way (the key's std::hash, xor the tenant's).
  static size_t Mix(size_t h) {
    return (h ^ (h >> 29)) * 0xBF58476D1CE4E5B9ull >> 7;
  }
  const size_t mask_;
  std::unique_ptr<std::atomic<uint64_t>[]> slots_;
};

}  // namespace kvpool

#endif  // KVPOOL_MASTER_VERSION_FLOOR_H_
