#include "client/prefetch_throttle.h"

#include <functional>

namespace kvpool {

PrefetchThrottle::PrefetchThrottle(PrefetchThrottleConfig config,
                                   const Clock* clock)
    : config_(config), clock_(clock) {}

PrefetchThrottle::Shard& PrefetchThrottle::ShardOf(const std::string& key) {
  return shards_[std::hash<std::string>()(key) % kShards];
}

bool PrefetchThrottle::Expired(const Entry& e, int64_t now) const {
  int64_t window = e.state == PrefetchState::kFailed ? config_.cooldown_ms
                                                     : config_.dedup_ttl_ms;
  return now - e.since_ms >= window;
}

std::vector<std::string> PrefetchThrottle::Reserve(
    const std::vector<std::string>& keys, bool ignore_cooldown) {
  std::vector<std::string> out;
  const int64_t now = clock_->NowMs();
  if (!ignore_cooldown &&
      now < cooldown_until_ms_.load(std::memory_order_relaxed)) {
    cooldown_skips_ += keys.size();
    return out;
  }
  out.reserve(keys.size());
  for (const auto& k : keys) {
    if (config_.dedup_ttl_ms <= 0) {  // dedup disabled
      out.push_back(k);
      continue;
    }
    Shard& sh = ShardOf(k);
    MutexLock lock(&sh.mu);
    auto it = sh.entries.find(k);
    if (it != sh.entries.end() && !Expired(it->second, now)) {
      ++dedup_hits_;
      continue;
    }
    if (it != sh.entries.end()) {
      it->second = Entry{PrefetchState::kTriggered, now};
    } else {
      // Amortised sweep: look at a few entries per insert and drop the expired,
      // so the table tracks the live window, not every key ever probed.
      int budget = 8;
      for (auto e = sh.entries.begin(); e != sh.entries.end() && budget > 0;
           --budget) {
        e = Expired(e->second, now) ? sh.entries.erase(e) : std::next(e);
      }
      sh.entries.emplace(k, Entry{PrefetchState::kTriggered, now});
    }
    out.push_back(k);
  }
  return out;
}

void PrefetchThrottle::Mark(const std::string& key, PrefetchState state) {
  // With dedup off Reserve never reads an entry, failed ones included: keep
  // none, or every failed key would stay in the table for good.
  if (config_.dedup_ttl_ms <= 0) return;
  Shard& sh = ShardOf(key);
  MutexLock lock(&sh.mu);
  sh.entries[key] = Entry{state, clock_->NowMs()};
}

void PrefetchThrottle::EnterCooldown() {
  if (config_.cooldown_ms <= 0) return;
  cooldown_until_ms_ = clock_->NowMs() + config_.cooldown_ms;
  ++cooldown_entries_;
}

bool PrefetchThrottle::InCooldown() const {
  return clock_->NowMs() < cooldown_until_ms_.load(std::memory_order_relaxed);
}

size_t PrefetchThrottle::size() const {
  size_t n = 0;
  for (const auto& sh : shards_) {
    MutexLock lock(&sh.mu);
    n += sh.entries.size();
  }
  return n;
}

}  // namespace kvpool
