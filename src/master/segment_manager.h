// The DRAM segments mounted into the pool and the allocation of ranges in
// them. Owns one SegmentAllocator per segment (each behind its own mutex, so
// puts to different segments do not contend) and the placement strategy
// across segments. Also keeps the "graveyard": ranges whose object is gone
// but whose bytes a reader may still be copying (a live lease) or a writer
// may still be writing (an abandoned put), freed only when that window ends.
// Thread-safe.
#ifndef KVPOOL_MASTER_SEGMENT_MANAGER_H_
#define KVPOOL_MASTER_SEGMENT_MANAGER_H_

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <absl/container/btree_map.h>

#include "common/capability.h"
#include "common/mutex.h"
#include "common/per_thread_cache.h"
#include "kvpool/status.h"
#include "master/segment_allocator.h"

namespace kvpool {

enum class SegmentKind : uint8_t { kMain = 0, kPrefetchBuffer = 1 };

struct SegmentInfo {
  uint32_t id = 0;
  std::string node_id;
  SegmentKind kind = SegmentKind::kMain;
  uint64_t capacity = 0;
  std::string host_id;
  std::string shm_path;
  std::string data_endpoint;
  // Signs capabilities for this segment's ranges (the node's key).
  std::shared_ptr<const cap::Key> cap_key;
  // A further segment the node added while it runs (MountExtraSegment,
  // Mooncake's mount_segment): its memory goes back to its owner at
  // unmount, so nothing is offloaded from it (the node's SSD tier copies
  // only from the node's own segments).
  bool extra = false;
  // Mounted closed until its node says it serves it (OpenExtraSegment), as
  // every extra segment is: MountSegmentRequest.opens_when_served.
  bool opened_by_node = false;
};

// One allocated range.
struct Placement {
  uint32_t segment = 0;
  uint32_t handle = 0;
  uint64_t offset = 0;
};

struct SegmentUsage {
  uint64_t used = 0;
  uint64_t capacity = 0;
  double ratio() const {
    return capacity ? double(used) / double(capacity) : 0.0;
  }
};

struct SegmentSnapshot {
  SegmentInfo info;
  uint64_t used = 0;
};

class SegmentManager {
 public:
  enum class Strategy { kRandom, kFreeRatioFirst };
  explicit SegmentManager(Strategy strategy, uint64_t seed = 42);

  // Assigns a fresh id (ids are never reused, so a stale Placement can never
  // free a range of a newer segment).
  // `closed`: mounted closed (see SetClosed), so no allocation ever sees it
  // open before the caller opens it.
  // INVALID_PARAMS for a capacity of 0 or over kMaxCapacity.
  Result<uint32_t> Mount(SegmentInfo info, bool closed = false);
  // A replica keeps its offset in 48 bits (object_store.h).
  static constexpr uint64_t kMaxCapacity = uint64_t{1} << 48;
  // Once it returns, no allocation places anything in the segment any more,
  // also one that picked it as a candidate before.
  Status Unmount(uint32_t id);
  // Unmounts every segment of a node; returns their ids.
  std::vector<uint32_t> UnmountNode(const std::string& node_id);

  // Allocates up to `count` ranges of `size` bytes on distinct segments of
  // `kind`; segments of `preferred_node` are tried first. Returns fewer (or
  // none) when space is short; the caller decides what is enough.
  std::vector<Placement> Allocate(uint64_t size, int count, SegmentKind kind,
                                  const std::string& preferred_node);
  // As above, segments of earlier nodes in `preferred_nodes` first, and
  // none on a node in `excluded_nodes`.
  std::vector<Placement> Allocate(
      uint64_t size, int count, SegmentKind kind,
      const std::vector<std::string>& preferred_nodes,
      const std::vector<std::string>& excluded_nodes = {});
  // Frees now. A Placement of an unmounted segment is ignored.
  void Free(const Placement& p);
  // Frees when the clock passes `deadline_ms` (see ReleaseDue).
  void FreeAt(const Placement& p, int64_t deadline_ms);
  // Frees every graveyard entry whose deadline has passed; returns how many.
  size_t ReleaseDue(int64_t now_ms);
  size_t graveyard_size() const;

