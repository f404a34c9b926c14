#include "master/closed_segments.h"

namespace kvpool {

void ClosedSegments::Add(uint32_t id, int64_t reopen_at_ms,
                         bool awaiting_directory, bool unserved) {
  MutexLock lock(&mu_);
  closed_[id] = Entry{reopen_at_ms, awaiting_directory, unserved};
}

bool ClosedSegments::Unserved(uint32_t id) const {
  MutexLock lock(&mu_);
  auto it = closed_.find(id);
  return it != closed_.end() && it->second.unserved;
}

bool ClosedSegments::ClearAwaiting(uint32_t id) {
  MutexLock lock(&mu_);
  auto it = closed_.find(id);
  if (it == closed_.end()) return false;
  it->second.awaiting_directory = false;
  it->second.unserved = false;
  return true;
}

std::vector<uint32_t> ClosedSegments::TakeDue(
    int64_t now, const std::function<bool(uint32_t)>& is_mounted) {
  std::vector<uint32_t> open;
  MutexLock lock(&mu_);
  for (auto it = closed_.begin(); it != closed_.end();) {
    const bool gone = !is_mounted(it->first);
    if (gone ||
        (now >= it->second.reopen_at_ms && !it->second.awaiting_directory)) {
      if (!gone) open.push_back(it->first);
      it = closed_.erase(it);
    } else {
      ++it;
    }
  }
  return open;
}

size_t ClosedSegments::size() const {
  MutexLock lock(&mu_);
  return closed_.size();
}

}  // namespace kvpool
