// Helpers for benchmarks and replays that place keys in a given tier of a
// LocalCluster.
#ifndef KVPOOL_BENCHUTIL_BENCH_KEYS_H_
#define KVPOOL_BENCHUTIL_BENCH_KEYS_H_

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "benchutil/bench_util.h"
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

// Waits for every SSD copy of `keys`, pushes the keys out of DRAM with 1 MiB
// filler named `<filler_prefix>-<i>` (in rounds, since which keys eviction
// picks first is the master's business), then removes the filler so DRAM has
// room for promotions again. Returns how many MiB of filler it took.
inline size_t PushOutOfDram(Client& c, const std::vector<std::string>& keys,
                            uint64_t dram_total,
                            const std::string& filler_prefix) {
  WaitFor(60, [&] {
    for (const auto& d : Descs(c, keys)) {
      if (!d.ok()) continue;  // lost: the caller sees it as not SSD-only
      bool disk = false;
      for (const auto& r : d->replicas) {
        disk |= r.kind == ReplicaInfo::Kind::kLocalDisk && r.complete;
      }
      if (!disk) return false;
    }
    return true;
  });
  const uint64_t kFiller = 1ull << 20;
  const int per_round = std::max<int>(4, int(dram_total / kFiller / 4));
  std::vector<std::string> filler;
  while (CountTier(c, keys, "memory") > 0 &&
         filler.size() * kFiller < 4 * dram_total) {
    for (int i = 0; i < per_round; ++i) {
      filler.push_back(fmt::format("{}-{}", filler_prefix, filler.size()));
      // A filler refused (DRAM full of pinned values, say) only means more
      // rounds; the loop ends on the tier count or the byte cap.
      c.Put(filler.back(), Value(filler.size(), kFiller)).IgnoreError();
    }
  }
  for (const auto& f : filler) c.Remove(f, /*force=*/true).IgnoreError();
  return filler.size();
}

// Puts `n` keys of `size` bytes and returns those that end SSD-only (see
// PushOutOfDram).
inline std::vector<std::string> MakeSsdOnly(Client& c,
                                            const std::string& prefix, int n,
                                            uint64_t size,
                                            uint64_t dram_total) {
  std::vector<std::string> keys;
  double t0 = NowSec();
  for (int i = 0; i < n; ++i) {
    keys.push_back(fmt::format("{}-{}", prefix, i));
    if (Status s = c.Put(keys.back(), Value(i, size)); !s.ok()) {
      std::fprintf(stderr, "  put %s: %s\n", keys.back().c_str(),
                   s.ToString().c_str());
    }
    if ((i + 1) % std::max(1, n / 4) == 0) {
      std::fprintf(stderr, "  %s: %d/%d puts (%.1f s)\n", prefix.c_str(), i + 1,
                   n, NowSec() - t0);
    }
  }
  size_t filler = PushOutOfDram(c, keys, dram_total, prefix + "-filler");
  std::vector<std::string> ssd_only;
  auto tiers = Tiers(c, keys);
  for (size_t i = 0; i < keys.size(); ++i) {
    if (tiers[i] == "local_disk") ssd_only.push_back(keys[i]);
  }
  std::fprintf(stderr,
               "  %s: %zu/%d keys SSD-only after %zu MiB of filler (%.1f s)\n",
               prefix.c_str(), ssd_only.size(), n, filler, NowSec() - t0);
  return ssd_only;
}

// Waits until every DRAM segment is at most `ratio` full. Removed keys keep
// their DRAM while a lease on them lasts, and a promotion that finds no room
// opens the client's DRAM-pressure cooldown, which would turn the next
// measurement into a measurement of the cooldown path.
inline void WaitDramFree(Client& c, double ratio, double timeout_sec) {
  WaitFor(timeout_sec, [&] {
    auto r = c.Stat();
    if (!r.ok()) return false;
    for (const auto& s : r->segments) {
      if (s.kind == "main" && double(s.used) > ratio * double(s.capacity)) {
        return false;
      }
    }
    return true;
  });
}

}  // namespace kvpool::bench

#endif  // KVPOOL_BENCHUTIL_BENCH_KEYS_H_
