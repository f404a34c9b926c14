#include "transport/write_order.h"

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <utility>

namespace kvpool {

WriteOrder::Pass& WriteOrder::Pass::operator=(Pass&& other) noexcept {
  if (this != &other) {
    Release();
    order_ = std::exchange(other.order_, nullptr);
    seq_ = std::exchange(other.seq_, 0);
    blocked_ = std::exchange(other.blocked_, false);
  }
  return *this;
}

void WriteOrder::Pass::Release() {
  if (order_ != nullptr) order_->Release(seq_);
  order_ = nullptr;
  seq_ = 0;
  blocked_ = false;
}

bool WriteOrder::NewerOverlaps(const Segment& s, uint64_t offset, uint64_t end,
                               uint64_t generation) {
  auto it = s.intervals.upper_bound(offset);
  if (it != s.intervals.begin() && std::prev(it)->second.end > offset) --it;
  for (; it != s.intervals.end() && it->first < end; ++it) {
    if (it->second.generation > generation) return true;
  }
  return false;
}

void WriteOrder::Record(Segment* s, uint64_t offset, uint64_t end,
                        uint64_t generation) {
  auto& m = s->intervals;
  auto it = m.upper_bound(offset);
  if (it != m.begin() && std::prev(it)->second.end > offset) --it;
  // What the write covers is replaced; the parts of older intervals that
  // stick out on either side are kept.
  bool has_left = false, has_right = false;
  std::pair<uint64_t, Interval> left, right;
  while (it != m.end() && it->first < end) {
    if (it->first < offset) {
      has_left = true;
      left = {it->first, Interval{offset, it->second.generation}};
    }
    if (it->second.end > end) {
      has_right = true;
      right = {end, Interval{it->second.end, it->second.generation}};
    }
    it = m.erase(it);
  }
  if (has_left) m.insert(left);
  if (has_right) m.insert(right);
  // Touching intervals of the same generation (one grant written in
  // pieces) become one.
  uint64_t start = offset, stop = end;
  auto next = m.find(end);
  if (next != m.end() && next->second.generation == generation) {
    stop = next->second.end;
    m.erase(next);
  }
  auto after = m.lower_bound(offset);
  if (after != m.begin()) {
    auto before = std::prev(after);
    if (before->second.end == offset &&
        before->second.generation == generation) {
      start = before->first;
      m.erase(before);
    }
  }
  m.emplace(start, Interval{stop, generation});
}

WriteOrder::Pass WriteOrder::Admit(uint64_t epoch, std::span<Op> ops) {
  Pass pass;
  std::lock_guard lock(mu_);
  // The first write under a new key may come before Rekey does.
  if (epoch > epoch_) ForgetRecords(epoch);
  const uint64_t seq = next_seq_++;
  std::vector<uint64_t> blockers;
  std::vector<uint64_t> touched;  // segments this pass is in flight in
  std::vector<std::pair<Segment*, InFlight>> entries;
  for (Op& op : ops) {
    op.admitted = true;
    if (op.generation == 0 || epoch < epoch_) continue;  // not ordered
    Segment& s = segments_[op.segment_id];
    const uint64_t grant_end = op.grant_length > UINT64_MAX - op.grant_offset
                                   ? UINT64_MAX
                                   : op.grant_offset + op.grant_length;
    if (NewerOverlaps(s, op.grant_offset, grant_end, op.generation)) {
      op.admitted = false;
      continue;
    }
    Record(&s, op.grant_offset, grant_end, op.generation);
    // What waits is only what the bytes being copied overlap.
    const uint64_t end = op.offset + op.length;
    for (const InFlight& f : s.in_flight) {
      if (f.generation < op.generation && f.offset < end && op.offset < f.end)
        blockers.push_back(f.seq);
    }
    entries.emplace_back(&s, InFlight{seq, op.offset, end, op.generation});
    if (std::find(touched.begin(), touched.end(), op.segment_id) ==
        touched.end()) {
      touched.push_back(op.segment_id);
    }
  }
  if (entries.empty()) return pass;
  // Added after the loop: the ops of one request never wait for each other.
  for (auto& [s, f] : entries) s->in_flight.push_back(f);
  passes_.emplace(seq, std::move(touched));
  pass.order_ = this;
  pass.seq_ = seq;
  if (!blockers.empty()) {
    std::sort(blockers.begin(), blockers.end());
    blockers.erase(std::unique(blockers.begin(), blockers.end()),
                   blockers.end());
    blockers_.emplace(seq, std::move(blockers));
    pass.blocked_ = true;
  }
  return pass;
}

bool WriteOrder::Wait(const Pass& pass, std::function<void()> resume) {
  std::lock_guard lock(mu_);
  if (pass.order_ != this || blockers_.count(pass.seq_) == 0) return false;
  waiters_[pass.seq_] = std::move(resume);
  return true;
}

void WriteOrder::Release(uint64_t seq) {
  std::vector<std::function<void()>> ready;
  {
    std::lock_guard lock(mu_);
    auto p = passes_.find(seq);
    if (p == passes_.end()) return;
    for (uint64_t id : p->second) {
      auto s = segments_.find(id);
      if (s == segments_.end()) continue;
      auto& v = s->second.in_flight;
      v.erase(std::remove_if(v.begin(), v.end(),
                             [seq](const InFlight& f) { return f.seq == seq; }),
              v.end());
      // A segment forgotten at a key change while this pass was in flight.
      if (v.empty() && s->second.intervals.empty()) segments_.erase(s);
    }
    passes_.erase(p);
    // Normally empty: a pass ends before its blockers only when its session
    // is torn down.
    blockers_.erase(seq);
    waiters_.erase(seq);
    for (auto it = blockers_.begin(); it != blockers_.end();) {
      auto& b = it->second;
      b.erase(std::remove(b.begin(), b.end(), seq), b.end());
      if (!b.empty()) {
        ++it;
        continue;
      }
      if (auto w = waiters_.find(it->first); w != waiters_.end()) {
        ready.push_back(std::move(w->second));
        waiters_.erase(w);
      }
      it = blockers_.erase(it);
    }
  }
  for (auto& resume : ready) resume();
}

void WriteOrder::ForgetRecords(uint64_t epoch) {
  for (auto it = segments_.begin(); it != segments_.end();) {
    it->second.intervals.clear();
    it = it->second.in_flight.empty() ? segments_.erase(it) : std::next(it);
  }
  epoch_ = epoch;
}

void WriteOrder::Rekey(uint64_t epoch) {
  std::lock_guard lock(mu_);
  if (epoch > epoch_) ForgetRecords(epoch);
}

void WriteOrder::DropWaiters() {
  std::unordered_map<uint64_t, std::function<void()>> dropped;
  {
    std::lock_guard lock(mu_);
    dropped.swap(waiters_);
  }
}

size_t WriteOrder::interval_count() const {
  std::lock_guard lock(mu_);
  size_t n = 0;
  for (const auto& [id, s] : segments_) n += s.intervals.size();
  return n;
}

}  // namespace kvpool
