#include "master/eviction_policy.h"

#include <algorithm>
#include <iterator>
#include <utility>
#include <vector>

#include "master/age_histogram.h"

namespace kvpool {

EvictionPolicy::Options EvictionPolicy::Options::FromConfig(
    const MasterConfig& c) {
  Options o;
  o.eviction_high_watermark_ratio = c.eviction_high_watermark_ratio;
  o.eviction_ratio = c.eviction_ratio;
  o.allow_evict_soft_pinned_objects = c.allow_evict_soft_pinned_objects;
  o.enable_offload = c.enable_offload;
  o.offload_force_evict = c.offload_force_evict;
  return o;
}

class EvictionPolicy::Pass {
 public:
  Pass(SegmentKind kind, int64_t now, const SegmentManager& segments,
       const std::vector<uint32_t>* only)
      : kind_(kind), now_(now), open_(OpenAtStart(kind, segments, only)) {}

  SegmentKind kind() const { return kind_; }
  int64_t now() const { return now_; }
  bool OfKind(const Replica& r) const {
    return r.kind == ReplicaKind::kMemory &&
           std::binary_search(open_.begin(), open_.end(), r.segment);
  }
  uint64_t MemoryBytes(const ObjectMeta& m) const {
    uint64_t n = 0;
    for (const auto& r : m.replicas) {
      if (OfKind(r)) n += m.size;
    }
    return n;
  }
  // LRU, except that the prefetch buffer gives up what no announced request
  // still waits for (read prefetches, overflowed puts) before unread
  // prefetches: it is a transit area, not a cache.
  int64_t Rank(const ObjectMeta& m) const {
    constexpr int64_t kConsumedFirst = int64_t{1} << 52;
    return kind_ == SegmentKind::kPrefetchBuffer && !m.prefetched_unread
               ? m.last_access_ms() - kConsumedFirst
               : m.last_access_ms();
  }
  bool Eligible(const Shard& shard, const ObjectKey& k, const ObjectMeta& m,
                const Round& round) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(shard.mu()) {
    if (m.hard_pin || (m.SoftPinned(now_) && !round.allow_soft) ||
        m.LeaseLive(now_) || m.HasProcessing() || MemoryBytes(m) == 0) {
      return false;
    }
    if ((m.FirstCompleteDisk() != nullptr) != round.with_copy) return false;
    // A pending offload reads this memory: it is pinned until answered.
    return !shard.offloads().count(k);
  }

 private:
  // The segments whose replicas count, read once, before any object is: a
  // closed segment (re-mounted, in its lease hold) takes no put however
  // much of it is freed, and a segment mounted after this -- a node handing
  // its directory to a new master while the pass runs -- took no part in
  // the pass's reading of use (nor in its candidates' ages), so its values
  // are not the pass's to drop. Ascending, as OpenIds gives them.
  static std::vector<uint32_t> OpenAtStart(SegmentKind kind,
                                           const SegmentManager& segments,
                                           const std::vector<uint32_t>* only) {
    std::vector<uint32_t> open = segments.OpenIds(kind);
    if (only == nullptr) return open;
    std::vector<uint32_t> both;
    std::set_intersection(open.begin(), open.end(), only->begin(), only->end(),
                          std::back_inserter(both));
    return both;
  }

