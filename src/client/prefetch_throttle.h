// PrefetchThrottle: the client's per-key memory of prefetches, so an exist
// probe costs one lookup per key and a hot key is prefetched at most once
// per window. 16 shards, each a small map behind its own mutex; entries
// expire lazily (checked on touch, swept a little on each insert), so a probe
// is O(batch), never O(table).
//
// States (the seed's): kTriggered -> kInFlight -> kCompleted | kFailed,
// kTriggered -> kAlreadyResident, kTriggered -> kDelegated. Healthy states
// block a re-trigger for `dedup_ttl_ms`; kFailed only for `cooldown_ms`.
// Separately, a DRAM-pressure cooldown (opened when a promotion's
// AllocStart says NO_AVAILABLE_HANDLE) makes Reserve a no-op for
// `cooldown_ms` unless the caller ignores it (the get-side kick). A window of
// 0 disables that rule. Thread-safe.
#ifndef KVPOOL_CLIENT_PREFETCH_THROTTLE_H_
#define KVPOOL_CLIENT_PREFETCH_THROTTLE_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/clock.h"
#include "common/mutex.h"

namespace kvpool {

enum class PrefetchState : uint8_t {
  kTriggered,
  kInFlight,
  kAlreadyResident,
  kDelegated,
  kCompleted,
  kFailed,
};

struct PrefetchThrottleConfig {
  int64_t dedup_ttl_ms = 30000;  // ssd_prefetch_dedup_ttl_sec
  int64_t cooldown_ms = 5000;    // ssd_prefetch_cooldown_sec
};

class PrefetchThrottle {
 public:
  static constexpr size_t kShards = 16;
  PrefetchThrottle(PrefetchThrottleConfig config, const Clock* clock);

  // Returns the keys that may be prefetched now (marking them kTriggered);
  // the rest are deduplicated. Empty while the pressure cooldown is open,
  // unless `ignore_cooldown`.
  std::vector<std::string> Reserve(const std::vector<std::string>& keys,
                                   bool ignore_cooldown);
  // Moves a key to `state` (its window restarts now).
  void Mark(const std::string& key, PrefetchState state);
  void EnterCooldown();
  bool InCooldown() const;

  uint64_t dedup_hits() const { return dedup_hits_.load(); }
  uint64_t cooldown_entries() const { return cooldown_entries_.load(); }
  uint64_t cooldown_skips() const { return cooldown_skips_.load(); }
  size_t size() const;

 private:
  struct Entry {
    PrefetchState state;
    int64_t since_ms;
  };
  struct Shard {
    mutable Mutex mu;
    std::unordered_map<std::string, Entry> entries ABSL_GUARDED_BY(mu);
  };
  bool Expired(const Entry& e, int64_t now) const;
  Shard& ShardOf(const std::string& key);

  const PrefetchThrottleConfig config_;
  const Clock* clock_;
  std::array<Shard, kShards> shards_;
  std::atomic<int64_t> cooldown_until_ms_{0};
  std::atomic<uint64_t> dedup_hits_{0}, cooldown_entries_{0},
      cooldown_skips_{0};
};

}  // namespace kvpool

#endif  // KVPOOL_CLIENT_PREFETCH_THROTTLE_H_
