// The segments a node serves over its data plane, by the id the master gave
// them. Lookups take a shared lock; mount/unmount an exclusive one.
//
// A lookup may pin the segment it resolves (Pins): RemoveAndWait then
// returns only once every pin is released, so a segment whose memory goes
// back to its owner (Mooncake's unmount_segment) is never touched by a
// request that resolved it before. The data server pins for the life of
// one request; a plain Resolve pins nothing.
#ifndef KVPOOL_TRANSPORT_SEGMENT_TABLE_H_
#define KVPOOL_TRANSPORT_SEGMENT_TABLE_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <unordered_map>
#include <utility>
#include <vector>

namespace kvpool {

struct SegmentView {
  uint8_t* base = nullptr;
  uint64_t size = 0;
};

class SegmentTable {
 private:
  struct Entry {
    explicit Entry(SegmentView v) : view(v) {}
    const SegmentView view;
    std::atomic<uint64_t> pins{0};
    std::atomic<bool> retiring{false};  // RemoveAndWait is waiting
    std::mutex mu;
    std::condition_variable released;
  };

 public:
  // The segments one request resolved: they stay in use (RemoveAndWait
  // waits) until Release or destruction. Not thread-safe; one per request.
  class Pins {
   public:
    Pins() = default;
    ~Pins() { Release(); }
    Pins(const Pins&) = delete;
    Pins& operator=(const Pins&) = delete;
    void Release() {
      for (auto& e : held_) {
        // The last pin of a segment being removed wakes the remover; the
        // entry stays alive (held_) until after the notify.
        if (e->pins.fetch_sub(1) == 1 && e->retiring.load()) {
          std::lock_guard<std::mutex> lock(e->mu);
          e->released.notify_all();
        }
      }
      held_.clear();
    }
    bool empty() const { return held_.empty(); }

   private:
    friend class SegmentTable;
    std::vector<std::shared_ptr<Entry>> held_;
  };

  void Add(uint64_t segment_id, SegmentView view) {
    std::unique_lock lock(mu_);
    segments_[segment_id] = std::make_shared<Entry>(view);
  }
  // Stops serving the segment; requests in flight may still be copying (use
  // RemoveAndWait before its memory is given back).
  void Remove(uint64_t segment_id) {
    std::unique_lock lock(mu_);
    segments_.erase(segment_id);
  }
  // Stops serving the segment and returns once no Pins holds it: from then
  // on nothing resolved through this table touches its memory. Bounded by
  // the requests in flight on it (a stalled peer's until its connection
  // is closed).
  void RemoveAndWait(uint64_t segment_id) {
    std::shared_ptr<Entry> e;
    {
      std::unique_lock lock(mu_);
      auto it = segments_.find(segment_id);
      if (it == segments_.end()) return;
      e = std::move(it->second);
      segments_.erase(it);
    }
    // No new pin can be taken (it is out of the map); wait for the old ones.
    e->retiring.store(true);
    std::unique_lock<std::mutex> lock(e->mu);
    e->released.wait(lock, [&] { return e->pins.load() == 0; });
  }
  void Clear() {
    std::unique_lock lock(mu_);
    segments_.clear();
  }
  std::optional<SegmentView> Find(uint64_t segment_id) const {
    std::shared_lock lock(mu_);
    auto it = segments_.find(segment_id);
    if (it == segments_.end()) return std::nullopt;
    return it->second->view;
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
  // The same, and pins the segment in `pins` (once per run of lookups of
  // one segment) when the range resolves.
  uint8_t* Resolve(uint64_t segment_id, uint64_t offset, uint64_t length,
                   Pins* pins) const {
    std::shared_lock lock(mu_);
    auto it = segments_.find(segment_id);
    if (it == segments_.end()) return nullptr;
    const SegmentView& v = it->second->view;
    if (offset > v.size || length > v.size - offset) return nullptr;
    if (pins->held_.empty() || pins->held_.back() != it->second) {
      it->second->pins.fetch_add(1);
      pins->held_.push_back(it->second);
    }
    return v.base + offset;
  }

 private:
  mutable std::shared_mutex mu_;
  std::unordered_map<uint64_t, std::shared_ptr<Entry>> segments_;
};

}  // namespace kvpool

#endif  // KVPOOL_TRANSPORT_SEGMENT_TABLE_H_
