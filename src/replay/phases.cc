#include "replay/phases.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>

#include "benchutil/bench_keys.h"
#include "replay/clock_util.h"
#include "replay/trace.h"

namespace kvpool::replay {

BlockWriter::BlockWriter(Client& client, uint64_t block_bytes, size_t batch)
    : client_(client),
      block_bytes_(block_bytes),
      batch_(batch),
      buf_(batch * block_bytes) {
  std::memset(buf_.data(), 0xa5, buf_.size());
  registered_ = client_.RegisterBuffer(buf_.data(), buf_.size()).ok();
}

BlockWriter::~BlockWriter() {
  if (registered_) client_.UnregisterBuffer(buf_.data()).IgnoreError();
}

uint64_t BlockWriter::Put(const std::vector<std::string>& keys,
                          const std::vector<uint64_t>& ids,
                          const ReplicateConfig& rc, bool upsert) {
  if (!registered_) {
    last_error_ = Status(ErrorCode::INVALID_PARAMS, "buffer not registered");
    return keys.size();
  }
  uint64_t failed = 0;
  for (size_t start = 0; start < keys.size(); start += batch_) {
    const size_t n = std::min(batch_, keys.size() - start);
    std::vector<std::string> k(keys.begin() + long(start),
                               keys.begin() + long(start + n));
    std::vector<const void*> ptrs(n);
    std::vector<uint64_t> sizes(n, block_bytes_);
    std::vector<std::vector<ConstSlice>> parts(n);
    for (size_t i = 0; i < n; ++i) {
      uint8_t* p = buf_.data() + i * block_bytes_;
      std::memcpy(p, &ids[start + i], sizeof(uint64_t));
      ptrs[i] = p;
      parts[i] = {ConstSlice{p, block_bytes_}};
    }
    // BatchPutFrom has no upsert form; the one-part scatter put is the same
    // zero-copy put from the registered buffer.
    for (const auto& s : upsert ? client_.BatchPutFromParts(k, parts, rc, true)
                                : client_.BatchPutFrom(k, ptrs, sizes, rc)) {
      if (!s.ok()) {
        ++failed;
        last_error_ = s;
      }
    }
  }
  return failed;
}

FillResult Fill(Client& client, const std::vector<uint64_t>& hash_ids,
                uint64_t block_bytes, Progress* progress) {
  FillResult r;
  const double t0 = NowSec();
  BlockWriter w(client, block_bytes);
  const size_t kChunk = 256;  // progress granularity
  for (size_t start = 0; start < hash_ids.size(); start += kChunk) {
    const size_t n = std::min(kChunk, hash_ids.size() - start);
    std::vector<uint64_t> ids(hash_ids.begin() + long(start),
                              hash_ids.begin() + long(start + n));
    std::vector<std::string> keys;
    for (uint64_t id : ids) keys.push_back(BlockKey(id));
    r.failed += w.Put(keys, ids);
    r.blocks += n;
    if (progress) progress->Update(r.blocks);
  }
  r.sec = NowSec() - t0;
  return r;
}

OverflowResult Overflow(ReplayCluster& cluster, Client& client,
                        uint64_t block_bytes, double ratio,
                        Progress* progress) {
  OverflowResult r;
  const double t0 = NowSec();
  ClusterSnapshot before = cluster.Snapshot();
  const uint64_t dram = before.main_capacity;
  const uint64_t want = uint64_t(ratio * double(dram));
  BlockWriter w(client, block_bytes);
  const size_t kRound = 64;
  while (r.filler_blocks * block_bytes < 4 * dram) {
    ClusterSnapshot now = cluster.Snapshot();
    r.evicted = now.evicted_objects - before.evicted_objects;
    if (r.filler_blocks * block_bytes >= want && r.evicted > 0) break;
    std::vector<std::string> keys;
    std::vector<uint64_t> ids;
    for (size_t i = 0; i < kRound; ++i) {
      const uint64_t n = r.filler_blocks + i;
      keys.push_back(fmt::format("ovf-{}", n));
      ids.push_back((1ull << 63) | n);
    }
    r.failed += w.Put(keys, ids);
    r.filler_blocks += kRound;
    if (progress) progress->Update(r.filler_blocks);
  }
  r.sec = NowSec() - t0;
  return r;
}

SettleResult Settle(ReplayCluster& cluster, double high_watermark,
                    double timeout_sec) {
  SettleResult r;
  const double t0 = NowSec();
  ClusterSnapshot prev = cluster.Snapshot();
  auto quiet = [&](const ClusterSnapshot& s) {
    return s.offloads_in_flight == 0 && s.promo_in_flight == 0 &&
           s.MainRatio() < high_watermark;
  };
  auto same = [](const ClusterSnapshot& a, const ClusterSnapshot& b) {
    return a.main_used == b.main_used &&
           a.memory_replicas == b.memory_replicas &&
           a.disk_replicas == b.disk_replicas &&
           a.evicted_objects == b.evicted_objects;
  };
  r.settled = bench::WaitFor(timeout_sec, [&] {
    ClusterSnapshot now = cluster.Snapshot();
    // Two readings at least 200 ms apart must agree.
    if (now.t - prev.t < 0.2) return false;
    bool ok = quiet(now) && quiet(prev) && same(now, prev);
    prev = now;
    return ok;
  });
  r.sec = NowSec() - t0;
  r.last = prev;
  return r;
}

std::vector<uint64_t> RefillSelection(const std::vector<uint64_t>& hash_ids,
                                      double ssd_only_share, uint64_t seed) {
  const double back = 1.0 - std::clamp(ssd_only_share, 0.0, 1.0);
  const size_t k = size_t(std::llround(back * double(hash_ids.size())));
  if (k == 0) return {};
  std::vector<size_t> idx(hash_ids.size());
  std::iota(idx.begin(), idx.end(), 0);
  // A seeded shuffle, not every n-th block: which blocks come back should
  // not line up with the trace's prefix structure.
  std::mt19937_64 rng(seed ^ 0x5eedf111b10c5ull);
  std::shuffle(idx.begin(), idx.end(), rng);
  idx.resize(k);
  std::sort(idx.begin(), idx.end());
  std::vector<uint64_t> out;
  out.reserve(k);
  for (size_t i : idx) out.push_back(hash_ids[i]);
  return out;
}

RefillResult Refill(ReplayCluster& cluster, Client& client,
                    const std::vector<uint64_t>& hash_ids, uint64_t block_bytes,
                    double ssd_only_share, uint64_t seed, double high_watermark,
                    double eviction_ratio, Progress* progress) {
  RefillResult r;
  const double t0 = NowSec();
  const double usable = std::max(0.0, high_watermark - eviction_ratio);
  r.room_blocks = uint64_t(usable * double(cluster.Snapshot().main_capacity) /
                           double(block_bytes));
  const std::vector<uint64_t> ids =
      RefillSelection(hash_ids, ssd_only_share, seed);
  BlockWriter w(client, block_bytes);
  const size_t kChunk = 256;  // progress granularity
  for (size_t start = 0; start < ids.size(); start += kChunk) {
    const size_t n = std::min(kChunk, ids.size() - start);
    std::vector<uint64_t> chunk(ids.begin() + long(start),
                                ids.begin() + long(start + n));
    std::vector<std::string> keys;
    for (uint64_t id : chunk) keys.push_back(BlockKey(id));
    r.failed += w.Put(keys, chunk, {}, /*upsert=*/true);
    r.blocks += n;
    if (progress) progress->Update(r.blocks);
  }
  r.sec = NowSec() - t0;
  return r;
}

TierCensus Census(Client& client, const std::vector<std::string>& keys) {
  TierCensus c;
  for (const auto& t : bench::Descs(client, keys)) {
    if (!t.ok()) {
      ++c.absent;
      continue;
    }
    std::string tier = t->BestTier();
    if (tier == "memory") {
      ++c.memory;
    } else if (tier == "local_disk") {
      ++c.ssd_only;
    } else {
      ++c.processing;
    }
  }
  return c;
}

}  // namespace kvpool::replay
