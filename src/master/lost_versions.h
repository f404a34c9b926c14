// The versions of values the pool lost with a node (declared dead, or
// restarted under its name), so that when copies come back, an older copy
// of a lost value is refused: if a node held a key's newer value and died,
// and another holder (or that node's own SSD) still has an older one, the
// older one must not become the key's value. Exact per key (a 64-bit hash:
// a collision is as likely as a cosmic ray), unlike the version floor's
// shared slots, so a dead node's own copies never refuse each other.
// Bounded: past `capacity` entries the oldest losses are forgotten first.
// Thread-safe.
#ifndef KVPOOL_MASTER_LOST_VERSIONS_H_
#define KVPOOL_MASTER_LOST_VERSIONS_H_

#include <cstddef>
#include <cstdint>
#include <deque>

#include <absl/container/flat_hash_map.h>

#include "common/mutex.h"

namespace kvpool {

class LostVersions {
 public:
  explicit LostVersions(size_t capacity = size_t{1} << 22)
      : capacity_(capacity) {}
  void Record(uint64_t key_hash, uint64_t version) ABSL_LOCKS_EXCLUDED(mu_) {
    MutexLock lock(&mu_);
    // Room for the whole bound at the first loss: a node's death records a
    // version per object it held, under a shard lock, and each rehash of a
    // table of millions copied it all (a 350 ms hold at 45M objects). The
    // memory is only touched as entries come.
    if (versions_.capacity() == 0) versions_.reserve(capacity_);
    auto [it, fresh] = versions_.try_emplace(key_hash, version);
    if (!fresh) {
      it->second = std::max(it->second, version);
      return;
    }
    order_.push_back(key_hash);
    while (order_.size() > capacity_) {
      versions_.erase(order_.front());
      order_.pop_front();
    }
  }
  // The newest lost version of the key, or 0.
  uint64_t Get(uint64_t key_hash) const ABSL_LOCKS_EXCLUDED(mu_) {
    MutexLock lock(&mu_);
    auto it = versions_.find(key_hash);
    return it == versions_.end() ? 0 : it->second;
  }
  size_t size() const ABSL_LOCKS_EXCLUDED(mu_) {
    MutexLock lock(&mu_);
    return versions_.size();
  }

 private:
  const size_t capacity_;
  mutable Mutex mu_;
  absl::flat_hash_map<uint64_t, uint64_t> versions_ ABSL_GUARDED_BY(mu_);
  // Insertion order, for the bound.
  std::deque<uint64_t> order_ ABSL_GUARDED_BY(mu_);
};

}  // namespace kvpool

#endif  // KVPOOL_MASTER_LOST_VERSIONS_H_
