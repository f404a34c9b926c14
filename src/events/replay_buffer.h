// ReplayBuffer: the last `capacity` published batches by sequence number,
// for subscribers that missed some (the replay socket answers "from N").
// Bounded by batches, not bytes: memory is at most capacity x the largest
// batch (kMaxBatchEvents events). Used by the publisher's thread only, so
// not locked.
#ifndef KVPOOL_EVENTS_REPLAY_BUFFER_H_
#define KVPOOL_EVENTS_REPLAY_BUFFER_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

namespace kvpool::events {

class ReplayBuffer {
 public:
  struct Entry {
    uint64_t seq = 0;
    std::shared_ptr<const std::string> payload;
  };

  explicit ReplayBuffer(size_t capacity) : capacity_(capacity) {}

  // Sequence numbers only grow (gaps allowed: a dropped-events gap is a
  // number never published). The oldest entry goes when full.
  void Add(uint64_t seq, std::shared_ptr<const std::string> payload);

  // Every buffered batch with seq >= from, oldest first (empty when `from`
  // is past the newest; the oldest buffered onwards when before it).
  std::vector<Entry> From(uint64_t from) const;

  size_t size() const { return entries_.size(); }
  // Lowest buffered sequence number; meaningless when empty.
  uint64_t oldest() const { return entries_.front().seq; }

 private:
  const size_t capacity_;
  std::deque<Entry> entries_;
};

}  // namespace kvpool::events

#endif  // KVPOOL_EVENTS_REPLAY_BUFFER_H_
