#include "master/segment_manager.h"

#include <algorithm>
#include <utility>

namespace kvpool {

SegmentManager::SegmentManager(Strategy strategy, uint64_t seed)
    : strategy_(strategy), rng_(seed) {}

Result<uint32_t> SegmentManager::Mount(SegmentInfo info, bool closed) {
  if (info.capacity == 0) {
    return Status(ErrorCode::INVALID_PARAMS, "segment size must be > 0");
  }
  if (info.capacity > kMaxCapacity) {
    return Status(ErrorCode::INVALID_PARAMS, "segment size over 256 TiB");
  }
  if (info.node_id.empty()) {
    return Status(ErrorCode::INVALID_PARAMS, "segment needs a node id");
  }
  WriterLock lock(&mu_);
  info.id = next_id_++;
  uint32_t id = info.id;
  auto seg = std::make_shared<Segment>(std::move(info));
  seg->closed.store(closed);
  segments_.emplace(id, std::move(seg));
  UpdateLargestLocked();
  return id;
}

void SegmentManager::UpdateLargestLocked() {
  uint64_t most[2] = {0, 0};
  for (const auto& [id, seg] : segments_) {
    uint64_t& m = most[seg->info.kind == SegmentKind::kMain ? 0 : 1];
    m = std::max(m, seg->info.capacity);
  }
  largest_[0].store(most[0]);
  largest_[1].store(most[1]);
}

namespace {
// An allocation may have picked the segment before it left the map: it
// checks this flag under the segment's mutex before placing anything.
template <typename Segment>
void MarkUnmounted(const std::shared_ptr<Segment>& seg) {
  MutexLock lock(&seg->mu);
  seg->unmounted = true;
}
}  // namespace

Status SegmentManager::Unmount(uint32_t id) {
  std::shared_ptr<Segment> seg;
  {
    WriterLock lock(&mu_);
    auto it = segments_.find(id);
    if (it == segments_.end()) {
      return Status(ErrorCode::SEGMENT_NOT_FOUND,
                    "segment " + std::to_string(id));
    }
    seg = std::move(it->second);
    segments_.erase(it);
    unmounts_.fetch_add(1, std::memory_order_release);
    UpdateLargestLocked();
  }
  MarkUnmounted(seg);
  return Status::OK();
}

std::vector<uint32_t> SegmentManager::UnmountNode(const std::string& node_id) {
  std::vector<std::shared_ptr<Segment>> gone;
  std::vector<uint32_t> ids;
  {
    WriterLock lock(&mu_);
    for (auto it = segments_.begin(); it != segments_.end();) {
      if (it->second->info.node_id == node_id) {
        ids.push_back(it->first);
        gone.push_back(std::move(it->second));
        it = segments_.erase(it);
        unmounts_.fetch_add(1, std::memory_order_release);
      } else {
        ++it;
      }
    }
    UpdateLargestLocked();
  }
  for (const auto& seg : gone) MarkUnmounted(seg);
  return ids;
}

std::shared_ptr<SegmentManager::Segment> SegmentManager::Find(
    uint32_t id) const {
  ReaderLock lock(&mu_);
  auto it = segments_.find(id);
  return it == segments_.end() ? nullptr : it->second;
}

std::optional<SegmentKind> SegmentManager::KindOf(uint32_t id) const {
  ReaderLock lock(&mu_);
  auto it = segments_.find(id);
  if (it == segments_.end()) return std::nullopt;
  return it->second->info.kind;
}

bool SegmentManager::HolderOf(uint32_t id, std::string_view* node_id,
                              SegmentKind* kind) const {
  using Cache =
      PerThreadCache<SegmentManager, std::pair<std::string, SegmentKind>>;
  const auto* hit =
      Cache::Find(cache_owner_, unmounts_.load(std::memory_order_acquire), id);
  if (hit == nullptr) {
    ReaderLock lock(&mu_);
    auto it = segments_.find(id);
    if (it == segments_.end()) return false;
    const uint64_t gen = unmounts_.load(std::memory_order_relaxed);
    Cache::Fill(cache_owner_, gen, id,
                {it->second->info.node_id, it->second->info.kind});
    hit = Cache::Find(cache_owner_, gen, id);
  }
  *node_id = hit->first;
  *kind = hit->second;
  return true;
}

std::shared_ptr<const SegmentInfo> SegmentManager::Info(uint32_t id) const {
  auto seg = Find(id);
  if (!seg) return nullptr;
  // Aliasing constructor: shares ownership of the segment, points at its info.
  return std::shared_ptr<const SegmentInfo>(seg, &seg->info);
}

std::vector<Placement> SegmentManager::Allocate(
    uint64_t size, int count, SegmentKind kind,
    const std::string& preferred_node) {
  if (preferred_node.empty())
    return Allocate(size, count, kind, std::vector<std::string>{});
  return Allocate(size, count, kind, std::vector<std::string>{preferred_node});
}

std::vector<Placement> SegmentManager::Allocate(
    uint64_t size, int count, SegmentKind kind,
    const std::vector<std::string>& preferred_nodes,
    const std::vector<std::string>& excluded_nodes) {
  // The order: preferred nodes first (in their order), then the most free
  // share (kFreeRatioFirst) or a shuffle (kRandom), ties in mount order.
  // A put needs the first `count` of that order that take the value, not
  // the whole order: it picks the best remaining candidate and tries it,
  // so a put costs one pass over the segments (a sort of all of them was a
  // third of a put's time at 256 nodes). The segments are reached by
  // pointer under the shared lock, held until the allocation is done (an
  // unmount waits for it; no path takes mu_ under a segment's mutex).
  struct Candidate {
    size_t rank;  // position in preferred_nodes, or its size
    double free_share;
    Segment* seg;
  };
  std::vector<Candidate> candidates;
  std::vector<Placement> out;
  ReaderLock lock(&mu_);
  candidates.reserve(segments_.size());
  for (const auto& [id, seg] : segments_) {
    if (seg->info.kind != kind || seg->info.capacity < size ||
        seg->closed.load())
      continue;
    if (!excluded_nodes.empty() &&
        std::find(excluded_nodes.begin(), excluded_nodes.end(),
                  seg->info.node_id) != excluded_nodes.end())
      continue;
    size_t rank = 0;
    if (!preferred_nodes.empty()) {
      rank = static_cast<size_t>(std::find(preferred_nodes.begin(),
                                           preferred_nodes.end(),
                                           seg->info.node_id) -
                                 preferred_nodes.begin());
    }
    // Reads of `used` are racy by design: placement only needs to be
    // roughly balanced.
    candidates.push_back(
        {rank, 1.0 - double(seg->used.load()) / double(seg->info.capacity),
         seg.get()});
  }
  if (strategy_ == Strategy::kRandom) {
    MutexLock rng_lock(&rng_mu_);
    std::shuffle(candidates.begin(), candidates.end(), rng_);
  }
  const bool by_share = strategy_ != Strategy::kRandom;
  auto before = [by_share](const Candidate& a, const Candidate& b) {
    if (a.rank != b.rank) return a.rank < b.rank;
    return by_share && a.free_share > b.free_share;
  };
  // Selection from the front: candidates[0, next) were tried; the best of
  // the rest (the first of equals, so ties keep their order) moves to
  // `next` by rotation, which keeps the others in order. After a segment
  // refuses (full, fragmented), the rest is sorted once instead, so a
  // pool with little room costs a sort, not a selection per segment.
  bool sorted = false;
  for (size_t next = 0;
       next < candidates.size() && static_cast<int>(out.size()) < count;
       ++next) {
    if (!sorted) {
      size_t best = next;
      for (size_t i = next + 1; i < candidates.size(); ++i) {
        if (before(candidates[i], candidates[best])) best = i;
      }
      std::rotate(candidates.begin() + long(next),
                  candidates.begin() + long(best),
                  candidates.begin() + long(best) + 1);
    }
    Segment* seg = candidates[next].seg;
    MutexLock seg_lock(&seg->mu);
    std::optional<SegmentAllocator::Allocation> a;
    if (!seg->unmounted) a = seg->alloc.Allocate(size);
    if (!a) {
      if (!sorted) {
        std::stable_sort(candidates.begin() + long(next) + 1, candidates.end(),
                         before);
        sorted = true;
      }
      continue;
    }
    seg->used.store(seg->alloc.used());
    out.push_back(Placement{seg->info.id, a->handle, a->offset});
  }
  return out;
}

void SegmentManager::Free(const Placement& p) {
  auto seg = Find(p.segment);
  if (!seg) return;
  MutexLock lock(&seg->mu);
  seg->alloc.Free(p.handle);
  seg->used.store(seg->alloc.used());
}

void SegmentManager::FreeAt(const Placement& p, int64_t deadline_ms) {
  MutexLock lock(&grave_mu_);
  graveyard_.push_back(Grave{deadline_ms, p});
}

size_t SegmentManager::ReleaseDue(int64_t now_ms) {
  std::vector<Placement> due;
  {
    MutexLock lock(&grave_mu_);
    auto it =
        std::partition(graveyard_.begin(), graveyard_.end(),
                       [&](const Grave& g) { return g.deadline_ms > now_ms; });
    for (auto i = it; i != graveyard_.end(); ++i) due.push_back(i->placement);
    graveyard_.erase(it, graveyard_.end());
  }
  for (const auto& p : due) Free(p);
  return due.size();
}

size_t SegmentManager::graveyard_size() const {
  MutexLock lock(&grave_mu_);
  return graveyard_.size();
}

SegmentUsage SegmentManager::Usage(SegmentKind kind) const {
  ReaderLock lock(&mu_);
  SegmentUsage u;
  for (const auto& [id, seg] : segments_) {
    if (seg->info.kind != kind || seg->closed.load()) continue;
    u.used += seg->counted_used();
    u.capacity += seg->info.capacity;
  }
  return u;
}

SegmentUsage SegmentManager::UsageOf(SegmentKind kind,
                                     const std::string& node_id) const {
  ReaderLock lock(&mu_);
  SegmentUsage u;
  for (const auto& [id, seg] : segments_) {
    if (seg->info.kind != kind || seg->info.node_id != node_id ||
        seg->closed.load())
      continue;
    u.used += seg->counted_used();
    u.capacity += seg->info.capacity;
  }
  return u;
}

std::vector<uint32_t> SegmentManager::IdsOfKind(SegmentKind kind) const {
  ReaderLock lock(&mu_);
  std::vector<uint32_t> out;
  for (const auto& [id, seg] : segments_) {
    if (seg->info.kind == kind) out.push_back(id);
  }
  return out;
}

std::vector<Placement> SegmentManager::AllocateAllOf(uint32_t id) {
  std::vector<Placement> out;
  auto seg = Find(id);
  if (!seg) return out;
  MutexLock lock(&seg->mu);
  if (seg->unmounted) return out;
  // The largest free range each time: a fresh segment is one range, and the
  // loop ends when nothing allocatable is left.
  for (uint64_t size; (size = seg->alloc.LargestFree()) > 0;) {
    auto a = seg->alloc.Allocate(size);
    if (!a) break;
    out.push_back(Placement{id, a->handle, a->offset});
  }
  seg->used.store(seg->alloc.used());
  return out;
}

std::optional<Placement> SegmentManager::AllocateAt(uint32_t id,
                                                    uint64_t offset,
                                                    uint64_t size) {
  auto seg = Find(id);
  if (!seg) return std::nullopt;
  MutexLock lock(&seg->mu);
  if (seg->unmounted) return std::nullopt;
  auto a = seg->alloc.AllocateAt(offset, size);
  if (!a) return std::nullopt;
  seg->used.store(seg->alloc.used());
  return Placement{id, a->handle, a->offset};
}

void SegmentManager::SetClosed(uint32_t id, bool closed) {
  if (auto seg = Find(id)) seg->closed.store(closed);
}

void SegmentManager::Hold(const Placement& p) {
  auto seg = Find(p.segment);
  if (!seg) return;
  MutexLock lock(&seg->mu);
  seg->held += seg->alloc.SizeOf(p.handle);
}

void SegmentManager::Unhold(const Placement& p) {
  auto seg = Find(p.segment);
  if (!seg) return;
  MutexLock lock(&seg->mu);
  const uint64_t n = seg->alloc.SizeOf(p.handle);
  seg->held -= std::min<uint64_t>(n, seg->held.load());
}

uint64_t SegmentManager::HeldBytes(SegmentKind kind) const {
  ReaderLock lock(&mu_);
  uint64_t n = 0;
  for (const auto& [id, seg] : segments_) {
    if (seg->info.kind == kind) n += seg->held.load();
  }
  return n;
}

std::vector<uint32_t> SegmentManager::ClosedIds() const {
  ReaderLock lock(&mu_);
  std::vector<uint32_t> out;
  for (const auto& [id, seg] : segments_) {
    if (seg->closed.load()) out.push_back(id);
  }
  return out;
}

std::vector<uint32_t> SegmentManager::OpenIds(SegmentKind kind) const {
  ReaderLock lock(&mu_);
  std::vector<uint32_t> out;
  for (const auto& [id, seg] : segments_) {
    if (seg->info.kind == kind && !seg->closed.load()) out.push_back(id);
  }
  return out;
}

bool SegmentManager::IsClosed(uint32_t id) const {
  auto seg = Find(id);
  return seg && seg->closed.load();
}

std::optional<Placement> SegmentManager::AllocateOn(
    uint64_t size, SegmentKind kind, const std::string& node_id) {
  std::vector<std::shared_ptr<Segment>> candidates;
  {
    ReaderLock lock(&mu_);
    for (const auto& [id, seg] : segments_) {
      if (seg->info.kind == kind && seg->info.node_id == node_id &&
          seg->info.capacity >= size && !seg->closed.load())
        candidates.push_back(seg);
    }
  }
  for (const auto& seg : candidates) {
    MutexLock lock(&seg->mu);
    if (seg->unmounted) continue;
    auto a = seg->alloc.Allocate(size);
    if (!a) continue;
    seg->used.store(seg->alloc.used());
    return Placement{seg->info.id, a->handle, a->offset};
  }
  return std::nullopt;
}

uint64_t SegmentManager::LargestCapacity(SegmentKind kind) const {
  return largest_[kind == SegmentKind::kMain ? 0 : 1].load();
}

std::vector<SegmentSnapshot> SegmentManager::Snapshot() const {
  ReaderLock lock(&mu_);
  std::vector<SegmentSnapshot> out;
  for (const auto& [id, seg] : segments_) {
    out.push_back(SegmentSnapshot{seg->info, seg->used.load()});
  }
  return out;
}

size_t SegmentManager::segment_count() const {
  ReaderLock lock(&mu_);
  return segments_.size();
}

}  // namespace kvpool
