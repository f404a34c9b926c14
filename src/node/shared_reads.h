// Bytes a get has just read from this holder's SSD, kept for a promotion of
// the same key that is waiting in the holder's queue, so that one disk read
// serves both. Without it, prefetch-on-exist (and the get-side kick) read a
// block twice: the engine's get reads it from the SSD at once (the seed's
// get never waits), and the promotion triggered by the same request reads it
// again later to stage the DRAM replica.
//
// Only keys a queued promotion wants are kept (Want/Unwant), each at most
// once, and the bytes held are bounded by a budget: an offer past it is
// refused and the promotion reads the disk as before. An entry remembers the
// SSD record's version it was read from; the promotion uses it only while
// that is still the key's version on disk. Thread-safe.
#ifndef KVPOOL_NODE_SHARED_READS_H_
#define KVPOOL_NODE_SHARED_READS_H_

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>

#include "common/mutex.h"
#include "storage/aligned_buffer.h"

namespace kvpool {

class SharedReads {
 public:
  struct Bytes {
    uint64_t version = 0;  // the SSD record's object version when read
    std::unique_ptr<storage::AlignedBuffer> data;
    uint64_t size = 0;
  };
  struct Stats {
    uint64_t offered = 0;  // gets' reads kept for a queued promotion
    uint64_t refused = 0;  // not kept: over the budget
    uint64_t taken = 0;    // promotions that used a get's bytes
    uint64_t dropped = 0;  // kept, never used (promotion gone first)
    uint64_t held_bytes = 0;
  };

  // max_bytes == 0 disables: nothing is ever wanted or kept.
  explicit SharedReads(uint64_t max_bytes) : max_bytes_(max_bytes) {}
  SharedReads(const SharedReads&) = delete;
  SharedReads& operator=(const SharedReads&) = delete;

  bool enabled() const { return max_bytes_ > 0; }

  // A promotion of (tenant, key) was queued / has finished or was dropped.
  // Wants nest; the last Unwant drops any bytes still kept.
  void Want(std::string_view tenant, std::string_view key);
  void Unwant(std::string_view tenant, std::string_view key);
  bool Wanted(std::string_view tenant, std::string_view key) const;
  // Whether bytes of a get's read are kept for the key now.
  bool HasBytes(std::string_view tenant, std::string_view key) const;

  // Keeps a copy of `bytes` (read from record `version`) if a promotion
  // wants the key, nothing is kept for it yet and the budget has room.
  bool Offer(std::string_view tenant, std::string_view key, uint64_t version,
             std::span<const uint8_t> bytes);
  // The kept bytes of the key (moved out), or nullopt-like empty Bytes.
  Bytes Take(std::string_view tenant, std::string_view key);

  Stats stats() const;

 private:
  struct Entry {
    int wants = 0;
    Bytes bytes;  // data == nullptr: nothing kept
  };

  const uint64_t max_bytes_;
  mutable Mutex mu_;
  std::unordered_map<std::string, Entry> entries_ ABSL_GUARDED_BY(mu_);
  Stats stats_ ABSL_GUARDED_BY(mu_);
};

}  // namespace kvpool

#endif  // KVPOOL_NODE_SHARED_READS_H_