  const SegmentKind kind_;
  const int64_t now_;
  const std::vector<uint32_t> open_;
};

EvictionPolicy::EvictionPolicy(Options options, const Clock* clock,
                               ObjectStore& objects, SegmentManager& segments,
                               MetricsRegistry& metrics, Hooks hooks)
    : options_(options),
      clock_(clock),
      objects_(objects),
      segments_(segments),
      hooks_(std::move(hooks)),
      evicted_bytes_total_(
          metrics.GetCounter("kvpool_master_evicted_bytes_total", "",
                             "bytes of DRAM replicas evicted")),
      eviction_passes_(metrics.GetCounter("kvpool_master_eviction_passes_total",
                                          "",
                                          "eviction passes that freed bytes")),
      offload_queued_(metrics.GetCounter(
          "kvpool_master_evict_offload_queued_total", "",
          "SSD copies queued by eviction for keys that had none")),
      dropped_ssd_full_(metrics.GetCounter(
          "kvpool_master_evicted_without_copy_ssd_full_total", "",
          "keys dropped from DRAM with no SSD copy because their holder's "
          "SSD refused writes (full)")),
      dropped_extra_(metrics.GetCounter(
          "kvpool_master_evicted_without_copy_extra_segment_total", "",
          "keys dropped from DRAM with no SSD copy because they lay only in "
          "extra segments (mount_segment), which are not offloaded from")),
      force_evicted_(metrics.GetCounter(
          "kvpool_master_force_evicted_without_copy_total", "",
          "keys dropped from DRAM with no SSD copy (offload_force_evict)")),
      kept_no_copy_(metrics.GetCounter(
          "kvpool_master_evict_kept_no_copy_total", "",
          "eviction candidates kept because they have no SSD copy yet")) {}

uint64_t EvictionPolicy::EvictIfNeeded() {
  uint64_t freed = 0;
  // Each kind on its own reading: the buffer never dilutes the main
  // watermark, and a full buffer is drained of replicas whose lease ended.
  for (SegmentKind kind : {SegmentKind::kMain, SegmentKind::kPrefetchBuffer}) {
    SegmentUsage u = segments_.Usage(kind);
    if (u.capacity == 0) continue;
    double high = options_.eviction_high_watermark_ratio;
    // The buffer admits a prefetch only below its high watermark, so it is
    // drained one eviction_ratio earlier: there is room before a trigger
    // has to be throttled, not after.
    if (kind == SegmentKind::kPrefetchBuffer)
      high = std::max(0.0, high - options_.eviction_ratio);
    if (u.ratio() < high) continue;
    // Down to the high watermark, then a further eviction_ratio of
    // capacity, so eviction runs in batches rather than once per put.
    uint64_t over = u.used - uint64_t(high * double(u.capacity));
    freed += EvictBytes(
        over + uint64_t(options_.eviction_ratio * double(u.capacity)), kind);
  }
  if (uint64_t want = buffer_evict_request_.exchange(0); want > 0)
    freed += EvictBytes(want, SegmentKind::kPrefetchBuffer);
  return freed;
}

void EvictionPolicy::RequestBufferRoom(const SegmentUsage& u, uint64_t reserved,
                                       uint64_t size) {
  // Enough to take this block with the buffer back at its low mark
  // (high watermark - eviction_ratio), as the main cache's eviction does.
  const double low = std::max(
      0.0, options_.eviction_high_watermark_ratio - options_.eviction_ratio);
  uint64_t want =
      uint64_t(std::max(double(size), double(u.used + reserved + size) -
                                          low * double(u.capacity)));
  uint64_t cur = buffer_evict_request_.load();
  while (cur < want &&
         !buffer_evict_request_.compare_exchange_weak(cur, want)) {
  }
}

uint64_t EvictionPolicy::EvictBytes(uint64_t bytes, SegmentKind kind,
                                    const std::vector<uint32_t>* only) {
  MutexLock evict_lock(&evict_mu_);
  const Pass pass(kind, clock_->NowMs(), segments_, only);
  Tally tally;
  for (Round round : {Round{false, true}, Round{false, false},
                      Round{true, true}, Round{true, false}}) {
    if (tally.freed >= bytes) break;
    if (round.allow_soft && !options_.allow_evict_soft_pinned_objects) break;
    std::optional<int64_t> cutoff =
        SelectCutoff(pass, round, bytes - tally.freed);
    if (!cutoff) continue;
    EvictUpTo(pass, round, *cutoff, bytes, &tally);
  }
  Publish(tally);
  return tally.freed;
}

std::optional<int64_t> EvictionPolicy::SelectCutoff(const Pass& pass,
                                                    Round round,
                                                    uint64_t want) {
  // Exact (every candidate, sorted) while the candidates are few; past
  // that, the ages of the candidates in a histogram (1/16 of the age
  // precise), and from a sample of the shards once it is clear the table
  // is large: keys spread over the shards by hash, so a sixteenth of them
  // has the same age profile as the whole. Sorting every candidate cost
  // 16 bytes of them and an N log N sort per pass (seconds at 10M).
  constexpr size_t kExactLimit = size_t{1} << 16;
  constexpr size_t kSampleShards = ObjectStore::kShards / 16;
  std::vector<std::pair<int64_t, uint64_t>> cands;  // (rank, bytes)
  bool exact = true;
  AgeHistogram ages;
  size_t scanned = 0;
  for (size_t j = 0; j < ObjectStore::kShards; ++j) {
    // Strided, so the first kSampleShards are spread over the table.
    const size_t i = (j % kSampleShards) * 16 + j / kSampleShards;
    auto& shard = objects_.shard(i);
    MutexLock lock(&shard.mu());
    for (const auto& [k, m] : shard.objects()) {
      if (!pass.Eligible(shard, k, m, round)) continue;
      const uint64_t bytes = pass.MemoryBytes(m);
      ages.Add(pass.now() - pass.Rank(m), bytes);
      if (exact) {
        if (cands.size() < kExactLimit) {
          cands.emplace_back(pass.Rank(m), bytes);
        } else {
          exact = false;
          cands = {};
        }
      }
    }
    ++scanned;
    if (!exact && scanned >= kSampleShards) break;
  }
  if (exact) {
    if (cands.empty()) return std::nullopt;
    std::sort(cands.begin(), cands.end());
    uint64_t acc = 0;
    for (const auto& [rank, b] : cands) {
      acc += b;
      if (acc >= want) return rank;
    }
    return cands.back().first;
  }
  // Scaled to the part scanned, with an eighth more so that the objects at
  // or below the cutoff do cover `want` (EvictUpTo stops at `want`).
  const double part = double(scanned) / double(ObjectStore::kShards);
  const uint64_t target = uint64_t(double(want) * part * 1.125);
  const int64_t age = ages.OldestCovering(std::max<uint64_t>(1, target));
  return pass.now() - age;
}

void EvictionPolicy::EvictUpTo(const Pass& pass, Round round, int64_t cutoff,
                               uint64_t bytes, Tally* tally) {
  for (size_t i = 0; i < ObjectStore::kShards && tally->freed < bytes; ++i) {
    auto& shard = objects_.shard(i);
    MutexLock lock(&shard.mu());
    for (auto it = shard.objects().begin();
         it != shard.objects().end() && tally->freed < bytes;) {
      ObjectMeta& m = it->second;
      if (pass.Rank(m) > cutoff || !pass.Eligible(shard, it->first, m, round)) {
        ++it;
        continue;
      }
      if (!round.with_copy && options_.enable_offload &&
          !MayDropWithoutCopy(shard, it->first, m, tally)) {
        ++it;
        continue;
      }
      it = Evict(pass, shard, it, tally);
    }
  }
}

bool EvictionPolicy::MayDropWithoutCopy(Shard& shard, const ObjectKey& key,
                                        const ObjectMeta& m, Tally* tally) {
  // Never lose an acknowledged value silently: copy it first, or drop it
  // only by an explicit, counted force-evict -- or, when its holder's SSD
  // is full, as a store without an SSD tier would (a cache that refused
  // every put instead would be an outage).
  bool ssd_full = false;
  if (hooks_.queue_offload(shard, key, m, &ssd_full)) {
    ++tally->queued;
    return false;
  }
  const bool extra_only = !ssd_full && OnlyInExtraSegments(m);
  if (!options_.offload_force_evict && !ssd_full && !extra_only) {
    ++tally->kept;
    return false;
  }
  ++(ssd_full     ? tally->dropped_ssd_full
     : extra_only ? tally->dropped_extra
                  : tally->forced);
  return true;
}

EvictionPolicy::ObjectMap::iterator EvictionPolicy::Evict(
    const Pass& pass, Shard& shard, ObjectMap::iterator it, Tally* tally) {
  ObjectMeta& m = it->second;
  std::vector<Replica> mem =
      m.TakeReplicas([&](const Replica& r) { return pass.OfKind(r); });
  if (!m.HasCompleteMemory()) hooks_.count_prefetch_fate(m, "evicted_unread");
  tally->freed += mem.size() * m.size;
  evicted_bytes_ += mem.size() * m.size;
  hooks_.release_replicas(mem);
  if (hooks_.evicted && !mem.empty()) hooks_.evicted(it->first, m, mem);
  ++evicted_objects_;
  return m.replicas.empty() ? hooks_.erase_evicted(shard, it) : std::next(it);
}

void EvictionPolicy::Publish(const Tally& tally) {
  if (tally.freed > 0) {
    evicted_bytes_total_.Inc(tally.freed);
    eviction_passes_.Inc();
  }
  if (tally.queued) offload_queued_.Inc(tally.queued);
  if (tally.dropped_ssd_full) dropped_ssd_full_.Inc(tally.dropped_ssd_full);
  if (tally.dropped_extra) dropped_extra_.Inc(tally.dropped_extra);
  if (tally.forced) force_evicted_.Inc(tally.forced);
  if (tally.kept) kept_no_copy_.Inc(tally.kept);
}

bool EvictionPolicy::OnlyInExtraSegments(const ObjectMeta& m) const {
  bool any = false;
  for (const auto& r : m.replicas) {
    if (r.kind != ReplicaKind::kMemory || r.status != ReplicaStatus::kComplete)
      continue;
    auto seg = segments_.Info(r.segment);
    if (seg && !seg->extra) return false;
    any = any || seg != nullptr;
  }
  return any;
}

}  // namespace kvpool
