// Small helpers for the benchmark tools and the trace replay: timing and
// percentiles.
#ifndef KVPOOL_BENCHUTIL_BENCH_UTIL_H_
#define KVPOOL_BENCHUTIL_BENCH_UTIL_H_

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "kvpool/status.h"

namespace kvpool::bench {

// A failed setup step ends the benchmark: timing a broken state would
// print numbers that mean nothing.
inline void MustOk(const Status& s, const char* what) {
  if (s.ok()) return;
  std::fprintf(stderr, "bench: %s failed: %s\n", what, s.ToString().c_str());
  std::exit(1);
}

inline double NowSec() {
  return std::chrono::duration<double>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// p in [0, 100]; nearest-rank on a copy.
inline double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t idx = static_cast<size_t>(p / 100.0 * double(v.size() - 1) + 0.5);
  return v[std::min(idx, v.size() - 1)];
}

// Resident set size of this process in bytes.
inline uint64_t RssBytes() {
  FILE* f = std::fopen("/proc/self/statm", "r");
  if (!f) return 0;
  unsigned long pages = 0, rss = 0;
  if (std::fscanf(f, "%lu %lu", &pages, &rss) != 2) rss = 0;
  std::fclose(f);
  return uint64_t(rss) * 4096;
}

// Repeats `fn` (one call = one sample) for at least `min_seconds` and at
// least `min_iters` samples; returns per-call latencies in seconds.
template <typename Fn>
std::vector<double> Sample(double min_seconds, int min_iters, Fn&& fn) {
  std::vector<double> lat;
  double start = NowSec();
  while (static_cast<int>(lat.size()) < min_iters ||
         NowSec() - start < min_seconds) {
    double t = NowSec();
    fn();
    lat.push_back(NowSec() - t);
    if (lat.size() > 200000) break;
  }
  return lat;
}

}  // namespace kvpool::bench

#endif  // KVPOOL_BENCHUTIL_BENCH_UTIL_H_
