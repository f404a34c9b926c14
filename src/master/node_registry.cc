#include "master/node_registry.h"

#include <algorithm>
#include <chrono>

namespace kvpool {

uint32_t NodeRegistry::Register(const std::string& node_id,
                                const std::string& data_endpoint,
                                const std::string& host_id, bool ssd_enabled,
                                bool pulls_promotions,
                                bool keeps_dram_directory,
                                std::shared_ptr<const cap::Key> cap_key) {
  MutexLock lock(&mu_);
  auto info = std::make_shared<NodeInfo>();
  info->cap_key = std::move(cap_key);
  info->node_id = node_id;
  info->data_endpoint = data_endpoint;
  info->host_id = host_id;
  info->ssd_enabled = ssd_enabled;
  info->pulls_promotions = pulls_promotions;
  info->keeps_dram_directory = keeps_dram_directory;
  auto it = by_id_.find(node_id);
  if (it != by_id_.end()) {
    Entry& e = nodes_[it->second];
    info->index = it->second;
    // A node that mounts a second segment keeps one identity; SSD ability
    // sticks once declared.
    info->ssd_enabled = ssd_enabled || e.info->ssd_enabled;
    if (!info->cap_key) info->cap_key = e.info->cap_key;
    e.info = info;
    e.last_seen_ms = liveness_.Now();
    if (e.unreachable) {
      e.unreachable = false;
      --unreachable_;
    }
    return it->second;
  }
  info->index = next_index_++;
  by_id_[node_id] = info->index;
  Entry& e = nodes_[info->index];
  e.info = info;
  e.last_seen_ms = liveness_.Now();
  return info->index;
}

bool NodeRegistry::Touch(const std::string& node_id) {
  MutexLock lock(&mu_);
  auto it = by_id_.find(node_id);
  if (it == by_id_.end()) return false;
  Entry& e = nodes_[it->second];
  e.last_seen_ms = liveness_.Now();
  if (e.unreachable) {
    e.unreachable = false;
    --unreachable_;
  }
  return true;
}

void NodeRegistry::ReportUnreachable(const std::string& node_id) {
  MutexLock lock(&mu_);
  auto it = by_id_.find(node_id);
  if (it == by_id_.end()) return;
  Entry& e = nodes_[it->second];
  if (!e.unreachable) {
    e.unreachable = true;
    ++unreachable_;
  }
}

void NodeRegistry::OffloadFailed(uint32_t index, int64_t now_ms) {
  MutexLock lock(&mu_);
  auto it = nodes_.find(index);
  if (it == nodes_.end()) return;
  Entry& e = it->second;
  if (now_ms < e.offload_retry_at_ms) return;  // one step per backoff
  e.offload_backoff_ms =
      e.offload_backoff_ms == 0
          ? 1000
          : std::min<int64_t>(2 * e.offload_backoff_ms, 30000);
  e.offload_retry_at_ms = now_ms + e.offload_backoff_ms;
}

void NodeRegistry::OffloadSucceeded(uint32_t index) {
  MutexLock lock(&mu_);
  auto it = nodes_.find(index);
  if (it == nodes_.end()) return;
  it->second.offload_backoff_ms = 0;
  it->second.offload_retry_at_ms = 0;
}

bool NodeRegistry::OffloadPaused(uint32_t index, int64_t now_ms) const {
  MutexLock lock(&mu_);
  auto it = nodes_.find(index);
  return it != nodes_.end() && now_ms < it->second.offload_retry_at_ms;
}

std::vector<std::string> NodeRegistry::Unreachable() const {
  MutexLock lock(&mu_);
  std::vector<std::string> out;
  if (unreachable_ == 0) return out;  // the common case: no scan
  for (const auto& [idx, e] : nodes_) {
    if (e.unreachable) out.push_back(e.info->node_id);
  }
  return out;
}

std::optional<uint32_t> NodeRegistry::IndexOf(
    const std::string& node_id) const {
  MutexLock lock(&mu_);
  auto it = by_id_.find(node_id);
  if (it == by_id_.end()) return std::nullopt;
  return it->second;
}

std::shared_ptr<const NodeInfo> NodeRegistry::Remove(
    const std::string& node_id) {
  std::shared_ptr<const NodeInfo> info;
  {
    MutexLock lock(&mu_);
    auto id = by_id_.find(node_id);
    if (id == by_id_.end()) return nullptr;
    auto it = nodes_.find(id->second);
    info = it->second.info;
    offload_queued_ -= it->second.offloads.size();
    dram_events_queued_ -= it->second.dram_events.size();
    if (it->second.unreachable) --unreachable_;
    nodes_.erase(it);
    by_id_.erase(id);
  }
  cv_.SignalAll();  // a poll of the old process returns
  return info;
}

std::shared_ptr<const NodeInfo> NodeRegistry::Info(uint32_t index) const {
  MutexLock lock(&mu_);
  auto it = nodes_.find(index);
  return it == nodes_.end() ? nullptr : it->second.info;
}

std::vector<std::shared_ptr<const NodeInfo>> NodeRegistry::ExpireSilent(
    int64_t ttl_ms) {
  std::vector<std::shared_ptr<const NodeInfo>> dead;
  {
    MutexLock lock(&mu_);
    const int64_t now = liveness_.Tick();
    for (auto it = nodes_.begin(); it != nodes_.end();) {
      if (now - it->second.last_seen_ms > ttl_ms) {
        dead.push_back(it->second.info);
        offload_queued_ -= it->second.offloads.size();
        // Its segments are unmounted: the held ranges go with them.
        dram_events_queued_ -= it->second.dram_events.size();
        if (it->second.unreachable) --unreachable_;
        by_id_.erase(it->second.info->node_id);
        it = nodes_.erase(it);
      } else {
        ++it;
      }
    }
  }
  cv_.SignalAll();  // a poll of a dead node returns (and finds it unknown)
  return dead;
}

bool NodeRegistry::AppendDramEvent(uint32_t index, DramEventMsg ev,
                                   const Placement* held,
                                   int64_t not_before_ms) {
  {
    MutexLock lock(&mu_);
    auto it = nodes_.find(index);
    if (it == nodes_.end() || !it->second.info->keeps_dram_directory)
      return false;
    Entry& e = it->second;
    ev.seq = e.dram_next_seq++;
    if (held) e.dram_frees.push_back({ev.seq, DueFree{*held, not_before_ms}});
    e.dram_events.push_back(std::move(ev));
    ++dram_events_queued_;
  }
  cv_.SignalAll();
  return true;
}

void NodeRegistry::PushDramPlaced(uint32_t index, DramEventMsg ev) {
  ev.placed = true;
  AppendDramEvent(index, std::move(ev), nullptr, 0);
}

bool NodeRegistry::PushDramFreed(uint32_t index, const Placement& p,
                                 int64_t not_before_ms) {
  DramEventMsg ev;
  ev.segment = p.segment;
  ev.offset = p.offset;
  return AppendDramEvent(index, std::move(ev), &p, not_before_ms);
}

size_t NodeRegistry::AckDram(
    const std::string& node_id, uint64_t acked_seq,
    const std::function<void(const DueFree&)>& release) {
  size_t due = 0;
  MutexLock lock(&mu_);
  auto id = by_id_.find(node_id);
  if (id == by_id_.end()) return due;
  Entry& e = nodes_[id->second];
  if (!e.info->keeps_dram_directory) return due;
  // An ack beyond what was issued is from an earlier registration: ignore.
  if (acked_seq >= e.dram_next_seq) return due;
  const bool advanced = acked_seq > e.dram_acked;
  if (advanced) e.dram_acked = acked_seq;
  // Released before the events leave the queue (under the same lock), so
  // "nothing queued" means "every acknowledged range is free again".
  while (!e.dram_frees.empty() && e.dram_frees.front().seq <= e.dram_acked) {
    release(e.dram_frees.front().free);
    e.dram_frees.pop_front();
    ++due;
  }
  while (!e.dram_events.empty() && e.dram_events.front().seq <= e.dram_acked) {
    e.dram_events.pop_front();
    --dram_events_queued_;
  }
  // A hand-over the node never applied (the reply was lost): send again.
  if (acked_seq < e.dram_sent) e.dram_sent = e.dram_acked;
  if (advanced) cv_.SignalAll();  // removes waiting for this node
  return due;
}

bool NodeRegistry::PushDiskDropEvent(uint32_t index, const std::string& tenant,
                                     const std::string& key, uint64_t version) {
  DramEventMsg ev;
  ev.disk_drop = true;
  ev.tenant = tenant;
  ev.key = key;
  ev.version = version;
  return AppendDramEvent(index, std::move(ev), nullptr, 0);
}

uint64_t NodeRegistry::LastDramSeq(uint32_t index) const {
  MutexLock lock(&mu_);
  auto it = nodes_.find(index);
  if (it == nodes_.end() || !it->second.info->keeps_dram_directory) return 0;
  return it->second.dram_next_seq - 1;
}

bool NodeRegistry::WaitDramAcked(
    const std::vector<std::pair<uint32_t, uint64_t>>& want,
    int64_t timeout_ms) {
  MutexLock lock(&mu_);
  // As wait_for with a predicate: re-check after every wake, and once more
  // when the time has run out.
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (!waking_ && !DramAckedLocked(want)) {
    if (!cv_.WaitUntil(&mu_, deadline)) return waking_ || DramAckedLocked(want);
  }
  return true;
}

bool NodeRegistry::DramAckedLocked(
    const std::vector<std::pair<uint32_t, uint64_t>>& want) const {
  for (const auto& [index, seq] : want) {
    auto it = nodes_.find(index);
    if (it != nodes_.end() && it->second.dram_acked < seq) return false;
  }
  return true;
}

size_t NodeRegistry::dram_events_queued() const {
  MutexLock lock(&mu_);
  return dram_events_queued_;
}

bool NodeRegistry::PushOffload(uint32_t index, OffloadTaskMsg task) {
  {
    MutexLock lock(&mu_);
    auto it = nodes_.find(index);
    if (it == nodes_.end()) return false;
    it->second.offloads.push_back(std::move(task));
    ++offload_queued_;
  }
  cv_.SignalAll();
  return true;
}

void NodeRegistry::PushDiskDrop(uint32_t index, DiskDropMsg drop) {
  {
    MutexLock lock(&mu_);
    auto it = nodes_.find(index);
    if (it == nodes_.end()) return;  // gone: its SSD re-registers on return
    it->second.drops.push_back(std::move(drop));
  }
  cv_.SignalAll();
}

bool NodeRegistry::PushPromotion(uint32_t index, PromotionTaskMsg task) {
  {
    MutexLock lock(&mu_);
    auto it = nodes_.find(index);
    if (it == nodes_.end()) return false;
    const int64_t deadline = task.deadline_ms;
    it->second.promotions.Push(std::move(task), deadline);
  }
  cv_.SignalAll();
  return true;
}

void NodeRegistry::TakeTasks(const std::string& node_id, int64_t wait_ms,
                             size_t max_offload, size_t max_promotion,
                             NodeTasks* out, bool room_stated) {
  MutexLock lock(&mu_);
  // The poll belongs to the process that sent it: bound to the index its
  // name has now. A process started again under the same name gets a new
  // index (indices are never reused), so a poll the dead process left held
  // here can never take the new one's tasks into a reply nobody reads.
  auto id = by_id_.find(node_id);
  if (id == by_id_.end()) return;
  const uint32_t index = id->second;
  nodes_[index].open_room = 0;  // this beat states the room now
  // What the beat may take: its own room, or what a pull left open since.
  auto promotion_room = [&](const Entry& e)
                            ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) -> size_t {
    if (e.info->pulls_promotions) return 0;
    return room_stated ? std::max(max_promotion, e.open_room) : max_promotion;
  };
  auto has_work = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) -> Entry* {
    auto it = nodes_.find(index);
    if (it == nodes_.end()) return nullptr;
    Entry& e = it->second;
    bool work =
        (max_offload > 0 && !e.offloads.empty()) ||
        (promotion_room(e) > 0 && !e.promotions.empty()) || !e.drops.empty() ||
        (!e.dram_events.empty() && e.dram_events.back().seq > e.dram_sent);
    return work ? &e : nullptr;
  };
  if (wait_ms > 0) {
    // Until there is work, the node is gone or a shutdown wakes every poll;
    // has_work() below looks again once the time has run out.
    const auto deadline =
        std::chrono::steady_clock::now() + std::chrono::milliseconds(wait_ms);
    ++held_polls_;
    while (!waking_ && has_work() == nullptr && nodes_.count(index)) {
      if (!cv_.WaitUntil(&mu_, deadline)) break;
    }
    --held_polls_;
  }
  Entry* e = has_work();
  if (!e) return;
  while (!e->drops.empty()) {
    out->disk_drops.push_back(std::move(e->drops.front()));
    e->drops.pop_front();
  }
  for (const auto& ev : e->dram_events) {
    if (ev.seq <= e->dram_sent) continue;
    if (out->dram_events.size() >= kMaxDramEventsPerTake) break;
    out->dram_events.push_back(ev);
    e->dram_sent = ev.seq;
  }
  while (max_offload-- > 0 && !e->offloads.empty()) {
    out->offloads.push_back(std::move(e->offloads.front()));
    e->offloads.pop_front();
    --offload_queued_;
  }
  const size_t room = promotion_room(*e);
  for (size_t k = 0; k < room && !e->promotions.empty(); ++k)
    out->promotions.push_back(e->promotions.Pop());
  e->open_room = 0;  // the node states its room again with its next beat
}

bool NodeRegistry::TakePromotions(const std::string& node_id, size_t max,
                                  std::vector<PromotionTaskMsg>* out) {
  MutexLock lock(&mu_);
  auto id = by_id_.find(node_id);
  if (id == by_id_.end()) return false;
  Entry& e = nodes_[id->second];
  e.last_seen_ms = liveness_.Now();
  size_t taken = 0;
  for (; taken < max && !e.promotions.empty(); ++taken)
    out->push_back(e.promotions.Pop());
  e.open_room = max - taken;
  return true;
}

size_t NodeRegistry::held_polls() const {
  MutexLock lock(&mu_);
  return held_polls_;
}

size_t NodeRegistry::offload_queued() const {
  MutexLock lock(&mu_);
  return offload_queued_;
}

void NodeRegistry::WakeAll() {
  {
    MutexLock lock(&mu_);
    waking_ = true;
  }
  cv_.SignalAll();
}

}  // namespace kvpool
