#include "events/tier_map.h"

#include <algorithm>

namespace kvpool::events {

TierMap::TierMap(size_t capacity) : capacity_(std::max<size_t>(capacity, 1)) {}

TierMap::Tenant& TierMap::TenantLocked(const std::string& name) {
  auto [it, inserted] = tenants_.try_emplace(name);
  if (inserted) it->second.absence_trusted = new_tenants_trusted_;
  return it->second;
}

TierMap::Entry& TierMap::EntryLocked(Tenant& t, const std::string& key) {
  auto [it, inserted] = t.keys.try_emplace(key);
  Entry& e = it->second;
  if (inserted) {
    // A key the map did not hold: absent, and fresh-absent only if the
    // tenant's absence is trusted.
    e.generation = t.absence_trusted ? generation_ : 0;
    lru_.emplace_front(&t, &it->first);
    e.lru = lru_.begin();
    ++entries_;
    EnforceCapacityLocked();
  } else {
    lru_.splice(lru_.begin(), lru_, e.lru);
  }
  e.version = ++version_;
  return e;
}

void TierMap::EraseLocked(Tenant& t, const std::string& key) {
  auto it = t.keys.find(key);
  if (it == t.keys.end()) return;
  lru_.erase(it->second.lru);
  t.keys.erase(it);
  --entries_;
}

void TierMap::ResetTenantLocked(Tenant& t) {
  for (auto& [key, e] : t.keys) lru_.erase(e.lru);
  entries_ -= t.keys.size();
  t.keys.clear();
  t.absence_trusted = true;
  t.reset_version = ++version_;
  ++stats_.tenant_resets;
}

void TierMap::EnforceCapacityLocked() {
  while (entries_ > capacity_) {
    auto [t, key] = lru_.back();
    // The key is still in the store, but the map will not know it: the
    // tenant's unknown keys must be looked up from now on.
    t->absence_trusted = false;
    auto it = t->keys.find(*key);
    lru_.pop_back();
    t->keys.erase(it);
    --entries_;
    ++stats_.capacity_evictions;
  }
}

namespace {

constexpr uint8_t kMemory = kMediumDram | kMediumPrefetchBuffer;

bool HasMedium(const std::vector<Holder>& hs, uint8_t medium) {
  for (const auto& h : hs) {
    if ((h.medium & medium) != 0) return true;
  }
  return false;
}

}  // namespace

void TierMap::AddCopy(Entry& e, uint8_t medium, const std::string& node) {
  e.media |= medium;
  if (node.empty()) return;  // a publisher that names no holder
  auto& hs = e.holders;
  std::erase(hs, Holder{medium, node});
  if (hs.size() >= kMaxHoldersPerKey) hs.pop_back();
  // As the master lists replicas: a new memory copy first (a promotion or
  // a re-registered segment goes in front), an SSD copy after the others.
  if (medium == kMediumSsd) {
    hs.push_back(Holder{medium, node});
  } else {
    hs.insert(hs.begin(), Holder{medium, node});
  }
}

void TierMap::RemoveCopy(Entry& e, uint8_t medium, const std::string& node) {
  auto& hs = e.holders;
  // A lookup's memory copy may have been DRAM or a prefetch buffer: a
  // removal of either on its node (or, naming no node, of any) drops it.
  uint8_t match = medium;
  if (e.memory_unsure && medium != kMediumSsd) match = kMemory;
  std::erase_if(hs, [&](const Holder& h) {
    return (h.medium & match) != 0 && (node.empty() || h.node == node);
  });
  // The tier stays while another node's copy of it is left.
  for (uint8_t m = match; m != 0; m &= m - 1) {
    const auto bit = static_cast<uint8_t>(m & -m);
    if (node.empty() || !HasMedium(hs, bit))
      e.media &= static_cast<uint8_t>(~bit);
  }
  if ((e.media & kMemory) == 0) e.memory_unsure = false;
}

void TierMap::Apply(std::span<const DecodedEvent> events) {
  WriterLock lock(&mu_);
  for (const auto& ev : events) {
    ++stats_.events_applied;
    if (ev.op == BlockOp::kClear) {
      if (!ev.tenant.empty()) {
        ResetTenantLocked(TenantLocked(ev.tenant));
        continue;
      }
      for (auto& [name, t] : tenants_) ResetTenantLocked(t);
      new_tenants_trusted_ = true;
      continue;
    }
    Tenant& t = TenantLocked(ev.tenant);
    auto it = t.keys.find(ev.key);
    const bool prior_fresh = it != t.keys.end()
                                 ? it->second.generation == generation_
                                 : t.absence_trusted;
    // A removal of a key known absent: nothing to record.
    if (it == t.keys.end() && ev.op == BlockOp::kRemove && prior_fresh)
      continue;
    Entry& e = EntryLocked(t, ev.key);
    if (ev.op == BlockOp::kAdd) {
      AddCopy(e, ev.medium, ev.node);
      e.size = ev.size;
    } else {
      RemoveCopy(e, ev.medium, ev.node);
    }
    // Events on a stale view keep it stale: what was missed is still
    // missing. On a fresh one they keep it exact.
    e.generation = prior_fresh ? generation_ : 0;
    if (e.media == 0) {
      e.holders.clear();
      // Where absence is trusted, no entry is the record of "no copy";
      // elsewhere the entry stays, so that Learn sees the change.
      if (t.absence_trusted) EraseLocked(t, ev.key);
    }
  }
}

void TierMap::MarkAllStale() {
  WriterLock lock(&mu_);
  ++generation_;
  for (auto& [name, t] : tenants_) t.absence_trusted = false;
  new_tenants_trusted_ = false;
  stale_version_ = ++version_;
  ++stats_.stale_marks;
}

void TierMap::ResetToStreamStart() {
  WriterLock lock(&mu_);
  for (auto& [name, t] : tenants_) ResetTenantLocked(t);
  new_tenants_trusted_ = true;
  stale_version_ = ++version_;
}

void TierMap::Query(const std::string& tenant,
                    std::span<const std::string> keys,
                    std::vector<KeyState>* out) const {
  out->assign(keys.size(), KeyState());
  ReaderLock lock(&mu_);
  auto t = tenants_.find(tenant);
  for (size_t i = 0; i < keys.size(); ++i) {
    KeyState& s = (*out)[i];
    if (t == tenants_.end()) {
      s.fresh = new_tenants_trusted_;
      continue;
    }
    auto it = t->second.keys.find(keys[i]);
    if (it == t->second.keys.end()) {
      s.fresh = t->second.absence_trusted;
      continue;
    }
    const Entry& e = it->second;
    s.fresh = e.generation == generation_;
    s.media = e.media;
    s.size = e.size;
    // As a lookup names the holder of the best tier.
    const uint8_t best =
        (e.media & kMemory) != 0 ? kMemory : uint8_t{kMediumSsd};
    for (const auto& h : e.holders) {
      if ((h.medium & best) != 0) {
        s.node = h.node;
        break;
      }
    }
  }
}

uint64_t TierMap::version() const {
  ReaderLock lock(&mu_);
  return version_;
}

void TierMap::Learn(const std::string& tenant, const std::string& key,
                    uint8_t media, uint64_t size, const std::string& node,
                    uint64_t since) {
  std::vector<Holder> holders;
  if (!node.empty()) {
    for (uint8_t m = media; m != 0; m &= m - 1)
      holders.push_back(Holder{static_cast<uint8_t>(m & -m), node});
  }
  Learn(tenant, key, media, size, std::move(holders), since);
}

void TierMap::Learn(const std::string& tenant, const std::string& key,
                    uint8_t media, uint64_t size, std::vector<Holder> holders,
                    uint64_t since) {
  WriterLock lock(&mu_);
  Tenant& t = TenantLocked(tenant);
  auto it = t.keys.find(key);
  if (stale_version_ > since || t.reset_version > since ||
      (it != t.keys.end() && it->second.version > since)) {
    ++stats_.learn_skipped;
    return;
  }
  ++stats_.learned;
  if (media == 0 && t.absence_trusted) {
    EraseLocked(t, key);
    return;
  }
  Entry& e = EntryLocked(t, key);
  e.media = media;
  e.size = size;
  if (holders.size() > kMaxHoldersPerKey) holders.resize(kMaxHoldersPerKey);
  e.holders = std::move(holders);
  e.memory_unsure = (media & (kMediumDram | kMediumPrefetchBuffer)) != 0;
  e.generation = generation_;
}

std::vector<Holder> TierMap::HoldersOf(const std::string& tenant,
                                       const std::string& key) const {
  ReaderLock lock(&mu_);
  auto t = tenants_.find(tenant);
  if (t == tenants_.end()) return {};
  auto it = t->second.keys.find(key);
  return it == t->second.keys.end() ? std::vector<Holder>()
                                    : it->second.holders;
}

TierMapStats TierMap::stats() const {
  ReaderLock lock(&mu_);
  TierMapStats s = stats_;
  s.entries = entries_;
  s.tenants = tenants_.size();
  return s;
}

}  // namespace kvpool::events
