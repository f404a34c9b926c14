// The versions of values the pool lost with a node (declared dead, or
// restarted under its name), so that when copies come back, an older copy
// of a lost value is refused: if a node held a key's newer value and died,
// and another holder (or that node's own SSD) still has an older one, the
// older one must not become the key's value. Exact per key (a 64-bit hash:
// a collision is as likely as a cosmic ray), unlike the version floor's
// shared slots, so a dead node's own copies never refuse each other.
// Bounded: past `capacity` entries the oldest losses are forgotten first
// (the oldest of their part: see below). Thread-safe.
//
// In parts, each a table with its own lock and bound, picked by the key
// hash's top bits. A node's death records a version per object it held,
// each under its object's shard lock, and a table at its bound erases its
// oldest entry per insert, whose tombstones make the table clean itself in
// place now and then: a pass over all its slots. One table of the whole
// bound (8M slots) made that pass 66 ms under a shard lock (bench
// master-envelope at 30M objects); a part's pass is over a 256th of it.
#ifndef KVPOOL_MASTER_LOST_VERSIONS_H_
#define KVPOOL_MASTER_LOST_VERSIONS_H_

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>

#include <absl/container/flat_hash_map.h>

#include "common/mutex.h"

namespace kvpool {

class LostVersions {
 public:
  static constexpr size_t kDefaultParts = 256;
  // `parts` is rounded up to a power of two; each part keeps at most
  // capacity / parts entries (at least one).
  explicit LostVersions(size_t capacity = size_t{1} << 22,
                        size_t parts = kDefaultParts)
      : part_bits_(std::countr_zero(std::bit_ceil(std::max<size_t>(1, parts)))),
        part_capacity_(std::max<size_t>(1, capacity >> part_bits_)),
        parts_(new Part[size_t{1} << part_bits_]) {}

  void Record(uint64_t key_hash, uint64_t version) {
    Part& p = PartOf(key_hash);
    MutexLock lock(&p.mu);
    // Room for the part's whole bound at its first loss: a rehash of a
    // table copies it all under the caller's shard lock. The memory is
    // only touched as entries come.
    if (p.versions.capacity() == 0) p.versions.reserve(part_capacity_);
    auto [it, fresh] = p.versions.try_emplace(key_hash, version);
    if (!fresh) {
      it->second = std::max(it->second, version);
      return;
    }
    p.order.push_back(key_hash);
    while (p.order.size() > part_capacity_) {
      p.versions.erase(p.order.front());
      p.order.pop_front();
    }
  }
  // The newest lost version of the key, or 0.
  uint64_t Get(uint64_t key_hash) const {
    const Part& p = PartOf(key_hash);
    MutexLock lock(&p.mu);
    auto it = p.versions.find(key_hash);
    return it == p.versions.end() ? 0 : it->second;
  }
  size_t size() const {
    size_t n = 0;
    for (size_t i = 0; i < parts(); ++i) {
      const Part& p = parts_[i];
      MutexLock lock(&p.mu);
      n += p.versions.size();
    }
    return n;
  }
  size_t parts() const { return size_t{1} << part_bits_; }
  // The most slots of any one part's table: what one Record may pass over
  // (a rehash or an in-place cleanup) under the caller's lock.
  size_t LargestTableSlots() const {
    size_t most = 0;
    for (size_t i = 0; i < parts(); ++i) {
      const Part& p = parts_[i];
      MutexLock lock(&p.mu);
      most = std::max(most, p.versions.capacity());
    }
    return most;
  }

 private:
  struct Part {
    mutable Mutex mu;
    absl::flat_hash_map<uint64_t, uint64_t> versions ABSL_GUARDED_BY(mu);
    // Insertion order, for the bound.
    std::deque<uint64_t> order ABSL_GUARDED_BY(mu);
  };
  // The top bits: LostKeyHash ends in a multiplication, which mixes them.
  Part& PartOf(uint64_t key_hash) const {
    return parts_[part_bits_ == 0 ? 0 : key_hash >> (64 - part_bits_)];
  }

  const int part_bits_;
  const size_t part_capacity_;
  const std::unique_ptr<Part[]> parts_;
};

}  // namespace kvpool

#endif  // KVPOOL_MASTER_LOST_VERSIONS_H_
