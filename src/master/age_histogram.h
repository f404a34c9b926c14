// Bytes by age, in buckets that are exact below 16 and 1/16 of the age wide
// above (sixteen per power of two, as an HDR histogram): what eviction
// needs to find the age above which the oldest `want` bytes lie without
// collecting and sorting every candidate of a table of tens of millions.
// Fixed size (8 KiB), no allocation. Not thread-safe.
#ifndef KVPOOL_MASTER_AGE_HISTOGRAM_H_
#define KVPOOL_MASTER_AGE_HISTOGRAM_H_

#include <array>
#include <bit>
#include <cstdint>

namespace kvpool {

class AgeHistogram {
 public:
  static constexpr int kSub = 16;
  static constexpr int kBuckets = kSub + (64 - 4) * kSub;

  void Add(int64_t age, uint64_t bytes) {
    bytes_[BucketOf(age < 0 ? 0 : uint64_t(age))] += bytes;
    total_ += bytes;
  }
  uint64_t total() const { return total_; }

  // The largest age A such that the bytes of age >= A are at least `want`
  // (0 when the whole histogram holds less). Ages within one bucket are
  // not told apart: everything from A up is at least `want`, and what lies
  // in A's own bucket is within 1/16 of A.
  int64_t OldestCovering(uint64_t want) const {
    uint64_t acc = 0;
    for (int b = kBuckets - 1; b >= 0; --b) {
      acc += bytes_[b];
      if (acc >= want && bytes_[b] > 0) return int64_t(LowerBound(b));
    }
    return 0;
  }

  static int BucketOf(uint64_t v) {
    if (v < kSub) return int(v);
    const int msb = std::bit_width(v) - 1;  // >= 4
    const int shift = msb - 4;
    return kSub + shift * kSub + int((v >> shift) & (kSub - 1));
  }
  static uint64_t LowerBound(int b) {
    if (b < kSub) return uint64_t(b);
    const int shift = (b - kSub) / kSub;
    return (uint64_t(kSub) + uint64_t((b - kSub) % kSub)) << shift;
  }

 private:
  std::array<uint64_t, kBuckets> bytes_{};
  uint64_t total_ = 0;
};

}  // namespace kvpool

#endif  // KVPOOL_MASTER_AGE_HISTOGRAM_H_
