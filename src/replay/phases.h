// The method's steps before a measurement (docs/replay.md: fill -> overflow ->
// settle -> measure): put the blocks the measured requests will look for,
// push DRAM past its watermark with filler so those blocks end on SSD, and
// wait until offload and eviction are quiet (measured, not a fixed sleep).
#ifndef KVPOOL_REPLAY_PHASES_H_
#define KVPOOL_REPLAY_PHASES_H_

#include <cstdint>
#include <string>
#include <vector>

#include "kvpool/client.h"
#include "kvpool/local_cluster.h"
#include "replay/cluster_probe.h"
#include "replay/progress.h"
#include "replay/replay_cluster.h"
#include "storage/aligned_buffer.h"

namespace kvpool::replay {

// Puts blocks of `block_bytes` whose first 8 bytes are their id (what the
// engines check on read), in batches from one registered buffer.
class BlockWriter {
 public:
  BlockWriter(Client& client, uint64_t block_bytes, size_t batch = 32);
  ~BlockWriter();
  // Returns the number of blocks whose put failed. `upsert` replaces a
  // stored value (a plain put of an existing key is a no-op).
  uint64_t Put(const std::vector<std::string>& keys,
               const std::vector<uint64_t>& ids, const ReplicateConfig& rc = {},
               bool upsert = false);
  // The last failed put's status (OK if none failed).
  const Status& last_error() const { return last_error_; }

 private:
  Client& client_;
  uint64_t block_bytes_;
  size_t batch_;
  storage::AlignedBuffer buf_;
  bool registered_ = false;
  Status last_error_;
};

struct FillResult {
  uint64_t blocks = 0;
  uint64_t failed = 0;
  double sec = 0;
};
FillResult Fill(Client& client, const std::vector<uint64_t>& hash_ids,
                uint64_t block_bytes, Progress* progress);

struct OverflowResult {
  uint64_t filler_blocks = 0;
  uint64_t failed = 0;
  uint64_t evicted = 0;  // objects the master evicted meanwhile
  double sec = 0;
};
// Puts filler blocks ("ovf-<i>") until `ratio` x the pool's DRAM has been
// written and eviction has run; stops at 4 x DRAM whatever happens.
OverflowResult Overflow(ReplayCluster& cluster, Client& client,
                        uint64_t block_bytes, double ratio, Progress* progress);

struct SettleResult {
  bool settled = false;
  double sec = 0;
  ClusterSnapshot last;
};
// Waits until no offload and no promotion is in flight, MAIN DRAM is below
// `high_watermark`, and DRAM use, replica counts and evictions did not move
// between two readings 200 ms apart. Gives up after `timeout_sec`.
SettleResult Settle(ReplayCluster& cluster, double high_watermark,
                    double timeout_sec);

// The DRAM-pressure knob (`--ssd_only_share`): which fill blocks to bring
// back into DRAM so that about `ssd_only_share` of them stay SSD-only. A
// seeded choice of round((1 - share) x n) of `hash_ids`, returned in their
// (trace) order; the same for every arm of a run, so arms see the same tiers.
std::vector<uint64_t> RefillSelection(const std::vector<uint64_t>& hash_ids,
                                      double ssd_only_share, uint64_t seed);

struct RefillResult {
  uint64_t blocks = 0;  // blocks put again
  uint64_t failed = 0;
  // Blocks the pool's DRAM keeps below its eviction target, (high watermark
  // - eviction ratio) x pool DRAM: more re-put blocks than this evict the
  // oldest of themselves, and the measured SSD-only share ends above the
  // asked one.
  uint64_t room_blocks = 0;
  double sec = 0;
};
// Upserts the RefillSelection blocks with the same bytes as Fill (first 8
// bytes: the id), in trace order: a fresh DRAM replica, newest in LRU, so
// the filler around it is evicted first.
RefillResult Refill(ReplayCluster& cluster, Client& client,
                    const std::vector<uint64_t>& hash_ids, uint64_t block_bytes,
                    double ssd_only_share, uint64_t seed, double high_watermark,
                    double eviction_ratio, Progress* progress);

struct TierCensus {
  uint64_t memory = 0, ssd_only = 0, processing = 0, absent = 0;
};
TierCensus Census(Client& client, const std::vector<std::string>& keys);

}  // namespace kvpool::replay

#endif  // KVPOOL_REPLAY_PHASES_H_
