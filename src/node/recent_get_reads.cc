#include "node/recent_get_reads.h"

#include "node/tenant_key_id.h"

namespace kvpool {

RecentGetReads::RecentGetReads(int64_t window_ms, size_t capacity,
                               const Clock* clock)
    : window_ms_(window_ms), capacity_(capacity), clock_(clock) {}

void RecentGetReads::Note(std::string_view tenant, std::string_view key) {
  if (!enabled()) return;
  const int64_t now = clock_->NowMs();
  std::string id = TenantKeyId(tenant, key);
  MutexLock lock(&mu_);
  const uint64_t seq = next_seq_++;
  auto [cur, fresh] = last_.try_emplace(id, Last{now, seq, 1});
  if (!fresh) {
    const bool streak = now - cur->second.ms <= window_ms_;
    cur->second = Last{now, seq, streak ? cur->second.reads + 1 : 1};
  }
  order_.push_back(Noted{std::move(id), now, seq});
  // Forget what fell out of the window, and the oldest past the capacity.
  // A stale note only goes; its key stays with its later note.
  while (!order_.empty()) {
    const Noted& n = order_.front();
    const bool old = now - n.ms > window_ms_;
    if (!old && last_.size() <= capacity_ && order_.size() <= 2 * capacity_)
      break;
    auto it = last_.find(n.id);
    if (it != last_.end() && it->second.seq == n.seq) last_.erase(it);
    order_.pop_front();
  }
}

bool RecentGetReads::ReadRecently(std::string_view tenant,
                                  std::string_view key) const {
  if (!enabled()) return false;
  const int64_t now = clock_->NowMs();
  MutexLock lock(&mu_);
  auto it = last_.find(TenantKeyId(tenant, key));
  return it != last_.end() && now - it->second.ms <= window_ms_;
}

uint32_t RecentGetReads::RecentReads(std::string_view tenant,
                                     std::string_view key) const {
  if (!enabled()) return 0;
  const int64_t now = clock_->NowMs();
  MutexLock lock(&mu_);
  auto it = last_.find(TenantKeyId(tenant, key));
  if (it == last_.end() || now - it->second.ms > window_ms_) return 0;
  return it->second.reads;
}

size_t RecentGetReads::size() const {
  MutexLock lock(&mu_);
  return last_.size();
}

}  // namespace kvpool