  std::shared_ptr<const SegmentInfo> Info(uint32_t id) const;
  // The kind of a mounted segment, without Info's reference counting (it
  // is asked per event under a shard lock).
  std::optional<SegmentKind> KindOf(uint32_t id) const;
  // The node and kind of a mounted segment into *node_id and *kind (false,
  // and nothing written, if it is not mounted): the same, for the events'
  // holder field; without the lock when this thread asked for the segment
  // before and nothing was unmounted since. *node_id views this thread's
  // cache: valid until the thread's next HolderOf call.
  bool HolderOf(uint32_t id, std::string_view* node_id,
                SegmentKind* kind) const;
  bool IsMounted(uint32_t id) const { return Info(id) != nullptr; }
  SegmentUsage Usage(SegmentKind kind) const;
  // The same, only over the segments of one node.
  SegmentUsage UsageOf(SegmentKind kind, const std::string& node_id) const;
  // Ids of the mounted segments of `kind`.
  std::vector<uint32_t> IdsOfKind(SegmentKind kind) const;
  // Allocates one replica only in segments of `kind` on `node_id`.
  std::optional<Placement> AllocateOn(uint64_t size, SegmentKind kind,
                                      const std::string& node_id);
  // Allocates exactly [offset, offset + size) of segment `id` (a replica
  // re-registered from the node's directory); nullopt if the segment is
  // unknown or the range is not free.
  std::optional<Placement> AllocateAt(uint32_t id, uint64_t offset,
                                      uint64_t size);
  // A closed segment takes no new allocation (Allocate, AllocateOn) and is
  // left out of Usage, so eviction neither counts on its room nor evicts
  // for it; AllocateAt and Free still work. Segments mount open.
  void SetClosed(uint32_t id, bool closed);
  bool IsClosed(uint32_t id) const;
  std::vector<uint32_t> ClosedIds() const;
  // The open segments of `kind`, ascending: those a put can be placed in
  // now.
  std::vector<uint32_t> OpenIds(SegmentKind kind) const;
  // A range the master has let go of but may not reuse yet (its node has
  // still to apply the free): allocated, yet left out of Usage's `used`,
  // since it becomes free without any more eviction. Unhold before freeing.
  void Hold(const Placement& p);
  void Unhold(const Placement& p);
  uint64_t HeldBytes(SegmentKind kind) const;
  // Allocates every free byte of segment `id` (a few ranges at most): a
  // hold that the caller frees, e.g. through FreeAt. Empty if unknown.
  std::vector<Placement> AllocateAllOf(uint32_t id);
  // Largest capacity among mounted segments of `kind` (0 if none).
  uint64_t LargestCapacity(SegmentKind kind) const;
  std::vector<SegmentSnapshot> Snapshot() const;
  size_t segment_count() const;

 private:
  struct Segment {
    explicit Segment(SegmentInfo i)
        : info(std::move(i)), alloc(info.capacity) {}
    const SegmentInfo info;
    Mutex mu;
    SegmentAllocator alloc ABSL_GUARDED_BY(mu);
    std::atomic<uint64_t> used{0};
    std::atomic<bool> closed{false};
    std::atomic<uint64_t> held{0};  // bytes of Hold()
    // Allocate nothing any more.
    bool unmounted ABSL_GUARDED_BY(mu) = false;
    uint64_t counted_used() const {
      const uint64_t u = used.load(), h = held.load();
      return u > h ? u - h : 0;
    }
  };
  std::shared_ptr<Segment> Find(uint32_t id) const;

  const Strategy strategy_;
  mutable SharedMutex mu_;
  // A B-tree: puts walk every segment (placement, the watermark), and its
  // nodes keep them in a few cache lines rather than one node each.
  absl::btree_map<uint32_t, std::shared_ptr<Segment>> segments_
      ABSL_GUARDED_BY(mu_);
  // LargestCapacity by kind, kept at each mount and unmount (every put
  // asks it).
  void UpdateLargestLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::atomic<uint64_t> largest_[2] = {0, 0};
  uint32_t next_id_ ABSL_GUARDED_BY(mu_) = 1;
  // HolderOf's per-thread cache (common/per_thread_cache.h): bumped under
  // the exclusive lock at every unmount, the only time a segment's node and
  // kind can go (ids are never reused).
  const uint64_t cache_owner_ = NewCacheOwnerSerial();
  std::atomic<uint64_t> unmounts_{0};
  Mutex rng_mu_;
  std::mt19937_64 rng_ ABSL_GUARDED_BY(rng_mu_);

  struct Grave {
    int64_t deadline_ms;
    Placement placement;
  };
  mutable Mutex grave_mu_;
  std::vector<Grave> graveyard_ ABSL_GUARDED_BY(grave_mu_);
};

}  // namespace kvpool

#endif  // KVPOOL_MASTER_SEGMENT_MANAGER_H_
