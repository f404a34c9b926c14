// Values a benchmark can check byte for byte after a restart or failover:
// the value of key index i is a pseudo-random stream seeded by i, so
// another key's bytes, or bytes read from a wrong offset, never compare
// equal.
#ifndef KVPOOL_BENCHUTIL_CHECKED_VALUE_H_
#define KVPOOL_BENCHUTIL_CHECKED_VALUE_H_

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>

namespace kvpool::bench {

// splitmix64's finalizer.
inline uint64_t Mix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// Overwrites *v (its size kept) with the value of key index i.
inline void FillValue(uint64_t i, std::string* v) {
  const uint64_t seed = Mix(i * 0x2545F4914F6CDD1Dull + 17);
  for (size_t off = 0; off < v->size(); off += 8) {
    uint64_t w = Mix(seed + off);
    std::memcpy(v->data() + off, &w, std::min<size_t>(8, v->size() - off));
  }
}

}  // namespace kvpool::bench

#endif  // KVPOOL_BENCHUTIL_CHECKED_VALUE_H_
