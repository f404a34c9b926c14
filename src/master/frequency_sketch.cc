#include "master/frequency_sketch.h"

#include <algorithm>
#include <functional>

namespace kvpool {

namespace {
uint32_t RoundUpPow2(uint32_t v) {
  uint32_t p = 1;
  while (p < v) p <<= 1;
  return p;
}
// 64-bit finaliser (splitmix64): decorrelates the per-row seeds.
uint64_t Mix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}
}  // namespace

FrequencySketch::FrequencySketch(uint32_t width, uint32_t depth,
                                 uint64_t decay_every)
    : width_mask_(RoundUpPow2(std::max<uint32_t>(width, 16)) - 1),
      depth_(std::max<uint32_t>(depth, 1)),
      decay_every_(std::max<uint64_t>(decay_every, 1)),
      counters_(size_t(width_mask_ + 1) * depth_, 0) {}

uint64_t FrequencySketch::Hash(uint32_t tenant, std::string_view key,
                               uint32_t row) const {
  uint64_t h = std::hash<std::string_view>()(key) ^ (uint64_t{tenant} << 32);
  return Mix(h + row * 0x632BE59BD9B4E019ull);
}

uint32_t FrequencySketch::Increment(uint32_t tenant, std::string_view key) {
  MutexLock lock(&mu_);
  uint32_t est = UINT32_MAX;
  for (uint32_t r = 0; r < depth_; ++r) {
    uint8_t& c = counters_[size_t(r) * (width_mask_ + 1) +
                           (Hash(tenant, key, r) & width_mask_)];
    if (c < 255) ++c;
    est = std::min<uint32_t>(est, c);
  }
  if (++increments_ % decay_every_ == 0) Decay();
  return est;
}

uint32_t FrequencySketch::Estimate(uint32_t tenant,
                                   std::string_view key) const {
  MutexLock lock(&mu_);
  uint32_t est = UINT32_MAX;
  for (uint32_t r = 0; r < depth_; ++r) {
    est = std::min<uint32_t>(est,
                             counters_[size_t(r) * (width_mask_ + 1) +
                                       (Hash(tenant, key, r) & width_mask_)]);
  }
  return est;
}

void FrequencySketch::Decay() {
  for (auto& c : counters_) c >>= 1;
  ++decays_;
}

}  // namespace kvpool
