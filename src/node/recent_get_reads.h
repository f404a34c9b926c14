// The keys gets have just read from this holder's SSD, with when, so that
// a prefetch promotion coming after its get can tell it came too late.
//
// Why: a prefetch promotion (the exist trigger's or the router's) is worth
// its disk read when its DRAM replica is in place before the get that
// wanted it. Once that get has read the block from the SSD itself, a second
// disk read only stages a copy for later readers, and on a disk the gets
// keep busy it delays the next requests' reads by as much: measured on the
// main job's replay, exist promotions read the disk 24 % more often than
// the gets alone and the engine's TTFT rose accordingly. A read a get has
// kept for the promotion (SharedReads) or one it is still doing
// (InFlightReads) costs no second read and is not affected.
//
// Bounded: at most `capacity` keys (and 2 x capacity notes), the oldest
// forgotten first; an entry older than the window no longer counts.
// Thread-safe.
#ifndef KVPOOL_NODE_RECENT_GET_READS_H_
#define KVPOOL_NODE_RECENT_GET_READS_H_

#include <cstdint>
#include <deque>
#include <string>
#include <string_view>
#include <unordered_map>

#include "common/clock.h"
#include "common/mutex.h"

namespace kvpool {

class RecentGetReads {
 public:
  // window_ms == 0 disables: nothing is recorded, nothing was read.
  RecentGetReads(int64_t window_ms, size_t capacity, const Clock* clock);
  RecentGetReads(const RecentGetReads&) = delete;
  RecentGetReads& operator=(const RecentGetReads&) = delete;

  bool enabled() const { return window_ms_ > 0; }
  // A get read (tenant, key) from the SSD now.
  void Note(std::string_view tenant, std::string_view key);
  // Whether a get read (tenant, key) from the SSD within the window.
  bool ReadRecently(std::string_view tenant, std::string_view key) const;
  // How many gets read (tenant, key) in a row, each within the window of
  // the one before, the last within the window of now; 0 if none.
  uint32_t RecentReads(std::string_view tenant, std::string_view key) const;
  size_t size() const;

 private:
  const int64_t window_ms_;
  const size_t capacity_;
  const Clock* clock_;
  mutable Mutex mu_;
  struct Noted {
    std::string id;
    int64_t ms;
    uint64_t seq;
  };
  struct Last {
    int64_t ms;
    uint64_t seq;    // of the note that set it
    uint32_t reads;  // in a row, each within the window of the one before
  };
  // Key -> its last read; `order_` holds every note in order, a key once per
  // note (a note whose key was noted again later is stale).
  std::unordered_map<std::string, Last> last_ ABSL_GUARDED_BY(mu_);
  std::deque<Noted> order_ ABSL_GUARDED_BY(mu_);
  uint64_t next_seq_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace kvpool

#endif  // KVPOOL_NODE_RECENT_GET_READS_H_
