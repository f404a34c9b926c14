// ClosedSegments: the segments the master keeps closed to new puts after a
// mount, and when each may take puts again. A remounted segment waits out
// the leases an earlier master (or an earlier view of the node) may have
// granted on its ranges; a remounted node that keeps a DRAM directory, or an
// extra segment its node does not serve yet, also waits for a signal
// (ClearAwaiting). It only keeps the record: closing and opening the
// segment in SegmentManager stays with the caller.
//
// Thread-safe (one leaf lock; `is_mounted` is called under it).
#ifndef KVPOOL_MASTER_CLOSED_SEGMENTS_H_
#define KVPOOL_MASTER_CLOSED_SEGMENTS_H_

#include <cstdint>
#include <functional>
#include <unordered_map>
#include <vector>

#include "common/mutex.h"

namespace kvpool {

class ClosedSegments {
 public:
  ClosedSegments() = default;
  ClosedSegments(const ClosedSegments&) = delete;
  ClosedSegments& operator=(const ClosedSegments&) = delete;

  // Records segment `id` as closed until `reopen_at_ms` and, with
  // `awaiting_directory`, until ClearAwaiting(id) as well. Replaces an
  // earlier record of `id`. `unserved`: a fresh segment its node does not
  // serve yet; Unserved(id) says so until ClearAwaiting(id).
  void Add(uint32_t id, int64_t reopen_at_ms, bool awaiting_directory,
           bool unserved = false);
  // Recorded with `unserved` and not yet cleared: the master leaves it out
  // of the pool's listing (Stats), so a client that waits to see a segment
  // can put into it at once.
  bool Unserved(uint32_t id) const;
  // The awaited signal for `id` came (its directory is in, or its node
  // serves it). False when `id` is not recorded (open already, or never
  // closed): nothing changes then.
  bool ClearAwaiting(uint32_t id);
  // Forgets the segments `is_mounted` says are gone, and returns (and
  // forgets) those due to take puts again at `now`: their reopen time has
  // come and nothing is awaited.
  std::vector<uint32_t> TakeDue(
      int64_t now, const std::function<bool(uint32_t)>& is_mounted);
  size_t size() const;

 private:
  struct Entry {
    int64_t reopen_at_ms = 0;
    // A remounted node's directory is not in yet, or an extra segment's
    // node does not serve it yet (OpenExtraSegment).
    bool awaiting_directory = false;
    bool unserved = false;
  };
  mutable Mutex mu_;
  std::unordered_map<uint32_t, Entry> closed_ ABSL_GUARDED_BY(mu_);
};

}  // namespace kvpool

#endif  // KVPOOL_MASTER_CLOSED_SEGMENTS_H_
