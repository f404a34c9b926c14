// The segments a node serves over its data plane, by the id the master gave
// them. Lookups take a shared lock; mount/unmount an exclusive one.
#ifndef KVPOOL_TRANSPORT_SEGMENT_TABLE_H_
#define KVPOOL_TRANSPORT_SEGMENT_TABLE_H_

#include <cstdint>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <unordered_map>

namespace kvpool {

struct SegmentView {
  uint8_t* base = nullptr;
  uint64_t size = 0;
};

class SegmentTable {
 public:
  void Add(uint64_t segment_id, SegmentView view) {
    std::unique_lock lock(mu_);
    segments_[segment_id] = view;
  }
  void Remove(uint64_t segment_id) {
    std::unique_lock lock(mu_);
    segments_.erase(segment_id);
  }
  void Clear() {
    std::unique_lock lock(mu_);
    segments_.clear();
  }
  std::optional<SegmentView> Find(uint64_t segment_id) const {
    std::shared_lock lock(mu_);
    auto it = segments_.find(segment_id);
    if (it == segments_.end()) return std::nullopt;
    return it->second;
  }
  // Returns a pointer to [offset, offset+length) of the segment, or nullptr
  // if the segment is unknown or the range does not lie inside it (overflow
  // safe).
  uint8_t* Resolve(uint64_t segment_id, uint64_t offset,
                   uint64_t length) const {
    auto v = Find(segment_id);
    if (!v || offset > v->size || length > v->size - offset) return nullptr;
    return v->base + offset;
  }

 private:
  mutable std::shared_mutex mu_;
  std::unordered_map<uint64_t, SegmentView> segments_;
};

}  // namespace kvpool

#endif  // KVPOOL_TRANSPORT_SEGMENT_TABLE_H_
