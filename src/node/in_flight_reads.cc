#include "node/in_flight_reads.h"

#include <algorithm>
#include <cstring>

#include "node/tenant_key_id.h"

namespace kvpool {

// One enrolled get. Its fields are read and written under the owning
// InFlightReads' mu_ only.
class InFlightReads::Waiter {
 public:
  Waiter(std::string id, uint64_t version, uint8_t* dest, uint64_t length)
      : id(std::move(id)), version(version), dest(dest), length(length) {}
  const std::string id;
  const uint64_t version;
  uint8_t* const dest;
  const uint64_t length;
  bool done = false;  // End has answered it
  bool filled = false;
};

InFlightReads::InFlightReads(bool enabled, std::chrono::milliseconds max_wait)
    : enabled_(enabled), max_wait_(max_wait) {}

InFlightReads::~InFlightReads() = default;

void InFlightReads::Begin(std::string_view tenant, std::string_view key) {
  if (!enabled_) return;
  MutexLock lock(&mu_);
  ++entries_[TenantKeyId(tenant, key)].readers;
}

size_t InFlightReads::End(std::string_view tenant, std::string_view key,
                          uint64_t version, std::span<const uint8_t> bytes) {
  if (!enabled_) return 0;
  MutexLock lock(&mu_);
  auto it = entries_.find(TenantKeyId(tenant, key));
  if (it == entries_.end()) return 0;
  size_t filled = 0;
  // Copied under the lock: a waiter that gave up has been removed, so no
  // copy lands in a buffer its get has left. One value at a time, as a get
  // would have read it.
  for (const auto& w : it->second.waiters) {
    w->done = true;
    if (!bytes.empty() && bytes.size() == w->length && version == w->version) {
      std::memcpy(w->dest, bytes.data(), bytes.size());
      w->filled = true;
      ++filled;
    }
  }
  it->second.waiters.clear();
  if (--it->second.readers <= 0) entries_.erase(it);
  cv_.SignalAll();
  return filled;
}

bool InFlightReads::Reading(std::string_view tenant,
                            std::string_view key) const {
  if (!enabled_) return false;
  MutexLock lock(&mu_);
  return entries_.count(TenantKeyId(tenant, key)) > 0;
}

std::shared_ptr<InFlightReads::Waiter> InFlightReads::Enroll(
    std::string_view tenant, std::string_view key, uint64_t version,
    uint8_t* dest, uint64_t length) {
  if (!enabled_) return nullptr;
  std::string id = TenantKeyId(tenant, key);
  MutexLock lock(&mu_);
  auto it = entries_.find(id);
  if (it == entries_.end()) return nullptr;
  auto w = std::make_shared<Waiter>(std::move(id), version, dest, length);
  it->second.waiters.push_back(w);
  return w;
}

bool InFlightReads::Await(const std::shared_ptr<Waiter>& w) {
  const auto deadline = std::chrono::steady_clock::now() + max_wait_;
  MutexLock lock(&mu_);
  bool timed_out = false;
  while (!w->done) {
    if (!cv_.WaitUntil(&mu_, deadline) && !w->done) {
      timed_out = true;
      break;
    }
  }
  if (!w->done) {
    // Leave before the read ends, so End never writes into `dest`.
    auto it = entries_.find(w->id);
    if (it != entries_.end()) std::erase(it->second.waiters, w);
  }
  if (w->filled) {
    ++stats_.joined;
    return true;
  }
  ++stats_.missed;
  if (timed_out) ++stats_.timeouts;
  return false;
}

InFlightReads::Stats InFlightReads::stats() const {
  MutexLock lock(&mu_);
  return stats_;
}

}  // namespace kvpool
