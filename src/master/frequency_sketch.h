// Count-min sketch of key access frequency for promote-on-hit admission:
// "has this SSD-only key been read often enough to deserve DRAM?". Fixed
// memory (depth x width 8-bit counters) whatever the number of keys; counts
// are halved every `decay_every` increments so old popularity fades.
// Thread-safe (one mutex; the sketch is touched once per admitted get).
#ifndef KVPOOL_MASTER_FREQUENCY_SKETCH_H_
#define KVPOOL_MASTER_FREQUENCY_SKETCH_H_

#include <cstdint>
#include <string_view>
#include <vector>

#include "common/mutex.h"

namespace kvpool {

class FrequencySketch {
 public:
  // `width` is rounded up to a power of two.
  explicit FrequencySketch(uint32_t width = 1 << 16, uint32_t depth = 4,
                           uint64_t decay_every = 1 << 20);
  // Counts one access of `key` and returns its estimated frequency
  // (including this access). Never underestimates between decays.
  uint32_t Increment(uint32_t tenant, std::string_view key)
      ABSL_LOCKS_EXCLUDED(mu_);
  uint32_t Estimate(uint32_t tenant, std::string_view key) const
      ABSL_LOCKS_EXCLUDED(mu_);
  // Takes the lock: Increment writes decays_ under it.
  uint64_t decays() const ABSL_LOCKS_EXCLUDED(mu_) {
    MutexLock lock(&mu_);
    return decays_;
  }

 private:
  uint64_t Hash(uint32_t tenant, std::string_view key, uint32_t row) const;
  void Decay() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const uint32_t width_mask_;
  const uint32_t depth_;
  const uint64_t decay_every_;
  mutable Mutex mu_;
  // depth_ rows of width_ counters.
  std::vector<uint8_t> counters_ ABSL_GUARDED_BY(mu_);
  uint64_t increments_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t decays_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace kvpool

#endif  // KVPOOL_MASTER_FREQUENCY_SKETCH_H_
