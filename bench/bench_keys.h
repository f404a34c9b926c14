// Helpers for benchmarks that place keys in a given tier of a LocalCluster.
#ifndef KVPOOL_BENCH_BENCH_KEYS_H_
#define KVPOOL_BENCH_BENCH_KEYS_H_

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "bench/bench_util.h"
#include "kvpool/client.h"

namespace kvpool::bench {

// A value of `size` bytes that differs per key index.
inline std::string Value(uint64_t i, uint64_t size) {
  std::string v(size, static_cast<char>('a' + i % 26));
  std::memcpy(v.data(), &i, std::min<uint64_t>(sizeof(i), size));
  return v;
}

// Polls `done` until it holds or `timeout_sec` passes.
template <typename Fn>
bool WaitFor(double timeout_sec, Fn&& done) {
  double deadline = NowSec() + timeout_sec;
  while (!done()) {
    if (NowSec() > deadline) return false;
    usleep(5000);
  }
  return true;
}

// The tier lookup of `keys`, asked in chunks so a large pool is not one huge
// reply.
inline std::vector<Result<TierInfo>> Descs(
    Client& c, const std::vector<std::string>& keys) {
  std::vector<Result<TierInfo>> out;
  out.reserve(keys.size());
  for (size_t start = 0; start < keys.size(); start += 512) {
    std::vector<std::string> chunk(
        keys.begin() + long(start),
        keys.begin() + long(std::min(keys.size(), start + 512)));
    for (auto& t : c.BatchGetReplicaDesc(chunk)) out.push_back(std::move(t));
  }
  return out;
}

// Best tier per key, "absent" when the lookup fails.
inline std::vector<std::string> Tiers(Client& c,
                                      const std::vector<std::string>& keys) {
  std::vector<std::string> out;
  out.reserve(keys.size());
  for (const auto& t : Descs(c, keys))
    out.push_back(t.ok() ? t->BestTier() : "absent");
  return out;
}

inline int CountTier(Client& c, const std::vector<std::string>& keys,
                     const std::string& tier) {
  int n = 0;
  for (const auto& t : Tiers(c, keys)) n += t == tier;
  return n;
}

}  // namespace kvpool::bench

#endif  // KVPOOL_BENCH_BENCH_KEYS_H_
