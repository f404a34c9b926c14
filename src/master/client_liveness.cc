#include "master/client_liveness.h"

#include <cstring>

namespace kvpool {

ClientId ClientId::FromBytes(std::string_view b) {
  ClientId id;
  if (b.size() != 16) return id;
  std::memcpy(&id.hi, b.data(), 8);
  std::memcpy(&id.lo, b.data() + 8, 8);
  return id;
}

bool ClientLiveness::Touch(const ClientId& id) {
  if (id.empty()) return false;
  MutexLock lock(&mu_);
  const int64_t now = clock_.Now();
  auto it = last_seen_.find(id);
  if (it != last_seen_.end()) {
    it->second = now;
    return true;
  }
  if (last_seen_.size() >= max_) return false;
  last_seen_.emplace(id, now);
  return true;
}

bool ClientLiveness::Dead(const ClientId& id) const {
  if (id.empty()) return false;
  MutexLock lock(&mu_);
  auto it = last_seen_.find(id);
  return it != last_seen_.end() && clock_.Now() - it->second > ttl_ms_;
}

bool ClientLiveness::AnyDead() const {
  MutexLock lock(&mu_);
  const int64_t now = clock_.Now();
  for (const auto& [id, seen] : last_seen_) {
    if (now - seen > ttl_ms_) return true;
  }
  return false;
}

size_t ClientLiveness::ForgetDeadAt(int64_t live_ms) {
  MutexLock lock(&mu_);
  return absl::erase_if(
      last_seen_, [&](const auto& e) { return live_ms - e.second > ttl_ms_; });
}

size_t ClientLiveness::size() const {
  MutexLock lock(&mu_);
  return last_seen_.size();
}

}  // namespace kvpool
